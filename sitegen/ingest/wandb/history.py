"""What the records of a W&B run file hold: history rows, the summary fold, the run's state.

Split from the reader so each module stays small: the history and summary records are the bulk
of a file, read with the vectorized walk of :mod:`.fast`; the few others are read one by one
in :mod:`sitegen.ingest.wandb`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sitegen.errors import Problem
from sitegen.ingest.protowire import LEN, WireError, iter_fields
from sitegen.ingest.wandb import fast
from sitegen.ingest.wandb.spans import key_codes, numbers

SYSTEM = ("_step", "_timestamp", "_runtime")


@dataclass
class State:
    """What the files of one run add up to, in record order."""

    tags: dict[str, int] = field(default_factory=dict)
    codes: list[np.ndarray] = field(default_factory=list)
    steps: list[np.ndarray] = field(default_factory=list)
    walls: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    exit: tuple[int, int] | None = None
    start: float | None = None
    media: list[tuple[str, int, float, str]] = field(default_factory=list)  # (tag, step, wall, file name) of images

    def code(self, name: str) -> int:
        return self.tags.setdefault(name, len(self.tags))


def text(v: Any) -> str:
    return bytes(v).decode("utf-8", errors="replace") if isinstance(v, memoryview) else ""


def key_name(raw: bytes | memoryview) -> str | None:
    """The name of an item from its key fields: ``nested_key`` parts joined by ``.``, else ``key``."""
    key, nested = "", []
    for num, wt, v in iter_fields(raw):
        if num == 1 and wt == LEN:
            key = text(v)
        elif num == 2 and wt == LEN:
            nested.append(text(v))
    name = ".".join(nested) if nested else key
    return name or None


def json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def flat_numbers(obj: Any, prefix: str, out: list[tuple[str, float]]) -> None:
    """Numeric leaves of a nested dict logged as one JSON value (wandb 0.16); media and tables
    (a ``_type`` key) are not charts."""
    if isinstance(obj, dict):
        if "_type" in obj:
            return
        for k, v in obj.items():
            flat_numbers(v, f"{prefix}.{k}", out)
    elif isinstance(obj, float):
        out.append((prefix, obj))
    elif isinstance(obj, int) and not isinstance(obj, bool):
        out.append((prefix, float(obj) if abs(obj) < 2**1023 else math.copysign(math.inf, obj)))


def buffer_order(start: np.ndarray, split: int) -> np.ndarray:
    """A permutation putting messages (given in file order) in buffer order: the records joined
    from several chunks live after the file's ``split`` bytes, so that is two runs; a message's
    place in the file stays ``perm[j]``. Anything else is sorted."""
    n = len(start)
    perm = np.arange(n)
    if n > 1 and (start[1:] < start[:-1]).any():
        late = start >= split
        perm = np.concatenate([np.flatnonzero(~late), np.flatnonzero(late)])
        s = start[perm]
        if (s[1:] < s[:-1]).any():
            perm = np.argsort(start, kind="stable")
    return perm


def _steps(buf: np.ndarray, hist: fast.Fields, n: int) -> np.ndarray:
    """The ``step.num`` of each history record (0 without one). Fast path: the step message is
    exactly one varint field of at most 4 bytes (steps under 2^28), read from the field's head
    word; otherwise every step message is walked."""
    steps = np.zeros(n, np.int64)
    st = hist.pick(2)
    if not len(st):
        return steps
    assert hist.head is not None
    h, size = hist.head[st], hist.stop[st] - hist.start[st]
    value, ok = np.zeros(len(st), np.int64), (h & 0xFF) == 0x08
    going = ok.copy()
    for i in range(1, 5):  # varint byte i of the field
        b = (h >> (8 * i)) & 0xFF
        value |= np.where(going, (b & 0x7F) << (7 * (i - 1)), 0)
        ends = going & (b < 0x80)
        ok &= ~ends | (size == i + 1)
        going &= ~ends
    ok &= ~going
    if (ok | (size == 0)).all():
        steps[hist.owner[st[ok]]] = value[ok]
        return steps
    sf = fast.walk(buf, hist.start[st], hist.stop[st])
    nums = sf.pick(1, fast.VARINT)
    steps[hist.owner[st[sf.owner[nums]]]] = sf.value[nums].astype(np.int64)
    return steps


def history_rows(
    buf: np.ndarray,
    spans: fast.Fields,
    picked: np.ndarray,
    state: State,
    path: str,
    offsets: np.ndarray,
    problems: list[Problem],
    split: int,
) -> None:
    """The history records ``picked`` (indexes into ``spans``, the Records' top-level fields, in
    file order). Read in buffer order; the rows are put back in file order at the end."""
    perm = buffer_order(spans.start[picked], split)
    picked = picked[perm]
    hist = fast.fields(buf, spans.start[picked], spans.stop[picked])
    bad = np.flatnonzero(hist.broken)
    if len(bad):
        first = bad[np.argmin(perm[bad])]
        problems.append(
            Problem(
                path,
                int(offsets[spans.owner[picked[first]]]),
                "bad-record",
                "a history record is not well-formed; its items before the damage kept",
            )
        )
    n = len(picked)
    steps = _steps(buf, hist, n)
    it = hist.pick(1)
    row = hist.owner[it]  # history record of each item
    # an item's place in the file: its record's place, then its place in the record
    place = perm[row] * 2**32 + (hist.tag_at[it] - spans.start[picked][row])
    ks, ke, vs, ve, ok = item_spans(buf, hist, it)
    interleaved = ok & (vs >= ks) & (vs < ke)
    codes, names = key_codes(buf, ks[ok & ~interleaved], ke[ok & ~interleaved])
    tag_of = np.array([tag_code(state, b) for b in names] + [-1], np.int64)
    code = np.full(len(it), -1, np.int64)
    code[ok & ~interleaved] = tag_of[codes]
    for i in np.flatnonzero(interleaved).tolist():  # key fields around the value: named one by one
        name = key_name(buf[hist.start[it[i]] : hist.stop[it[i]]].tobytes())  # (the value field is not a key field)
        code[i] = state.code(name) if name else -1
    skip = [c for t, c in state.tags.items() if t == "_runtime" or t.startswith("_wandb")]
    wanted = np.flatnonzero(ok & ~_member(code, skip, len(state.tags)))  # (not parsed: values never shown)
    values, numeric = np.full(len(it), np.nan), np.zeros(len(it), bool)
    values[wanted], numeric[wanted] = numbers(buf, vs[wanted], np.maximum(ve, vs)[wanted])
    walls = np.full(n, np.nan)
    for name, target in (("_step", steps), ("_timestamp", walls)):
        c = state.tags.get(name)
        if c is None:
            continue
        sel = np.flatnonzero(numeric & (code == c))
        sel = sel[np.argsort(place[sel], kind="stable")]  # the last one in a record wins
        v = values[sel]
        if name == "_step":
            good = np.isfinite(v) & (np.abs(v) < 2**63)
            target[row[sel[good]]] = v[good].astype(np.int64)
        else:
            target[row[sel]] = v
    system = np.array([state.tags.get(s, -2) for s in SYSTEM])
    dropped = [c for t, c in state.tags.items() if t.startswith("_wandb")] + [c for c in system.tolist() if c >= 0]
    # media and tables (wandb >= 0.2x logs them as leaf items beside a ``<key>._type``): not charts
    typed = {t[: -len("._type")] for t in state.tags if t.endswith("._type")}
    parts = {t: c for t, c in state.tags.items() if any(t.startswith(p + ".") for p in typed)}
    keep = numeric & ~_member(code, dropped + list(parts.values()), len(state.tags))
    found = []
    for tag in typed:
        c = state.tags.get(tag + ".path")
        found += [(int(place[i]), tag, i) for i in (np.flatnonzero(code == c).tolist() if c is not None else [])]
    for _, tag, i in sorted(found):
        media_item(
            state, tag, int(steps[row[i]]), float(walls[row[i]]), json_value(buf[vs[i] : ve[i]].tobytes().decode("utf-8", "replace"))
        )
    sel = np.flatnonzero(keep)
    extra_c, extra_r, extra_v, extra_p = [], [], [], []
    lead = buf[np.minimum(vs, len(buf) - 1)]
    objects = np.flatnonzero(ok & ~numeric & (code >= 0) & (lead == ord("{")) & (ve > vs))
    for i in objects[np.argsort(place[objects], kind="stable")].tolist():
        obj = json_value(buf[vs[i] : ve[i]].tobytes().decode("utf-8", errors="replace"))
        leaves: list[tuple[str, float]] = []
        name = next(t for t, c in state.tags.items() if c == code[i])
        flat_numbers(obj, name, leaves)
        if isinstance(obj, dict) and obj.get("_type") == "image-file":  # wandb 0.16: the item is the dict
            media_item(state, name, int(steps[row[i]]), float(walls[row[i]]), obj.get("path"))
        for leaf, number in leaves:
            extra_c.append(state.code(leaf))
            extra_r.append(int(row[i]))
            extra_v.append(number)
            extra_p.append(int(place[i]))
    rows = np.concatenate([row[sel], np.array(extra_r, np.int64)])
    order = np.argsort(np.concatenate([place[sel], np.array(extra_p, np.int64)]), kind="stable")  # back in file order
    rows = rows[order]
    state.codes.append(np.concatenate([code[sel], np.array(extra_c, np.int64)])[order])
    state.steps.append(steps[rows])
    state.walls.append(walls[rows])
    state.values.append(np.concatenate([values[sel], np.array(extra_v, np.float64)])[order])


def _member(code: np.ndarray, chosen: list[int], count: int) -> np.ndarray:
    """Whether each tag code is one of ``chosen`` (or -1, no tag), by one lookup per code."""
    table = np.zeros(count + 1, bool)
    table[chosen] = True
    table[-1] = True
    return table[code]


def item_spans(buf: np.ndarray, f: fast.Fields, sel: np.ndarray) -> tuple[np.ndarray, ...]:
    """(key start, key stop, value start, value stop, ok) of the items that are the fields ``sel``
    of ``f``: the common layout in one pass (:func:`fast.items`), the others walked field by field."""
    start, stop = f.start[sel], f.stop[sel]
    ks, ke, vs, ve, ok = fast.items(buf, f, sel)  # (new arrays: the odd items are filled in below)
    odd = np.flatnonzero(~ok)
    if len(odd):
        m = len(odd)
        items = fast.walk(buf, start[odd], stop[odd])
        keyf = np.flatnonzero(((items.number == 1) | (items.number == 2)) & (items.wire == LEN))
        valf = items.pick(16)
        has_key = np.zeros(m, bool)
        if len(keyf):
            own = items.owner[keyf]
            firsts = np.concatenate([[True], own[1:] != own[:-1]])
            lasts = np.concatenate([own[1:] != own[:-1], [True]])
            ks[odd[own[firsts]]] = items.tag_at[keyf[firsts]]
            ke[odd[own[lasts]]] = items.stop[keyf[lasts]]
            has_key[own] = True
        got_value = np.zeros(m, bool)
        got_value[items.owner[valf]] = True
        vs[odd[items.owner[valf]]], ve[odd[items.owner[valf]]] = items.start[valf], items.stop[valf]  # the last one wins
        ok[odd] = has_key & got_value & ~items.broken
    return ks, ke, vs, ve, ok


MEDIA_NAME = re.compile(r"media/images/([A-Za-z0-9_.\-]+)")


def media_item(state: State, tag: str, step: int, wall: float, path: Any) -> None:
    """An image a history row names (its file under ``files/media/images/``): only the file
    name is kept, and only when it is a plain name; the file is found by listing that folder."""
    m = MEDIA_NAME.fullmatch(path) if isinstance(path, str) else None
    if m and not m.group(1).startswith("."):
        state.media.append((tag, step, wall, m.group(1)))


def tag_code(state: State, raw: bytes) -> int:
    try:
        name = key_name(raw)
    except WireError:
        return -1
    return state.code(name) if name else -1


def fold_summary(buf: np.ndarray, top: fast.Fields, picked: np.ndarray, state: State, split: int) -> None:
    """Summary records folded in order: per key, the last update or remove wins.

    Only the last operation on each key matters, so the items in the writer's layout (key
    fields, then the value to the end) are told apart by their key alone, and only the winners'
    values are located; any other item is read field by field. (The winners are checked again
    with :func:`fast.items`; should one fail, the fold is redone with every item read in full.)
    A record repeated byte for byte just after it is left out first (:func:`repeated`)."""
    if not len(picked):
        return
    picked = picked[~repeated(buf, top.start[picked], top.stop[picked])]
    perm = buffer_order(top.start[picked], split)
    picked = picked[perm]
    msgs = fast.fields(buf, top.start[picked], top.stop[picked])
    ops = np.flatnonzero(((msgs.number == 1) | (msgs.number == 2)) & (msgs.wire == LEN))
    owner = msgs.owner[ops]
    place = perm[owner] * 2**32 + (msgs.tag_at[ops] - top.start[picked][owner])  # file order
    if not _fold(buf, msgs, ops, place, state, lazy=True):
        _fold(buf, msgs, ops, place, state, lazy=False)


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


def _fold(buf: np.ndarray, msgs: fast.Fields, ops: np.ndarray, place: np.ndarray, state: State, lazy: bool) -> bool:
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
        return True
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
            return False
    named = list(ids)
    for j in wins.tolist():
        op = int(idx[j])
        name = named[by_name[j]]
        if not name:
            continue
        if msgs.number[ops[op]] == 2:
            state.summary.pop(name, None)
            continue
        value = buf[vs[op] : ve[op]].tobytes().decode("utf-8", errors="replace")
        state.summary[name] = value
    return True
