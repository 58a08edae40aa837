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
  right. Rows are verified in bulk (geometrically growing blocks, compared as unaligned u64 words)
  and step/timestamp/value are pulled out as strided views. A row that differs (a new tag, a wider
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

from ..errors import Problem

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
    chunks: list[tuple[np.ndarray, ...]] = field(default_factory=list)  # tag idx, step, ts, bits
    others: list[tuple[int, object]] = field(default_factory=list)  # (record offset, parsed item)
    fast_records: int = 0


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
    def __init__(self) -> None:
        self.idx: list[int] = []
        self.step: list[int] = []
        self.ts: list[int] = []
        self.bits: list[int] = []

    def flush(self, out: Walk) -> None:
        if self.idx:
            out.chunks.append(
                (
                    np.array(self.idx, np.int32),
                    np.array(self.step, np.int64),
                    np.array(self.ts, np.int64),
                    np.array(self.bits, np.uint32),
                )
            )
            self.__init__()


def walk(buf: bytes, path: str, parse: Parser, *, start: int = 0, fast: bool = True) -> Walk:
    """Decode every intact record of ``buf[start:]``; damage goes to ``Walk.problems``."""
    b = buf
    arr = np.frombuffer(b, np.uint8)
    size = len(b)
    out = Walk(end=start)
    tag_ids: dict[str, int] = {}
    pend = _Pending()
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
                rows, parts, nrec = _stretch(b, off, hist[-period:])
                if rows:
                    pend.flush(out)
                    out.chunks += parts
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
            out.problems.append(
                Problem(path, off, "truncated", f"incomplete record header ({size - off} bytes): not written yet")
            )
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
    pend.flush(out)
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


def _words(b, pos: int, rows: int, width: int, rel: int, dtype: str = "<u8") -> np.ndarray:
    """Unaligned strided view: the word at ``pos + r*width + rel`` for each row r."""
    return np.ndarray(shape=(rows,), dtype=dtype, buffer=b, offset=pos + rel, strides=(width,))


_C1, _C2, _C3 = (np.uint64(x) for x in (0x7F7F7F7F7F7F7F7F, 0x007F007F007F007F, 0x7F007F007F007F00))
_C4, _C5, _C6, _C7 = (np.uint64(x) for x in (0x00003FFF00003FFF, 0x3FFF00003FFF0000, 0x0FFFFFFF, 0x0FFFFFFF00000000))


def _raw(b, pos: int, rows: int, width: int, span: tuple[int, int]) -> np.ndarray:
    """The bytes of a <= 8-byte varint of every row, as one uint64 each (little-endian)."""
    a, z = span
    if z - a == 1:
        return _words(b, pos, rows, width, a, "u1").astype(np.uint64)
    # the word ending at the varint's last byte, minus the bytes before the varint
    return _words(b, pos, rows, width, z - 8) >> np.uint64(8 * (8 - (z - a)))


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


def _varints(b, pos: int, rows: int, width: int, span: tuple[int, int] | None, like=None) -> tuple:
    """Decode the varint at ``span`` (relative to the row) of every row: (int64 values, raw words).

    ``like`` is the (values, raw words, width) of another slot: rows whose bytes are equal reuse
    its values (a row usually holds one step and one timestamp for all its tags)."""
    if span is None:
        return np.zeros(rows, np.int64), None
    a, z = span
    w = z - a
    if w > 8:  # 9-10 bytes (negative steps): byte by byte, wrapping at 64 bits like the slow parser
        x = np.zeros(rows, np.uint64)
        for k in range(w):
            col = _words(b, pos, rows, width, a + k, "u1").astype(np.uint64)
            x |= (col & np.uint64(0x7F)) << np.uint64(7 * k)
        return x.view(np.int64), None
    raw = _raw(b, pos, rows, width, span)
    if like is not None and like[1] is not None and like[2] == w:
        differ = np.flatnonzero(raw != like[1])
        if not len(differ):
            return like[0], like[1]
        vals = like[0].copy()
        vals[differ] = _compact(raw[differ], w).view(np.int64)
        return vals, raw
    return _compact(raw.copy(), w).view(np.int64), raw


def _stretch(b: bytes, off: int, recs: list[tuple]) -> tuple[int, list, int]:
    """Verify and decode as many whole rows of the template ``recs`` as follow ``off``.

    Returns (bytes consumed, chunks, records decoded)."""
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
    tmpl_b = np.frombuffer(bytes(tmpl), np.uint8) & mask_b
    size = len(b)
    total = (size - off) // width
    # the template repeated once per row (about 256 KB), compared as whole words
    tile = max(1, min(total, (256 << 10) // width))
    mask_t, tmpl_t = np.tile(mask_b, tile), np.tile(tmpl_b, tile)
    nt = len(mask_t) // 8
    mask_w, tmpl_w = mask_t[: nt * 8].view("<u8"), tmpl_t[: nt * 8].view("<u8")
    pos = off
    block = 64
    cap = max(64, (8 << 20) // width)
    parts = []
    while True:
        m = min(block, (size - pos) // width)
        if m <= 0:
            break
        good = 0
        while good < m:
            k = min(tile, m - good)
            ok = _verify(b, pos + good * width, k, width, mask_t, tmpl_t, mask_w, tmpl_w)
            good += ok
            if ok < k:
                break
        if good:
            parts.append(_extract(b, pos, good, width, recs))
            pos += good * width
        if good < m:
            break
        block = min(block * 4, cap)
    return pos - off, parts, sum(len(p[0]) for p in parts)


def _verify(b, pos: int, rows: int, width: int, mask_t, tmpl_t, mask_w, tmpl_w) -> int:
    """How many of ``rows`` rows at ``pos`` match the tiled template (conservative by a row)."""
    nbytes = rows * width
    nw = nbytes // 8
    diff = np.frombuffer(b, "<u8", nw, pos) ^ tmpl_w[:nw]
    diff &= mask_w[:nw]
    if diff.any():
        return int(np.argmax(diff != 0)) * 8 // width  # the row where the first bad word starts
    if nbytes > nw * 8:
        rest = np.frombuffer(b, np.uint8, nbytes - nw * 8, pos + nw * 8)
        if ((rest & mask_t[nw * 8 : nbytes]) != tmpl_t[nw * 8 : nbytes]).any():
            return nw * 8 // width
    return rows


def _extract(b: bytes, pos: int, rows: int, width: int, recs: list[tuple]) -> tuple[np.ndarray, ...]:
    nslot = len(recs)
    idx = np.tile(np.array([r[4] for r in recs], np.int32), rows)
    step = np.empty((rows, nslot), np.int64)
    ts = np.empty((rows, nslot), np.int64)
    bits = np.empty((rows, nslot), np.uint32)
    base = 0
    prev_id = prev_ts = None
    for j, r in enumerate(recs):
        id_span, ts_span, val = r[3]
        sh = lambda s: None if s is None else (s[0] + base, s[1] + base)  # noqa: E731
        i_vals, i_raw = _varints(b, pos, rows, width, sh(id_span), prev_id)
        t_vals, t_raw = _varints(b, pos, rows, width, sh(ts_span), prev_ts)
        step[:, j], ts[:, j] = i_vals, t_vals
        if id_span is not None:
            prev_id = (i_vals, i_raw, id_span[1] - id_span[0])
        if ts_span is not None:
            prev_ts = (t_vals, t_raw, ts_span[1] - ts_span[0])
        bits[:, j] = _words(b, pos, rows, width, base + val, "<u4")
        base += r[1]
    return idx, step.ravel(), ts.ravel(), bits.ravel()
