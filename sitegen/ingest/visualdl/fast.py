"""VisualDL record framing: protobuf wire primitives, the damage-tolerant walk, and the vectorized
scalar path.

A VisualDL file is ``u64 LE length + visualdl.Record payload`` repeated, with no CRC, so a record is
valid when its payload parses. :func:`walk` goes record by record (the slow path, which is the
oracle) and, when ``fast`` is on, hands periodic stretches of scalar records to numpy:

* every slow-parsed scalar record that has the plain writer layout (one Value; id, tag, timestamp,
  value or tag_value, each at most once) gets a *key*: its length, where its variable bytes are
  (id varint, timestamp varint, the 4 value bytes) and every other byte;
* when the last ``2P`` keys repeat with period ``P`` (the same tags each step), the next bytes are
  predicted to be whole rows of those ``P`` records: fixed bytes equal, varint continuation bits
  right. Rows are verified in bulk (geometrically growing blocks, compared as aligned u64 words)
  and each block is decoded while still in cache: step/timestamp/value come out of strided views,
  a row's shared step (and runs of equal timestamps) decoded once, straight into the output
  columns (:class:`_Columns`), so the table needs no concatenation. A row that differs (a new tag, a wider
  step varint, an image, damage) ends the stretch and the slow walk takes over.

Where the log is not periodic (tags in varying order), period searches back off exponentially and
records go through the per-record parser, whose common scalar layout is decoded inline.

A verified row has byte-for-byte the structure of its template record, so it parses to exactly
what the slow parser would return; the tests check that on real files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from sitegen.errors import Problem

HEADER = 8
MAX_PERIOD = 1024  # records per period (tags logged per step) the vectorized path learns
MAX_LEN = 1 << 31  # protobuf's own message cap; longer lengths are damage, never allocated
_M64 = (1 << 64) - 1


class BadWire(ValueError):
    """The bytes are not a valid protobuf message."""


class ShortWire(BadWire):
    """The bytes end inside a field: a valid prefix of a longer message."""


def varint(b: bytes, p: int, e: int) -> tuple[int, int]:
    r = s = 0
    while p < e:
        x = b[p]
        p += 1
        r |= (x & 0x7F) << s
        if x < 0x80:
            return r & _M64, p
        s += 7
        if s >= 70:
            raise BadWire("varint longer than 10 bytes")
    raise ShortWire("varint runs past the end")


def fields(b: bytes, p: int, e: int):
    """Yield ``(number, wire_type, value, start, stop)`` for each field of the message ``b[p:e]``.

    value: the integer for varints; the start offset for fixed32/fixed64 and LEN fields, whose bytes
    are ``b[start:stop]``.
    """
    while p < e:
        key, p = varint(b, p, e)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise BadWire("field number 0")
        start = p
        if wt == 0:
            v, p = varint(b, p, e)
        elif wt == 2:
            n, start = varint(b, p, e)
            if n > e - start:
                raise ShortWire("length-delimited field runs past the end")
            v, p = start, start + n
        elif wt == 5 or wt == 1:
            p += 4 if wt == 5 else 8
            if p > e:
                raise ShortWire("fixed-width field runs past the end")
            v = start
        else:
            raise BadWire(f"unsupported wire type {wt}")
        yield num, wt, v, start, p


def signed(v: int) -> int:
    return v - (1 << 64) if v >> 63 else v


@dataclass
class Scalar:
    """A scalar as the record parser returns it; ``layout`` is set for templatable records:
    ((id start, id stop) | None, (ts start, ts stop) | None, value start), absolute offsets."""

    tag: str
    step: int
    ts: int
    bits: int  # the raw float32 bits
    layout: tuple | None = None


@dataclass
class Walk:
    end: int = 0
    problems: list[Problem] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    # the scalars in file order: (tag pattern, records) runs, whose tag indices are ``pattern``
    # repeated (a vectorized stretch keeps one period, slow-parsed records one index each) ...
    chunks: list[tuple[np.ndarray, int]] = field(default_factory=list)
    # ... and their step, wall time (seconds) and value (float64) columns
    columns: tuple[np.ndarray, ...] = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    others: list[tuple[int, object]] = field(default_factory=list)  # (record offset, parsed item)
    fast_records: int = 0


class _Columns:
    """Growable step / wall time / value arrays that both paths decode straight into, so that the
    table needs no concatenation (a stretch reserves room for as many rows as could follow)."""

    def __init__(self) -> None:
        self.n = 0
        self.arrays = [np.empty(0, np.int64), np.empty(0), np.empty(0)]

    def reserve(self, k: int) -> list[np.ndarray]:
        """Room for ``k`` more records: views to fill, made part of the columns by :meth:`commit`."""
        need = self.n + k
        if need > len(self.arrays[0]):
            grown = [np.empty(max(need, 2 * len(a)), a.dtype) for a in self.arrays]
            for new, old in zip(grown, self.arrays):
                new[: self.n] = old[: self.n]
            self.arrays = grown
        return [a[self.n : need] for a in self.arrays]

    def commit(self, k: int) -> None:
        self.n += k

    def final(self) -> tuple[np.ndarray, ...]:
        cols = [a[: self.n] for a in self.arrays]  # pages never written cost nothing, but ...
        if 2 * self.n < len(self.arrays[0]):  # ... do not keep a mostly unused allocation alive
            cols = [c.copy() for c in cols]
        return tuple(cols)


# parse(buf, start, stop, strict) -> list of items (Scalar or anything else); raises BadWire
Parser = Callable[[bytes, int, int, bool], list]


def plausible_tail(b: bytes, p: int, e: int, n: int) -> bool:
    """Could ``b[p:e]`` be the start of an n-byte payload still being written?"""
    if n >= MAX_LEN:
        return False
    if p == e:
        return True
    if b[p] != 0x0A:
        return False
    try:
        inner, q = varint(b, p + 1, e)
    except ShortWire:
        return True
    except BadWire:
        return False
    if q - p + inner != n:
        return False
    try:
        for _ in fields(b, q, e):
            pass
    except ShortWire:
        return True
    except BadWire:
        return False
    return True


def resync(b: bytes, arr: np.ndarray, start: int, parse: Parser) -> int | None:
    """First offset >= start holding a whole record that parses strictly (one Value, known kind)."""
    size = len(b)
    lo = start
    while lo + HEADER < size:
        hi = min(size, lo + (1 << 16) + HEADER)
        # a payload starts with 0x0a (Record.values) and a sane length has zero high bytes
        cand = np.flatnonzero(arr[lo + HEADER : hi] == 0x0A) + lo
        for p in cand.tolist():
            if b[p + 4 : p + 8] != b"\0\0\0\0":
                continue
            n = int.from_bytes(b[p : p + 4], "little")
            if n < 2 or p + HEADER + n > size:
                continue
            try:
                if parse(b, p + HEADER, p + HEADER + n, True):
                    return p
            except BadWire:
                continue
        lo = hi - HEADER
    return None


class _Pending:
    """Scalars of slow-parsed records, collected until the next vectorized stretch or the end."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self.idx: list[int] = []
        self.step: list[int] = []
        self.ts: list[int] = []
        self.bits: list[int] = []

    def flush(self, out: Walk, cols: _Columns) -> None:
        n = len(self.idx)
        if n:
            step, wall, value = cols.reserve(n)
            step[:] = self.step
            wall[:] = wall_times(np.array(self.ts, np.int64))
            value[:] = np.array(self.bits, np.uint32).view(np.float32)
            cols.commit(n)
            out.chunks.append((np.array(self.idx, np.int32), n))
            self._clear()


