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
    file order). Read in buffer order, a block at a time (:func:`_block`); the rows are put back
    in file order at the end."""
    perm = buffer_order(spans.start[picked], split)
    picked = picked[perm]
    n = len(picked)
    blocks = [
        _block(buf, spans, picked[a : a + fast.BLOCK_RECORDS], perm[a : a + fast.BLOCK_RECORDS], a, state)
        for a in range(0, n, fast.BLOCK_RECORDS)
    ]
    cols = {k: np.concatenate([b[k] for b in blocks]) for k in blocks[0]}
    bad = np.flatnonzero(cols["broken"])
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
    steps, code, values, row, place = cols["steps"], cols["code"], cols["value"], cols["row"], cols["place"]
    t_code, t_row, t_place, vs, ve = cols["t_code"], cols["t_row"], cols["t_place"], cols["t_vs"], cols["t_ve"]
    if len(cols["i_row"]):  # key fields around the value: named one by one, after every block's keys
        i_code = np.array([_named(state, buf[s:e].tobytes()) for s, e in zip(cols["i_start"].tolist(), cols["i_stop"].tolist())], np.int64)
        i_vs, i_ve = cols["i_vs"], cols["i_ve"]
        wanted = np.flatnonzero(~_member(i_code, _skipped(state), len(state.tags)))
        parsed, numeric = numbers(buf, i_vs[wanted], np.maximum(i_ve, i_vs)[wanted])
        num, text = wanted[numeric], np.setdiff1d(np.flatnonzero(i_code >= 0), wanted[numeric])
        code, values = np.concatenate([code, i_code[num]]), np.concatenate([values, parsed[numeric]])
        row, place = np.concatenate([row, cols["i_row"][num]]), np.concatenate([place, cols["i_place"][num]])
        t_code, t_row, t_place = (
            np.concatenate([a, b[text]]) for a, b in ((t_code, i_code), (t_row, cols["i_row"]), (t_place, cols["i_place"]))
        )
        vs, ve = np.concatenate([vs, i_vs[text]]), np.concatenate([ve, i_ve[text]])
    # below: ``code``/``values``/``row``/``place``: the items whose value is a number, in any order
    # (every use sorts by place); ``t_*``: the other items with a tag (media paths, JSON objects)
    walls = np.full(n, np.nan)
    for name, target in (("_step", steps), ("_timestamp", walls)):
        c = state.tags.get(name)
        if c is None:
            continue
        sel = np.flatnonzero(code == c)
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
    keep = ~_member(code, dropped + list(parts.values()), len(state.tags))
    found = []
    for tag in typed:  # (an item whose value is a number names no file)
        c = state.tags.get(tag + ".path")
        found += [(int(t_place[i]), tag, i) for i in (np.flatnonzero(t_code == c).tolist() if c is not None else [])]
    for _, tag, i in sorted(found):
        media_item(
            state, tag, int(steps[t_row[i]]), float(walls[t_row[i]]), json_value(buf[vs[i] : ve[i]].tobytes().decode("utf-8", "replace"))
        )
    sel = np.flatnonzero(keep)
    extra_c, extra_r, extra_v, extra_p = [], [], [], []
    lead = buf[np.minimum(vs, len(buf) - 1)]
    objects = np.flatnonzero((lead == ord("{")) & (ve > vs))
    for i in objects[np.argsort(t_place[objects], kind="stable")].tolist():
        obj = json_value(buf[vs[i] : ve[i]].tobytes().decode("utf-8", errors="replace"))
        leaves: list[tuple[str, float]] = []
        name = next(t for t, c in state.tags.items() if c == t_code[i])
        flat_numbers(obj, name, leaves)
        if isinstance(obj, dict) and obj.get("_type") == "image-file":  # wandb 0.16: the item is the dict
            media_item(state, name, int(steps[t_row[i]]), float(walls[t_row[i]]), obj.get("path"))
        for leaf, number in leaves:
            extra_c.append(state.code(leaf))
            extra_r.append(int(t_row[i]))
            extra_v.append(number)
            extra_p.append(int(t_place[i]))
    rows = np.concatenate([row[sel], np.array(extra_r, np.int64)])
    order = np.argsort(np.concatenate([place[sel], np.array(extra_p, np.int64)]), kind="stable")  # back in file order
    rows = rows[order]
    state.codes.append(np.concatenate([code[sel], np.array(extra_c, np.int64)])[order])
    state.steps.append(steps[rows])
    state.walls.append(walls[rows])
    state.values.append(np.concatenate([values[sel], np.array(extra_v, np.float64)])[order])


def _block(buf: np.ndarray, spans: fast.Fields, picked: np.ndarray, perm: np.ndarray, first: int, state: State) -> dict[str, np.ndarray]:
    """The items of the history records ``picked`` (records ``first...`` in buffer order; ``perm``:
    their places in the file): tags coded (new ones in order of first use) and numbers parsed."""
    hist = fast.fields(buf, spans.start[picked], spans.stop[picked])
    steps = _steps(buf, hist, len(picked))
    it = hist.pick(1)
    local = hist.owner[it]  # history record of each item
    # an item's place in the file: its record's place, then its place in the record
    place = perm[local] * 2**32 + (hist.tag_at[it] - spans.start[picked][local])
    row = local + first
    ks, ke, vs, ve, ok = item_spans(buf, hist, it)
    interleaved = ok & (vs >= ks) & (vs < ke)
    plain = ok & ~interleaved
    codes, names = key_codes(buf, ks[plain], ke[plain])
    tag_of = np.array([tag_code(state, b) for b in names] + [-1], np.int64)
    code = np.full(len(it), -1, np.int64)
    code[plain] = tag_of[codes]
    wanted = np.flatnonzero(~_member(code, _skipped(state), len(state.tags)))  # (not parsed: values never shown)
    values, numeric = numbers(buf, vs[wanted], np.maximum(ve, vs)[wanted])
    num = wanted[numeric]
    other = code >= 0
    other[num] = False
    text = np.flatnonzero(other)
    odd = np.flatnonzero(interleaved)
    return {
        "steps": steps,
        "broken": hist.broken,
        "code": code[num],
        "value": values[numeric],
        "row": row[num],
        "place": place[num],
        "t_code": code[text],
        "t_row": row[text],
        "t_place": place[text],
        "t_vs": vs[text],
        "t_ve": ve[text],
        "i_row": row[odd],
        "i_place": place[odd],
        "i_start": hist.start[it[odd]],
        "i_stop": hist.stop[it[odd]],
        "i_vs": vs[odd],
        "i_ve": ve[odd],
    }


def _skipped(state: State) -> list[int]:
    """The codes of the tags whose values are never shown (``_runtime``, ``_wandb.*``)."""
    return [c for t, c in state.tags.items() if t == "_runtime" or t.startswith("_wandb")]


def _named(state: State, raw: bytes) -> int:
    name = key_name(raw)  # (the value field is not a key field)
    return state.code(name) if name else -1


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
