"""Low-level helpers of :mod:`sitegen.ingest.tfevents.fast`.

* strided, possibly unaligned numpy views into the file buffer (one field of every period);
* the per-record classifier of the two fast scalar layouts, and the per-byte mask of what a
  later period must repeat exactly;
* the reference damage policy, one record at a time (header check, vectorized resync);
* bulk payload-CRC checks by XOR over whole periods (equal-length payloads per position);
* the template check as per-byte ranges (one min and one max reduction over the periods);
* vectorized varint decoding of fixed-width step fields, fancy-indexed field gathers and fills
  of periodic sequences by doubling.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Callable

import google_crc32c
import numpy as np

from sitegen.ingest.tfevents.tfrecord import FOOTER, HEADER, mask

_MASK_DELTA = np.uint32(0xA282EAD8)
U8, U32, U64 = np.dtype("u1"), np.dtype("<u4"), np.dtype("<u8")
_TF2_MID = bytes.fromhex("420a080112002204")  # tensor{dtype=FLOAT, shape={}, content: 4 bytes}
_TF2_TAIL = bytes.fromhex("4a0b0a090a07") + b"scalars"  # metadata{plugin_data{name="scalars"}}
CRC_PIECE = 64 << 20  # (a record's payload checked in pieces of this size when they are released after)
MAX_FAST_PAYLOAD = 160  # longer payloads cannot match a fast layout
MIN_FAST_RECORD = 36  # 16 bytes of framing + the shortest fast payload (no step, empty tag)


def col(a: np.ndarray, dtype: np.dtype | str, off: int, count: int, stride: int) -> np.ndarray:
    """``count`` values of ``dtype`` at ``off``, ``off + stride``, ...: a view, alignment not needed."""
    return np.ndarray((count,), dtype=dtype, buffer=a, offset=off, strides=(stride,))


def crc_ok(a: np.ndarray, off: int, length: int, release: Callable[[int, int], None] | None = None) -> bool:
    """Does the payload CRC of the record at ``off`` (payload ``length`` bytes) check out?
    ``release``: the payload of a mapped file is checked in pieces, each dropped after."""
    stored = struct.unpack_from("<I", a, off + HEADER + length)[0]  # type: ignore[arg-type]  # an ndarray is a buffer; numpy's stubs say so only for Python >= 3.12
    if release is None or length <= CRC_PIECE:
        return mask(google_crc32c.value(a[off + HEADER : off + HEADER + length])) == stored
    crc, end = 0, off + HEADER + length
    for lo in range(off + HEADER, end, CRC_PIECE):
        hi = min(lo + CRC_PIECE, end)
        crc = google_crc32c.extend(crc, a[lo:hi])
        release(lo, hi)
    return mask(crc) == stored


def length_ok(a: np.ndarray, off: int) -> bool:
    return mask(google_crc32c.value(a[off : off + 8])) == struct.unpack_from("<I", a, off + 8)[0]  # type: ignore[arg-type]  # an ndarray is a buffer; numpy's stubs say so only for Python >= 3.12


def resync(a: np.ndarray, start: int) -> int | None:
    """First offset >= start whose length CRC checks out and whose record fits (reference policy).

    Vectorized prefilter: only offsets whose u64 length would fit the buffer are CRC-checked.
    """
    size = len(a)
    last = size - HEADER - FOOTER  # a record needs at least 16 bytes
    lo, chunk = start, 4096
    while lo <= last:
        hi = min(last + 1, lo + chunk)
        lens = col(a, U64, lo, hi - lo, 1)
        room = (size - HEADER - FOOTER) - np.arange(lo, hi, dtype=np.int64)  # >= 0 here
        for i in np.flatnonzero(lens <= room.astype(np.uint64)):
            if length_ok(a, lo + int(i)):
                return lo + int(i)
        lo, chunk = hi, chunk * 4
    return None


@dataclass(frozen=True)
class Layout:
    """One exact fast payload layout: kind 1 = ``simple_value``, kind 2 = TF2 tensor scalar."""

    kind: int
    tag: bytes
    s: int  # width of the step varint; 0 = step absent
    n: int  # payload length

    @property
    def q(self) -> int:  # payload offset of the Event.summary field
        return 10 + self.s if self.s else 9

    @property
    def value_off(self) -> int:  # payload offset of the f32
        return self.q + (7 if self.kind == 1 else 14) + len(self.tag)


def classify(p: bytes) -> tuple[Layout, int] | None:
    """``(layout, step)`` if payload ``p`` is exactly one of the fast layouts, else None."""
    n = len(p)
    if n < 20 or n > MAX_FAST_PAYLOAD or p[0] != 0x09:
        return None
    i, s, step = 9, 0, 0
    if p[9] == 0x10:
        while True:
            s += 1
            if s > 9 or 9 + s >= n:
                return None
            b = p[9 + s]
            step |= (b & 0x7F) << (7 * (s - 1))
            if not b & 0x80:
                if not b:  # explicit zero or a padded varint: not what a writer emits
                    return None
                break
        i = 10 + s
    if n < i + 6 or p[i] != 0x2A or p[i + 2] != 0x0A or p[i + 4] != 0x0A:
        return None
    ln, t = p[i + 1], p[i + 5]
    tag = p[i + 6 : i + 6 + t]
    if ln == t + 9 and t <= 118 and p[i + 3] == t + 7 and n == i + 11 + t and p[i + 6 + t] == 0x15:
        kind = 1
    elif (
        ln == t + 29
        and t <= 98
        and p[i + 3] == t + 27
        and n == i + 31 + t
        and p[i + 6 + t : i + 14 + t] == _TF2_MID
        and p[i + 18 + t :] == _TF2_TAIL
    ):
        kind = 2
    else:
        return None
    try:
        tag.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return Layout(kind, tag, s, n), step


def record_mask(layout: Layout | None, n: int) -> np.ndarray:
    """Per byte of a whole record (framing included): which bits must equal the template's."""
    m = np.zeros(n + HEADER + FOOTER, np.uint8)
    m[:HEADER] = 0xFF  # length and its CRC: same length, so same bytes
    if layout is None:
        return m
    h, t = HEADER, len(layout.tag)
    m[h] = 0xFF  # wall_time field tag; the f64 itself varies
    if layout.s:
        m[h + 9] = 0xFF
        m[h + 10 : h + 10 + layout.s] = 0x80  # continuation bits: set on all but the last byte
    q = h + layout.q
    if layout.kind == 1:
        m[q : q + 7 + t] = 0xFF
    else:
        m[q : q + 14 + t] = 0xFF
        m[q + 18 + t : h + n] = 0xFF
    return m