def wall_times(ts: np.ndarray) -> np.ndarray:
    """ms since the epoch -> seconds; values below 2e9 are already seconds."""
    f = ts.astype(np.float64)
    if len(ts) and ts.min() >= 2_000_000_000:
        f /= 1000.0
        return f
    return np.where(ts < 2_000_000_000, f, f / 1000.0)


def walk(buf: bytes, path: str, parse: Parser, *, start: int = 0, fast: bool = True) -> Walk:
    """Decode every intact record of ``buf[start:]``; damage goes to ``Walk.problems``."""
    b = buf
    arr = np.frombuffer(b, np.uint8)
    size = len(b)
    out = Walk(end=start)
    tag_ids: dict[str, int] = {}
    pend = _Pending()
    cols = _Columns()
    hist: list[tuple] = []  # (offset, record length, key, tag idx, layout) of templatable scalars
    need = 8
    fails = cool = 0  # failed period searches in a row; records to go before looking again
    off = start

    def tag_id(tag: str) -> int:
        i = tag_ids.get(tag)
        if i is None:
            i = tag_ids[tag] = len(out.tags)
            out.tags.append(tag)
        return i

    def bad(at: int, reason: str) -> int | None:
        nxt = resync(b, arr, at + 1, parse)
        skipped = (size if nxt is None else nxt) - at
        where = "the end of the file" if nxt is None else "the next valid record"
        out.problems.append(Problem(path, at, "bad-record", f"{reason}; skipped {skipped} bytes to {where}"))
        return nxt

    while off < size:
        if fast and len(hist) >= need:
            period = _period(hist)
            if period:
                pend.flush(out, cols)
                rows, nrec = _stretch(b, off, hist[-period:], cols)
                if rows:
                    out.chunks.append((np.array([h[4] for h in hist[-period:]], np.int32), nrec))
                    out.fast_records += nrec
                    off += rows
                    out.end = off
                    hist.clear()
                    need, fails = 8, 0
                    continue
            if len(hist) >= 2 * MAX_PERIOD:
                del hist[:MAX_PERIOD]
            need = min(2 * len(hist), 2 * MAX_PERIOD)
            fails += 1
            if fails >= 3:  # not periodic here: stop looking for a while (backing off)
                cool, need = min(16 << fails, 1 << 13), 8
                hist.clear()
        if size - off < HEADER:
            out.problems.append(Problem(path, off, "truncated", f"incomplete record header ({size - off} bytes): not written yet"))
            break
        n = int.from_bytes(b[off : off + HEADER], "little")
        stop = off + HEADER + n
        if stop > size:
            if plausible_tail(b, off + HEADER, size, n):
                out.problems.append(
                    Problem(path, off, "truncated", f"incomplete record ({size - off} of {n + HEADER} bytes): not written yet")
                )
                break
            nxt = bad(off, f"record length {n} runs past the end of the file")
        elif n == 0:
            nxt = bad(off, "empty record")
        else:
            try:
                items = parse(b, off + HEADER, stop, False)
            except BadWire as exc:
                nxt = bad(off, f"unparsable record ({exc})")
            else:
                if not items:
                    out.problems.append(Problem(path, off, "bad-record", "record holds no value; skipped"))
                for item in items:
                    if isinstance(item, Scalar):
                        i = tag_id(item.tag)
                        pend.idx.append(i)
                        pend.step.append(item.step)
                        pend.ts.append(item.ts)
                        pend.bits.append(item.bits)
                    else:
                        out.others.append((off, item))
                if cool:
                    cool -= 1
                elif fast and len(items) == 1 and isinstance(items[0], Scalar) and items[0].layout is not None:
                    hist.append(_key(b, off, stop, items[0].layout) + (i,))
                elif hist or fails:
                    hist.clear()
                    need, fails = 8, 0
                off = out.end = stop
                continue
        hist.clear()
        need = 8
        if nxt is None:
            break
        off = nxt
    pend.flush(out, cols)
    out.columns = cols.final()
    return out


