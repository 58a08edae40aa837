"""Low-level helpers of :mod:`sitegen.read.tfevents_fast`.

* strided, possibly unaligned numpy views into the file buffer (one column of a periodic stretch);
* the per-record classifier of the two fast scalar layouts and the byte template (mask and
  expected bytes, as 64-bit words) a periodic stretch is verified against;
* the reference damage policy, one record at a time (header check, vectorized resync);
* bulk payload-CRC checks by XOR over groups of equal-length payloads.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import google_crc32c
import numpy as np

from .tfrecord import FOOTER, HEADER, mask

_MASK_DELTA = np.uint32(0xA282EAD8)
_U8, _U32, _U64 = np.dtype("u1"), np.dtype("<u4"), np.dtype("<u8")
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
        lens = col(a, _U64, lo, hi - lo, 1)
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


def template_words(rec: np.ndarray, m: np.ndarray, base: int) -> list[tuple[int, np.uint64, np.uint64, bool]]:
    """Cover the masked bytes of one template record with unaligned u64 words.

    Returns ``(offset, mask, expected, full_mask)`` with offsets shifted by ``base``.
    """
    words = []
    size, i = len(m), 0
    nz = np.flatnonzero(m)
    while True:
        nz = nz[nz >= i]
        if not nz.size:
            return words
        w = min(int(nz[0]), size - 8)
        mw = int.from_bytes(m[w : w + 8].tobytes(), "little")
        ew = int.from_bytes(rec[w : w + 8].tobytes(), "little") & mw
        words.append((base + w, np.uint64(mw), np.uint64(ew), mw == (1 << 64) - 1))
        i = w + 8


def decode_steps(a: np.ndarray, off: int, s: int, count: int, stride: int) -> np.ndarray:
    """Decode ``count`` step varints of exactly ``s`` bytes (1..9) starting at ``off`` + k*stride."""
    if s == 1:
        return col(a, _U8, off, count, stride).astype(np.int64)
    v = col(a, _U64, off, count, stride)  # 9-byte varints: the 9th byte is added below
    out = v & np.uint64(0x7F)
    tmp = np.empty_like(out)
    for i in range(1, min(s, 8)):
        np.right_shift(v, np.uint64(i), out=tmp)  # byte i's low 7 bits: from bit 8*i to bit 7*i
        tmp &= np.uint64(0x7F << (7 * i))
        out |= tmp
    if s == 9:
        last = col(a, _U8, off + 8, count, stride).astype(np.uint64) & np.uint64(0x7F)
        out |= last << np.uint64(56)
    return out.view(np.int64)


def _zero_crc(n: int, cache: dict[int, int] = {}) -> int:  # noqa: B006 - deliberate memo
    if n not in cache:
        cache[n] = google_crc32c.value(bytes(n))
    return cache[n]


def crc_group_bad(a: np.ndarray, base: int, n: int, count: int, stride: int) -> list[int]:
    """Indices k of the records at ``base + k*stride`` (payload ``n`` bytes) whose payload CRC fails.

    CRC32C is affine over GF(2): for equal-length payloads, the XOR of their (unmasked) CRCs is the
    CRC of the XOR of the payloads, up to the CRC of ``n`` zero bytes when the count is even. One
    CRC call checks a whole group. To keep identical damage in two (or three) records from
    cancelling, the group is also checked on every "bit ``b`` of k is set" subset (log2(count)
    extra checks, computed by an XOR tree). Any group of 1-3 damaged records is caught; the rare
    residue (>= 4 records with identical error syndromes, even on every such subset, or a CRC32C
    collision of 2**-32) is documented in :mod:`sitegen.read.tfevents_fast`. When a check fails,
    each record of the group is rechecked on its own, so exactly the bad ones are reported.
    """
    if count == 0:
        return []
    nw = -(-n // 8)
    pad = 8 * nw - n  # words start `pad` bytes before the payload (inside the 12-byte header)
    width = 1 << max(0, (count - 1).bit_length())
    mat = np.zeros((nw + 1, width), np.uint64)
    mat[:nw, :count] = np.ndarray((nw, count), _U64, buffer=a, offset=base + HEADER - pad, strides=(8, stride))
    mat[nw, :count] = unmask(col(a, _U32, base + HEADER + n, count, stride))
    sums: list[tuple[np.ndarray, int]] = []
    bit = 0
    while mat.shape[1] > 1:
        odd = mat[:, 1::2]
        sums.append((np.bitwise_xor.reduce(odd, axis=1), _count_bit(count, bit)))
        mat = mat[:, 0::2] ^ odd
        bit += 1
    sums.append((mat[:, 0], count))
    zero = _zero_crc(n)
    for xs, k in sums:
        want = google_crc32c.value(xs[:nw].tobytes()[pad:]) ^ (0 if k % 2 else zero)
        if k and want != int(xs[nw]):
            return [i for i in range(count) if not crc_ok(a, base + i * stride, n)]
    return []


def _count_bit(count: int, bit: int) -> int:
    """How many k in range(count) have bit ``bit`` set."""
    period = 1 << (bit + 1)
    return (count // period) * (period >> 1) + max(0, count % period - (period >> 1))