def byte_ranges(trow: np.ndarray, mrow: np.ndarray, step_bytes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The template ``(trow, mrow)`` plus the canonical-step rule as per-byte ranges ``lo..hi``.

    Why: "every period lies in the ranges" is two read-only column reductions (min and max over
    the periods), much cheaper than a masked compare of every byte. Exact for the masks
    :func:`record_mask` makes: 0xFF (lo = hi = the byte), 0x80 (the top bit: 0x80..0xFF or
    0..0x7F) and 0 (anything); a last step byte must also be >= 1.
    """
    if not ((mrow == 0) | (mrow == 0x80) | (mrow == 0xFF)).all():
        raise ValueError("byte_ranges handles masks of 0, 0x80 and 0xFF only")
    lo = np.where(mrow == 0xFF, trow, np.where(mrow == 0x80, trow & 0x80, 0)).astype(np.uint8)
    hi = np.where(mrow == 0xFF, trow, np.where((mrow == 0x80) & (trow < 0x80), 0x7F, 0xFF)).astype(np.uint8)
    lo[step_bytes] = np.maximum(lo[step_bytes], 1)
    return lo, hi


def in_ranges(a: np.ndarray, base: int, count: int, period: int, lo: np.ndarray, hi: np.ndarray) -> bool:
    """Does every byte of the ``count`` periods at ``base`` lie in its range (:func:`byte_ranges`)?"""
    x = a[base : base + count * period]
    fold = min(64, 1 << (count.bit_length() - 1))  # periods reduced as one long row: numpy is faster on long rows
    q = count // fold * fold
    rows = x[: q * period].reshape(-1, fold * period)
    mx = np.maximum.reduce(np.maximum.reduce(rows, axis=0).reshape(fold, period), axis=0)
    mn = np.minimum.reduce(np.minimum.reduce(rows, axis=0).reshape(fold, period), axis=0)
    if q < count:
        rest = x[q * period :].reshape(-1, period)
        mx = np.maximum(mx, rest.max(axis=0))
        mn = np.minimum(mn, rest.min(axis=0))
    return bool((mn >= lo).all() and (mx <= hi).all())


def fields(a: np.ndarray, dtype: np.dtype | str, base: int, count: int, stride: int, cols) -> np.ndarray:
    """``(count, len(cols))`` values of ``dtype`` at ``base + k*stride + cols[j]``, alignment not needed.

    One fancy-indexed gather over an overlapping view (a value at every byte of a period): faster
    than one strided copy per column, and the result is already in file order.
    """
    cols = np.asarray(cols, np.intp)
    every = np.ndarray((count, int(cols.max()) + 1), dtype, buffer=a, offset=base, strides=(stride, 1))
    return every[:, cols]


def fill_periodic(out: np.ndarray, first: np.ndarray, inc: int) -> None:
    """``out[k*w + j] = first[j] + k*inc`` for the flat ``out`` (length a multiple of ``w``).

    By doubling: each step is one contiguous add (or copy), where a broadcast over rows of a
    handful of columns runs numpy's inner loop only ``w`` elements at a time.
    """
    w, size = len(first), len(out)
    if not size:
        return
    out[:w] = first
    n = w
    while n < size:
        m = min(n, size - n)
        if inc:
            np.add(out[:m], (n // w) * inc, out=out[n : n + m])
        else:
            out[n : n + m] = out[:m]
        n += m


def decode_steps(a: np.ndarray, base: int, cols, s: int, count: int, stride: int) -> np.ndarray:
    """Decode the step varints of exactly ``s`` bytes (1..9) at ``base + k*stride + cols[j]``."""
    if s == 1:
        return fields(a, U8, base, count, stride, cols)
    wide = s > 4
    v = fields(a, U64 if wide else U32, base, count, stride, cols)  # one gather
    typ = v.dtype.type
    out = v & typ(0x7F)
    tmp = np.empty_like(out)
    for i in range(1, min(s, 8)):
        np.right_shift(v, typ(i), out=tmp)  # byte i's low 7 bits: from bit 8*i to bit 7*i
        tmp &= typ(0x7F << (7 * i))
        out |= tmp
    if s == 9:  # the 9th byte holds bits 56..62
        out |= (fields(a, U8, base, count, stride, np.asarray(cols) + 8).astype(np.uint64) & typ(0x7F)) << typ(56)
    return out.view(np.int64) if wide else out


@functools.lru_cache(maxsize=256)
def _zero_crc(n: int) -> int:
    """CRC32C of ``n`` zero bytes: the constant of the affine map for payloads of length ``n``."""
    return google_crc32c.value(bytes(n))


def crc_block_bad(a: np.ndarray, base: int, period: int, count: int, rel: list[tuple[int, int]]) -> list[int]:
    """Offsets of the records whose payload CRC fails, among ``count`` periods at ``base``.

    ``rel`` lists each record of a period as (offset in the period, payload length).
    CRC32C is affine over GF(2): for equal-length payloads, the XOR of their (unmasked) CRCs is the
    CRC of the XOR of the payloads, up to the CRC of ``n`` zero bytes when the count is even. So
    XOR-ing whole periods checks every record position with one CRC call each. To keep identical
    damage in 2 or 3 records from cancelling, the periods are also checked on every "bit b of the
    period index is set" subset, all from two read-only reductions (:func:`_subset_xors`). A
    failing position is rechecked record by record, so exactly the bad records are reported.
    One group for any ``count``: a file's few blocks cost a few rounds of numpy calls each, not
    one per power of two in their sizes. Residual risk: see :mod:`sitegen.ingest.tfevents.fast`.
    """
    if count <= 0:
        return []
    ends = np.array([c + HEADER + n for c, n in rel], np.intp)
    stored = fields(a, U32, base, count, period, ends) - _MASK_DELTA  # unmask = subtract, then rotate
    r = _subset_xors(stored, 0)  # (bits + 1, positions); the rotation is linear: only the sums need it
    crcs = (r << np.uint32(15)) | (r >> np.uint32(17))
    sums = _subset_xors(a[base : base + count * period].reshape(count, period), 3)  # (bits + 1, period)
    bits = len(sums) - 1
    # subset sizes: an even one leaves the zero-bytes CRC
    odd = [((count >> (b + 1) << b) + max(0, (count & ((2 << b) - 1)) - (1 << b))) % 2 for b in range(bits)] + [count % 2]
    flat, want = sums.tobytes(), crcs.T.tolist()  # plain bytes and ints: ~5x less per-call overhead
    bad: list[int] = []
    for j, (c, n) in enumerate(rel):
        zero = _zero_crc(n)
        for row in range(bits + 1):
            o = row * period + c + HEADER
            if google_crc32c.value(flat[o : o + n]) ^ (0 if odd[row] else zero) != want[j][row]:
                bad += [base + i * period + c for i in range(count) if not crc_ok(a, base + i * period + c, n)]
                break
    return sorted(bad)


@functools.lru_cache(maxsize=32)
def _bit_rows(m: int) -> np.ndarray:
    """(m, 2**(m-1)) indices: row b lists the i < 2**m whose bit b is set."""
    i = np.arange(1 << m)
    return np.array([i[(i >> b) & 1 == 1] for b in range(m)], np.intp).reshape(m, -1)


def _subset_xors(x: np.ndarray, fold: int) -> np.ndarray:
    """XOR sums over the rows of ``x`` (any number of rows, at least one): with ``bits`` the bit
    length of the largest row index, row b < bits of the result is the XOR of the rows whose
    index has bit b set, row ``bits`` the XOR of all rows.

    Two read-only passes instead of a tree of halving copies: one reduction keeps the low index
    bits apart (rows grouped by index mod 2**m), one the high bits (one sum per group of 2**m
    consecutive rows); the per-bit sums then come from those small partial sums. The last,
    partial group is added on its own. Groups of 2**fold consecutive rows are reduced as one
    wide row: numpy's reductions are much faster on long rows than on short ones.
    """
    count, w = x.shape
    bits = (count - 1).bit_length()
    m = bits - (bits + 1) // 2  # about as many partial sums on each side
    f = min(fold, m)
    lo = m - f
    q, rest = count >> m, count & ((1 << m) - 1)  # full groups (q >= 1), rows of the partial one
    z = x[: q << m].reshape(q, 1 << lo, 1 << f, w)  # index = (h * 2**lo + g) * 2**f + s
    out = np.empty((bits + 1, w), x.dtype)
    low = np.bitwise_xor.reduce(z, axis=0).reshape(1 << m, w)  # by index mod 2**m
    hb = bits - m
    high = np.zeros((1 << hb, w), x.dtype)  # by index >> m (groups past the last: zero)
    # (one axis at a time: numpy reduces over two axes at once more slowly)
    np.bitwise_xor.reduce(np.bitwise_xor.reduce(z, axis=1), axis=1, out=high[:q])
    if rest:
        tail = x[q << m :]
        low[:rest] ^= tail
        np.bitwise_xor.reduce(tail, axis=0, out=high[q])
    if m:
        np.bitwise_xor.reduce(low[_bit_rows(m)], axis=1, out=out[:m])
    if hb:
        np.bitwise_xor.reduce(high[_bit_rows(hb)], axis=1, out=out[m:bits])
    np.bitwise_xor.reduce(low, axis=0, out=out[bits])
    return out