def _key(b: bytes, off: int, stop: int, layout: tuple) -> tuple:
    """(offset, length, key, spans relative to the record start)."""
    id_span, ts_span, val = layout
    rel = lambda s: None if s is None else (s[0] - off, s[1] - off)  # noqa: E731
    spans = (rel(id_span), rel(ts_span), val - off)
    rec = bytearray(b[off:stop])
    for s in spans[:2]:
        if s is not None:
            rec[s[0] : s[1]] = b"\0" * (s[1] - s[0])
    rec[spans[2] : spans[2] + 4] = b"\0\0\0\0"
    return off, stop - off, (stop - off, spans, bytes(rec)), spans


def _period(hist: list[tuple]) -> int:
    """Smallest P such that the last 2P records are one period of P repeated twice, or 0."""
    keys = [h[2] for h in hist]
    n = len(keys)
    last = keys[-1]
    for p in range(1, min(n // 2, MAX_PERIOD) + 1):
        if keys[n - 1 - p] == last and keys[n - 2 * p : n - p] == keys[n - p :]:
            return p
    return 0


# ---------------------------------------------------------------------------------------------
# the vectorized stretch: verify rows against the template, then decode them while in cache

_TILE = 256 << 10  # bytes compared per numpy pass: template, mask and scratch stay in L2
_BLOCK = 1 << 20  # bytes per block at most: verified, then decoded before they leave the cache


def _words(b, pos: int, rows: int, width: int, rel: int, dtype: str = "<u8") -> np.ndarray:
    """Unaligned strided view: the word at ``pos + r*width + rel`` for each row r."""
    return np.ndarray(shape=(rows,), dtype=dtype, buffer=b, offset=pos + rel, strides=(width,))


_C1, _C2, _C3 = (np.uint64(x) for x in (0x7F7F7F7F7F7F7F7F, 0x007F007F007F007F, 0x7F007F007F007F00))
_C4, _C5, _C6, _C7 = (np.uint64(x) for x in (0x00003FFF00003FFF, 0x3FFF00003FFF0000, 0x0FFFFFFF, 0x0FFFFFFF00000000))


def _compact(x: np.ndarray, w: int) -> np.ndarray:
    """Varint bytes (w <= 8, little-endian in x) -> value: drop every byte's top bit. Modifies x."""
    if w == 1:
        return x
    x &= _C1
    t = x & _C3
    x &= _C2
    t >>= np.uint64(1)
    x |= t  # 14-bit groups in 16-bit lanes
    if w > 2:
        t = x & _C5
        x &= _C4
        t >>= np.uint64(2)
        x |= t  # 28-bit groups in 32-bit lanes
    if w > 4:
        t = x & _C7
        x &= _C6
        t >>= np.uint64(4)
        x |= t
    return x


def _raw_into(b, pos: int, rows: int, width: int, span: tuple[int, int], out: np.ndarray) -> None:
    """The bytes of a <= 8-byte varint of every row into ``out`` as one uint64 each (little-endian)."""
    a, z = span
    if z - a == 1:
        out[...] = _words(b, pos, rows, width, a, "u1")
    else:  # the word ending at the varint's last byte, minus the bytes before the varint
        np.right_shift(_words(b, pos, rows, width, z - 8), np.uint64(8 * (8 - (z - a))), out=out)


def _slot_values(b, pos: int, rows: int, width: int, span: tuple[int, int] | None) -> np.ndarray:
    """One slot's varint decoded on its own (used when some varint of the row is 9-10 bytes)."""
    if span is None:
        return np.zeros(rows, np.int64)
    a, z = span
    if z - a <= 8:
        x = np.empty(rows, np.uint64)
        _raw_into(b, pos, rows, width, span, x)
        return _compact(x, z - a).view(np.int64)
    # 9-10 bytes (negative steps): byte by byte, wrapping at 64 bits like the slow parser
    x = np.zeros(rows, np.uint64)
    for k in range(z - a):
        col = _words(b, pos, rows, width, a + k, "u1").astype(np.uint64)
        x |= (col & np.uint64(0x7F)) << np.uint64(7 * k)
    return x.view(np.int64)


def _varint_runs(b, pos: int, rows: int, width: int, spans: list, scratch: np.ndarray) -> tuple:
    """The int64 varint at ``spans[j]`` (row-relative; None: absent, so 0) of every row and slot,
    in record order, as (values, repeats) for ``np.repeat``: the records of a row share a step
    and mostly a timestamp, so each run of equal bytes is decoded once. Slots are read into
    contiguous rows of ``scratch`` (strided writes cost more than strided reads)."""
    nslot = len(spans)
    w = max((s[1] - s[0] for s in spans if s is not None), default=0)
    if w == 0:
        return np.zeros(1, np.int64), rows * nslot
    if w > 8:
        return np.stack([_slot_values(b, pos, rows, width, s) for s in spans], axis=1).reshape(-1), 1
    raw = scratch[: nslot * rows].reshape(nslot, rows)
    for j, s in enumerate(spans):
        if s is None:
            raw[j] = 0
        else:
            _raw_into(b, pos, rows, width, s, raw[j])
    if nslot == 1 or not (raw[1:] != raw[0]).any():  # one value per row
        return _compact(raw[0], w).view(np.int64), nslot
    flat = scratch[nslot * rows : 2 * nslot * rows]
    flat.reshape(rows, nslot)[...] = raw.T  # record order
    new = np.empty(len(flat), bool)
    new[0] = True
    np.not_equal(flat[1:], flat[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    # a varint narrower than w has zero bytes above it, which compact to nothing
    return _compact(flat[starts], w).view(np.int64), np.diff(starts, append=len(flat))


def _template(recs: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """(mask, expected) bytes of one row: fixed bytes must be equal, of a varint only the
    continuation bits count (set but on the last byte), value bytes are free."""
    width = sum(r[1] for r in recs)
    tmpl = bytearray(b"".join(r[2][2] for r in recs))
    mask = bytearray(b"\xff" * width)
    base = 0
    for r in recs:
        id_span, ts_span, val = r[3]
        for s in (id_span, ts_span):
            if s is not None:
                for k in range(s[0], s[1]):
                    mask[base + k] = 0x80
                    tmpl[base + k] = 0x80 if k < s[1] - 1 else 0
        mask[base + val : base + val + 4] = b"\0\0\0\0"
        base += r[1]
    mask_b = np.frombuffer(bytes(mask), np.uint8)
    return mask_b, np.frombuffer(bytes(tmpl), np.uint8) & mask_b


def _stretch(b: bytes, off: int, recs: list[tuple], cols: _Columns) -> tuple[int, int]:
    """Verify and decode into ``cols`` as many whole rows of the template ``recs`` as follow ``off``.

    Returns (bytes consumed, records decoded). Rows go in blocks that grow geometrically (a
    template that stops matching soon costs little); each block is decoded right after it is
    verified, while its bytes are still in cache. Tiles and blocks are whole multiples of 8 rows,
    so every tile starts at the same word alignment (see :func:`_verify`)."""
    width, nslot = sum(r[1] for r in recs), len(recs)
    total = (len(b) - off) // width
    if total <= 0:
        return 0, 0
    tile = min(total, max(8, _TILE // width // 8 * 8))
    mask_b, tmpl_b = _template(recs)
    tiled = _Tiled(np.tile(mask_b, tile), np.tile(tmpl_b, tile), np.frombuffer(b, np.uint8).ctypes.data)
    out = scratch = None
    done, block, cap = 0, 64, max(64, _BLOCK // width // 8 * 8)
    while done < total:
        m = min(block, total - done)
        good = 0
        while good < m:
            k = min(tile, m - good)
            ok = _verify(b, off + (done + good) * width, k, width, tiled)
            good += ok
            if ok < k:
                break
        if good:
            if out is None:  # room for every row that could follow (at most ~1.5x the bytes left
                # in the buffer, which is already in memory); pages never written cost nothing
                out = [a.reshape(total, nslot) for a in cols.reserve(total * nslot)]
                scratch = np.empty(2 * nslot * min(total, cap), np.uint64)
            _extract(b, off + done * width, good, width, recs, [a[done : done + good] for a in out], scratch)
            done += good
        if good < m:
            break
        block = min(block * 4, cap)
    cols.commit(done * nslot)
    return done * width, done * nslot


class _Tiled:
    """The row template repeated over a tile: bytes, and as aligned words per phase (the offset
    of the first aligned byte from a tile's start), made when first needed."""

    def __init__(self, mask: np.ndarray, tmpl: np.ndarray, base: int) -> None:
        self.mask, self.tmpl, self.base = mask, tmpl, base
        self.words: dict[int, tuple[np.ndarray, np.ndarray, bytes]] = {}
        self.scratch = np.empty(len(mask) // 8, np.uint64)

    def at(self, phase: int) -> tuple[np.ndarray, np.ndarray, bytes]:
        """(mask words, expected words, expected bytes) of a tile from byte ``phase`` on."""
        if phase not in self.words:
            n = (len(self.mask) - phase) // 8 * 8
            mask, tmpl = (a[phase : phase + n].copy().view("<u8") for a in (self.mask, self.tmpl))
            self.words[phase] = mask, tmpl, tmpl.tobytes()
        return self.words[phase]


def _verify(b, pos: int, rows: int, width: int, tiled: _Tiled) -> int:
    """How many of ``rows`` rows at ``pos`` match the tiled template (conservative by a row).

    The bulk is compared as aligned words (numpy is slower on unaligned ones), the few bytes
    before the first and after the last whole word byte by byte."""
    nbytes = rows * width
    d = min(-(tiled.base + pos) % 8, nbytes)
    nw = (nbytes - d) // 8
    if d and ((np.frombuffer(b, np.uint8, d, pos) & tiled.mask[:d]) != tiled.tmpl[:d]).any():
        return 0
    mask_w, tmpl_w, tmpl_b = tiled.at(d)
    got = np.bitwise_and(np.frombuffer(b, "<u8", nw, pos + d), mask_w[:nw], out=tiled.scratch[:nw])
    # bytes equality is a memcmp: cheaper than two more numpy passes (a whole slice is no copy)
    if got.tobytes() != tmpl_b[: nw * 8]:
        return (d + int(np.argmax(got != tmpl_w[:nw])) * 8) // width  # the row where the first bad word starts
    lo = d + nw * 8
    if lo < nbytes and ((np.frombuffer(b, np.uint8, nbytes - lo, pos + lo) & tiled.mask[lo:nbytes]) != tiled.tmpl[lo:nbytes]).any():
        return lo // width
    return rows


def _extract(b: bytes, pos: int, rows: int, width: int, recs: list[tuple], out: list[np.ndarray], scratch) -> None:
    """Decode ``rows`` verified rows into ``out``: (step, wall time, value) arrays of (rows, slots)."""
    step, wall, value = out
    bases = np.cumsum([0] + [r[1] for r in recs[:-1]]).tolist()
    at = lambda s, base: None if s is None else (s[0] + base, s[1] + base)  # noqa: E731
    vals, reps = _varint_runs(b, pos, rows, width, [at(r[3][0], base) for r, base in zip(recs, bases)], scratch)
    step.reshape(-1)[:] = np.repeat(vals, reps)
    vals, reps = _varint_runs(b, pos, rows, width, [at(r[3][1], base) for r, base in zip(recs, bases)], scratch)
    wall.reshape(-1)[:] = np.repeat(wall_times(vals), reps)  # elementwise: the same on each run's value
    for j, (r, base) in enumerate(zip(recs, bases)):
        value[:, j] = _words(b, pos, rows, width, base + r[3][2], "<f4")
