"""The summary records of a W&B run file folded into the run's summary: per key, the last
update or remove wins.

Split from :mod:`.history` (the history rows): the same vectorized walk, but only the last
operation on each key is read in full.
"""

from __future__ import annotations

import numpy as np

from sitegen.ingest.protowire import LEN, WireError
from sitegen.ingest.wandb import fast
from sitegen.ingest.wandb.history import State, buffer_order, item_spans, key_name
from sitegen.ingest.wandb.spans import key_codes

#: a block's last operation on a key: (its place in the file, the key, its value or None for a remove)
Win = tuple[int, str, "str | None"]


def fold_summary(buf: np.ndarray, top: fast.Fields, picked: np.ndarray, state: State, split: int) -> None:
    """Summary records folded in order: per key, the last update or remove wins.

    Only the last operation on each key matters, so the items in the writer's layout (key
    fields, then the value to the end) are told apart by their key alone, and only the winners'
    values are located; any other item is read field by field. (The winners are checked again
    with :func:`fast.items`; should one fail, the block is folded again with every item read in
    full.) A record repeated byte for byte just after it is left out first (:func:`repeated`).
    Blocks of records in buffer order give their last operation per key; of those, the last per
    key wins, applied in buffer order (the order one fold over all records applies them)."""
    if not len(picked):
        return
    picked = picked[~repeated(buf, top.start[picked], top.stop[picked])]
    perm = buffer_order(top.start[picked], split)
    picked = picked[perm]
    last: dict[str, tuple[int, int, int, str | None]] = {}  # key: (place, block, rank in block, value)
    for b, a in enumerate(range(0, len(picked), fast.BLOCK_RECORDS)):
        sel, order = picked[a : a + fast.BLOCK_RECORDS], perm[a : a + fast.BLOCK_RECORDS]
        msgs = fast.fields(buf, top.start[sel], top.stop[sel])
        ops = np.flatnonzero(((msgs.number == 1) | (msgs.number == 2)) & (msgs.wire == LEN))
        owner = msgs.owner[ops]
        place = order[owner] * 2**32 + (msgs.tag_at[ops] - top.start[sel][owner])  # file order
        wins = _fold(buf, msgs, ops, place, lazy=True)
        if wins is None:
            wins = _fold(buf, msgs, ops, place, lazy=False)
        assert wins is not None
        for rank, (at, name, value) in enumerate(wins):
            if name not in last or last[name][0] < at:
                last[name] = (at, b, rank, value)
    for name, (_, _, _, value) in sorted(last.items(), key=lambda kv: kv[1][1:3]):
        if value is None:
            state.summary.pop(name, None)
        else:
            state.summary[name] = value


def repeated(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Whether each message (in file order) is byte for byte the same as one of the next two.

    Why: wandb writes, after every step's summary record, one of the run's ``_runtime`` alone,
    the same bytes until the next second; a summary record repeated later changes nothing the
    later one does not do again, so only the last of a run of them needs folding. Candidates share
    their length and first and last 8 bytes; each is then compared in full, a word at a time
    (messages under 8 bytes are never dropped)."""
    length = stop - start
    buf = fast.padded(buf, stop)
    head, tail = fast.words(buf, start), fast.words(buf, np.maximum(stop - 8, start))
    out = np.zeros(len(start), bool)
    for d in (1, 2):
        i = np.flatnonzero((length[:-d] == length[d:]) & (head[:-d] == head[d:]) & (tail[:-d] == tail[d:]) & (length[:-d] >= 8))
        k = 8  # the bytes between the first and last 8
        while len(i):
            whole = k >= length[i] - 8
            out[i[whole]] = True
            i = i[~whole]
            i, k = i[fast.words(buf, start[i] + k) == fast.words(buf, start[i + d] + k)], k + 8
    return out


def _fold(buf: np.ndarray, msgs: fast.Fields, ops: np.ndarray, place: np.ndarray, lazy: bool) -> list[Win] | None:
    """The last operation per key of the operations ``ops`` (fields of ``msgs``), in their order;
    None when a winner read by its key alone (``lazy``) is not in the writer's layout after all."""
    removes = msgs.number[ops] == 2  # an item of key fields only: its bytes are its key
    ks, ke = msgs.start[ops].copy(), msgs.stop[ops].copy()
    vs, ve = ke.copy(), ke.copy()
    ok = removes.copy()
    guess = np.zeros(len(ops), bool)
    if lazy:
        ke_guess, guess = fast.item_key(buf, msgs, ops)
        guess &= ~removes
        ke[guess] = ke_guess[guess]
        ok |= guess
    exact = np.flatnonzero(~removes & ~guess)
    if len(exact):
        ks[exact], ke[exact], vs[exact], ve[exact], ok[exact] = item_spans(buf, msgs, ops[exact])
    idx = np.flatnonzero(ok)
    if not len(idx):
        return []
    codes, names = key_codes(buf, ks[idx], ke[idx])
    label = []  # a key's name: ``key`` and a one-part ``nested_key`` name the same key
    ids: dict[str, int] = {}
    for raw_key in names:
        try:
            name = key_name(raw_key) or ""
        except WireError:
            name = ""
        label.append(ids.setdefault(name, len(ids)))
    by_name = np.array(label, np.int64)[codes]
    last = np.full(len(ids), -1, np.int64)
    np.maximum.at(last, by_name, place[idx])
    wins = np.flatnonzero(place[idx] == last[by_name])  # per key, its last operation
    checked = idx[wins][guess[idx[wins]]]
    if len(checked):
        _, _, vs[checked], ve[checked], fine = fast.items(buf, msgs, ops[checked])
        if not fine.all():
            return None
    named = list(ids)
    out: list[Win] = []
    for j in wins.tolist():
        op = int(idx[j])
        name = named[by_name[j]]
        if not name:
            continue
        if msgs.number[ops[op]] == 2:
            out.append((int(place[op]), name, None))
            continue
        out.append((int(place[op]), name, buf[vs[op] : ve[op]].tobytes().decode("utf-8", errors="replace")))
    return out
