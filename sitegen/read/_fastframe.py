"""Low-level helpers of :mod:`sitegen.read.tfevents_fast`.

* strided, possibly unaligned numpy views into the file buffer (one field of every period);
* the per-record classifier of the two fast scalar layouts, and the per-byte mask of what a
  later period must repeat exactly;
* the reference damage policy, one record at a time (header check, vectorized resync);
* bulk payload-CRC checks by XOR over whole periods (equal-length payloads per position);
* vectorized varint decoding of fixed-width step fields.
"""
from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import google_crc32c
import numpy as np

from .tfrecord import FOOTER, HEADER, mask

_MASK_DELTA = np.uint32(0xA282EAD8)
U8, U32, U64 = np.dtype("u1"), np.dtype("<u4"), np.dtype("<u8")
_TF2_MID = bytes.fromhex("420a080112002204")  # tensor{dtype=FLOAT, shape={}, content: 4 bytes}
_TF2_TAIL = bytes.fromhex("4a0b0a090a07") + b"scalars"  # metadata{plugin_data{name="scalars"}}
MAX_FAST_PAYLOAD = 160  # longer payloads cannot match a fast layout
MIN_FAST_RECORD = 36  # 16 bytes of framing + the shortest fast payload (no step, empty tag)


def col(a: np.ndarray, dtype: np.dtype | str, off: int, count: int, stride: int) -> np.ndarray:
    """``count`` values of ``dtype`` at ``off``, ``off + stride``, ...: a view, alignment not needed."""
    return np.ndarray((count,), dtype=dtype, buffer=a, offset=off, strides=(stride,))


def unmask(masked: np.ndarray) -> np.ndarray:
    """Inverse of the TFRecord CRC mask, vectorized (uint32 in, uint32 out)."""
    r = masked.astype(np.uint32) - _MASK_DELTA
    return (r << np.uint32(15)) | (r >> np.uint32(17))


def crc_ok(a: np.ndarray, off: int, length: int) -> bool:
    """Does the payload CRC of the record at ``off`` (payload ``length`` bytes) check out?"""
    stored = struct.unpack_from("<I", a, off + HEADER + length)[0]
    return mask(google_crc32c.value(a[off + HEADER : off + HEADER + length])) == stored


def length_ok(a: np.ndarray, off: int) -> bool:
    return mask(google_crc32c.value(a[off : off + 8])) == struct.unpack_from("<I", a, off + 8)[0]


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
        ln == t + 29 and t <= 98 and p[i + 3] == t + 27 and n == i + 31 + t
        and p[i + 6 + t : i + 14 + t] == _TF2_MID and p[i + 18 + t :] == _TF2_TAIL
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


def decode_steps(a: np.ndarray, off: int, s: int, count: int, stride: int) -> np.ndarray:
    """Decode ``count`` step varints of exactly ``s`` bytes (1..9) starting at ``off`` + k*stride."""
    if s == 1:
        return col(a, U8, off, count, stride)
    wide = s > 4
    v = np.array(col(a, U64 if wide else U32, off, count, stride))  # one strided gather
    typ = v.dtype.type
    out = v & typ(0x7F)
    tmp = np.empty_like(out)
    for i in range(1, min(s, 8)):
        np.right_shift(v, typ(i), out=tmp)  # byte i's low 7 bits: from bit 8*i to bit 7*i
        tmp &= typ(0x7F << (7 * i))
        out |= tmp
    if s == 9:  # the 9th byte holds bits 56..62
        out |= (col(a, U8, off + 8, count, stride).astype(np.uint64) & typ(0x7F)) << typ(56)
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
    damage in 2 or 3 records from cancelling, each power-of-two chunk of periods is also checked on
    every "bit b of the period index is set" subset, all computed by one XOR tree (~2x the work of a
    single XOR). A failing (chunk, position) is rechecked record by record, so exactly the bad
    records are reported. Residual risk: see :mod:`sitegen.read.tfevents_fast`.
    """
    bad: list[int] = []
    k0 = 0
    while k0 < count:
        size = 1 << ((count - k0).bit_length() - 1)
        bad += _chunk_bad(a, base + k0 * period, period, size, rel)
        k0 += size
    return sorted(bad)


def _chunk_bad(a: np.ndarray, base: int, period: int, count: int, rel: list[tuple[int, int]]) -> list[int]:
    cur = a[base : base + count * period].reshape(count, period)
    crcs = np.empty((len(rel), count), np.uint32)
    for j, (c, n) in enumerate(rel):
        crcs[j] = col(a, U32, base + c + HEADER + n, count, period)
    crcs = unmask(crcs)
    sums = []  # (XOR of the periods of one subset, XOR of their unmasked CRCs, subset size)
    while cur.shape[0] > 1:
        odd = cur[1::2]
        sums.append((np.bitwise_xor.reduce(odd, axis=0), np.bitwise_xor.reduce(crcs[:, 1::2], axis=1), count // 2))
        cur = cur[0::2] ^ odd
        crcs = crcs[:, 0::2] ^ crcs[:, 1::2]
    sums.append((cur[0], crcs[:, 0], count))
    bad = []
    for j, (c, n) in enumerate(rel):
        zero = _zero_crc(n)
        for xs, cs, k in sums:
            if google_crc32c.value(xs[c + HEADER : c + HEADER + n]) ^ (0 if k % 2 else zero) != int(cs[j]):
                bad += [base + i * period + c for i in range(count) if not crc_ok(a, base + i * period + c, n)]
                break
    return bad
