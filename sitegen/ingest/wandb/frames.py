"""The framing of a ``.wandb`` file: LevelDB's log format, walked for every block at once.

Layout: a 7-byte file header (``:W&B``, uint16 LE 0xBEE1, version 0), then 32 KiB blocks counted
from offset 0, each a run of chunks ``<crc u32, length u16, type u8, payload>``; fewer than 7
bytes left in a block are zero padding. The checksum is plain IEEE CRC32 (``zlib.crc32``) over
the type byte and the payload. A record is one FULL chunk, or FIRST, MIDDLE..., LAST.

Why blocks at once: every block starts with a chunk header, so the chunks of all blocks are
found in lockstep (one numpy step per chunk of the fullest block, not one Python step per
chunk). Damage policy (the crash rule): reading stops at the first damaged chunk and keeps every
record before it; a file that ends inside a chunk is ``truncated`` (a torn write: killed, or a
write in progress), a bad checksum, length or type is ``bad-crc``/``bad-record`` there. A file
that ends after whole chunks of an unfinished record is no damage: wandb's writer writes a full
block at once and the rest of the record at its next flush, so a live run looks like that
(``Records.open_at``; the reader logs it and the run stays RUNNING, ``--strict`` builds pass).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from sitegen.errors import Problem
from sitegen.ingest.wandb.fast import PAD, words
from sitegen.ingest.wandb.spans import spans

try:  # the same CRC-32 as zlib's, several times faster over a whole file
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback
    from zlib import crc32

MAGIC = b":W&B\xe1\xbe\x00"
BLOCK = 32768
CHUNK = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class Records:
    """The intact records of a file: payload ``i`` is ``buf[start[i]:end[i]]`` (``buf``: a copy of
    the file whose chunk headers the CRC check wrote over; records made of several chunks are
    joined after the file's bytes, then come :data:`fast.PAD` zero bytes); ``offset``: its first
    chunk in the file."""

    buf: np.ndarray
    start: np.ndarray
    end: np.ndarray
    offset: np.ndarray
    intact: int = 0  # file offset just past the last complete record
    problems: list[Problem] = field(default_factory=list)
    open_at: int | None = None  # a record whose chunks so far are whole starts here: still being written


def _chunks(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, str]:
    """(offset, length, type) of the chunks before the first broken one, in file order, and
    where and how the walk broke (``size`` and "" when it did not)."""
    size = len(buf)
    starts = np.arange(0, size, BLOCK, dtype=np.int64)
    ends = np.minimum(starts + BLOCK, size)
    off = starts.copy()
    off[0] = len(MAGIC)
    stop = np.full(len(starts), -1, np.int64)  # per block: offset of a broken chunk
    active = ends - off >= CHUNK
    # a block whose room for a header is cut by the end of the file: truncated there
    short = (~active) & (ends == size) & (off < size) & (starts + BLOCK - off >= CHUNK)
    stop[short] = off[short]
    idx = np.flatnonzero(active)
    head = _headers(buf)
    o, lim, room = off[idx], ends[idx], starts[idx] + BLOCK
    found_at, found_in = [], []  # each step: the chunk found in each block still being walked
    while len(idx):
        h = head[o - 1]
        end = o + CHUNK + ((h >> 40) & 0xFFFF).astype(np.int64)
        bad = ((h >> 56) - FULL > LAST - FULL) | (end > lim)
        if bad.any():
            stop[idx[bad]] = o[bad]
            idx, o, end, lim, room = idx[~bad], o[~bad], end[~bad], lim[~bad], room[~bad]
        found_at.append(o)
        found_in.append(idx)
        more = lim - end >= CHUNK
        if not more.all():  # blocks walked to their end; one cut by the end of the file: truncated there
            cut = ~more & (lim == size) & (end < size) & (room - end >= CHUNK)
            stop[idx[cut]] = end[cut]
            idx, end, lim, room = idx[more], end[more], lim[more], room[more]
        o = end
    offs = np.zeros(0, np.int64)
    if found_at:  # in file order: block by block, the k-th chunk of a block found in step k
        block = np.concatenate(found_in)
        counts = np.bincount(block, minlength=len(starts))
        place = (np.cumsum(counts) - counts)[block] + np.repeat(np.arange(len(found_at)), [len(f) for f in found_at])
        offs = np.empty(len(block), np.int64)
        offs[place] = np.concatenate(found_at)
    lens = ((head[offs - 1] >> 40) & 0xFFFF).astype(np.int64)
    kinds = (head[offs - 1] >> 56).astype(np.int64)
    broken = np.flatnonzero(stop >= 0)
    if not len(broken):
        return offs, lens, kinds, size, ""
    at = int(stop[broken[0]])
    keep = offs < at
    if at + CHUNK > size:
        why = "truncated"
    else:
        said = int(buf[at + 4]) | int(buf[at + 5]) << 8
        why = "truncated" if at + CHUNK + said > size and buf[at + 6] in (FULL, FIRST, MIDDLE, LAST) else "bad-record"
        if why == "bad-record" and not buf[at:].any():
            why = "zeros"
    return offs[keep], lens[keep], kinds[keep], at, why


def _headers(buf: np.ndarray) -> np.ndarray:
    """The 8-byte word ending at each byte of ``buf`` (uint64, little-endian; a view, no copy):
    ``[o - 1]`` holds the 7-byte chunk header at ``o`` in its top bytes (length at bits 40-55,
    type at 56-63) and never reads past the header."""
    return np.ndarray((max(len(buf) - 7, 0),), "<u8", buffer=buf, strides=(1,))


def _crc_zeros(n: int) -> int:
    """``zlib.crc32(bytes(n))`` without the pass: the register times x^(8n) mod the polynomial."""
    p, k = 1 << 31, 3
    while n:
        if n & 1:
            p = _mult(_X2N[k], p)
        n, k = n >> 1, k + 1
    return _mult(p, 0xFFFFFFFF) ^ 0xFFFFFFFF


def _mult(a: int, b: int) -> int:
    """a * b modulo CRC-32's polynomial, bit-reflected (bit 31 is x^0)."""
    p, m = 0, 1 << 31
    while m:
        if a & m:
            p ^= b
        m >>= 1
        b = (b >> 1) ^ 0xEDB88320 if b & 1 else b >> 1
    return p


_X2N = [1 << 30]  # x^(2^k) mod the polynomial
for _ in range(63):
    _X2N.append(_mult(_X2N[-1], _X2N[-1]))


def _crcs_hold(work: np.ndarray, offs: np.ndarray, lens: np.ndarray, stored: np.ndarray) -> bool:
    """Whether every chunk's checksum holds, from one CRC pass instead of one call per chunk.
    ``work``: a writable copy of the file with room for 6 bytes after the last chunk; its headers,
    padding and those 6 bytes are overwritten (the payloads are left as they are).

    The copy is made to keep only the checked bytes (type and payload) of each chunk, each followed
    by its stored CRC XOR the CRC of as many zero bytes (written over the next chunk's checksum
    field); headers and padding are zeroed. CRC-32 is affine over GF(2) and ``crc(d + crc(d))``
    is the same for every ``d``, so the copy's CRC equals that of all zeros exactly when every
    chunk is intact (up to 2^-32 for damage in several chunks that happens to cancel; a single
    damaged chunk is always caught). A miss: checked one by one.
    """
    ends = offs + CHUNK + lens
    size = int(ends[-1]) + CHUNK - 1  # the checked bytes and the last chunk's fold
    work[: len(MAGIC)] = 0
    _at(work, "<u4")[offs] = 0  # checksum
    _at(work, "<u2")[offs + 4] = 0  # and length fields: one word each, not a byte at a time
    block = offs // BLOCK
    last = np.flatnonzero(np.append(block[1:] != block[:-1], True))  # each block's last chunk: padding after it
    pad = ends[last, None] + np.arange(CHUNK - 1)
    work[pad[pad < np.minimum((block[last, None] + 1) * BLOCK, size)]] = 0
    work[size - 2 : size] = 0
    present = np.zeros(int(lens.max()) + 2, bool)
    present[lens + 1] = True
    zeros, crc, at = np.zeros(len(present), np.uint32), 0, 0
    for n in np.flatnonzero(present).tolist():  # CRCs of n zero bytes for each checked length n
        crc, at = zlib.crc32(bytes(n - at), crc), n
        zeros[n] = crc
    _at(work, "<u4")[ends] = stored ^ zeros[lens + 1]
    return crc32(work[:size]) == _crc_zeros(size)  # (an ndarray is a buffer)


def _at(buf: np.ndarray, kind: str) -> np.ndarray:
    """The words of type ``kind`` starting at each byte of ``buf`` (a view: reads and writes go to ``buf``)."""
    size = np.dtype(kind).itemsize
    return np.ndarray((max(len(buf) - size + 1, 0),), kind, buffer=buf, strides=(1,))


def frame_records(buf: np.ndarray, path: str, verify: bool = True) -> Records:
    """Every intact record of the file ``buf`` (uint8), and the problem where reading stopped."""
    size = len(buf)
    empty = np.zeros(0, np.int64)
    out = Records(buf, empty, empty, empty)
    if size < len(MAGIC) or buf[: len(MAGIC)].tobytes() != MAGIC:
        if size < len(MAGIC) and MAGIC.startswith(buf.tobytes()):
            out.problems.append(Problem(path, 0, "truncated", "file header not written yet"))
        else:
            out.problems.append(Problem(path, 0, "bad-record", "not a W&B run file (no ':W&B' header); not read"))
        return out
    offs, lens, kinds, stop_at, why = _chunks(buf)
    stop_kind = why
    # one copy of the file (the CRC check writes over its headers), with room after it for the
    # records of several chunks joined and the zero bytes of :data:`fast.PAD`
    room = int(lens[kinds != FULL].sum())
    out.buf = np.empty(size + room + PAD, np.uint8)
    out.buf[:size] = buf
    if verify and len(offs):
        stored = words(buf, offs, 4).astype(np.uint32)
        if not _crcs_hold(out.buf, offs, lens, stored):  # some chunk is damaged: find the first, chunk by chunk
            data = buf.tobytes()  # (bytes slices are the cheapest to make)
            first = (offs + 6).tolist()  # the type of the chunk, then its payload: one slice
            calc = np.fromiter(
                map(zlib.crc32, map(data.__getitem__, map(slice, first, (offs + CHUNK + lens).tolist()))), np.uint32, len(offs)
            )
            bad = np.flatnonzero(calc != stored)
            if len(bad):
                b = int(bad[0])
                stop_at, stop_kind = int(offs[b]), "bad-crc"
                offs, lens, kinds = offs[:b], lens[:b], kinds[:b]
    w, open_from = _sequence(kinds)
    if w < len(kinds):
        if int(offs[w]) < stop_at or stop_kind == "":
            stop_at, stop_kind = int(offs[w]), "sequence"
        offs, lens, kinds = offs[:w], lens[:w], kinds[:w]
    # a record left open after whole chunks: wandb's writer is between two writes (it writes a
    # block as soon as it is full, the rest of the record at its next flush): not damage
    if open_from < len(kinds) and not stop_kind:
        out.open_at = int(offs[open_from])
    k = kinds[:open_from]
    heads = np.flatnonzero((k == FULL) | (k == FIRST))  # each record's first chunk, in file order
    out.offset = offs[heads]
    out.start = offs[heads] + CHUNK
    out.end = out.start + lens[heads]
    parts = np.flatnonzero(k != FULL)  # chunks of records in several: joined after the file's bytes
    used = 0
    if len(parts):
        extra = _joined(buf, offs[parts] + CHUNK, offs[parts] + CHUNK + lens[parts])
        used = len(extra)
        out.buf[size : size + used] = extra
        upto = size + np.cumsum(lens[parts])  # where each chunk's bytes end there
        first, last = np.flatnonzero(k[parts] == FIRST), np.flatnonzero(k[parts] == LAST)
        joined = k[heads] == FIRST
        out.start[joined], out.end[joined] = upto[first] - lens[parts[first]], upto[last]
    out.buf[size + used :] = 0
    out.intact = int(offs[open_from - 1] + CHUNK + lens[open_from - 1]) if open_from else len(MAGIC)
    if stop_kind:
        out.problems.append(_problem(path, stop_at, stop_kind, size))
    return out


def _sequence(kinds: np.ndarray) -> tuple[int, int]:
    """(the first chunk out of the sequence FULL | FIRST MIDDLE* LAST, or ``len(kinds)``; the first
    chunk of a record still open before it, or that place). Only the chunks of records in several
    are stepped through (a FULL chunk leaves the state as it is): a few in a file of FULL records."""
    p = np.flatnonzero(kinds != FULL)
    k = kinds[p]
    opened = np.where(k == FIRST, 1, np.where(k == LAST, 0, -1))  # inside a record after each of them
    last = np.maximum.accumulate(np.where(opened >= 0, np.arange(len(p)), -1))
    state = np.where(last >= 0, opened[np.maximum(last, 0)], 0)
    before = np.concatenate([[0], state[:-1]])
    # a FIRST inside a record, a MIDDLE or LAST outside one, a FULL right after a chunk that left a record open
    wrong = np.concatenate(
        [p[(k == FIRST) & (before == 1) | (k != FIRST) & (before == 0)], p[(state == 1) & (np.append(p[1:], len(kinds)) > p + 1)] + 1]
    )
    w = int(wrong.min()) if len(wrong) else len(kinds)
    kept = p < w
    open_now = bool(kept.any()) and state[kept][-1] == 1
    return w, int(p[kept & (k == FIRST)][-1]) if open_now else w


def _joined(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The bytes of the spans one after another (copied by Arrow in one pass)."""
    pieces = spans(buf, start, stop)
    wide = pieces.type == pa.large_binary()
    data, offsets = pieces.buffers()[2], np.frombuffer(pieces.buffers()[1], np.int64 if wide else np.int32)
    ends = offsets[pieces.offset : pieces.offset + len(pieces) + 1]
    if data is None or ends[-1] == ends[0]:
        return np.zeros(0, np.uint8)
    return np.frombuffer(data, np.uint8)[ends[0] : ends[-1]]


def _problem(path: str, at: int, kind: str, size: int) -> Problem:
    if kind == "truncated":
        return Problem(
            path,
            at,
            "truncated",
            f"the file ends inside a record ({size - at} bytes): not written yet, or the run was killed; the records before it kept",
        )
    if kind == "zeros":
        return Problem(
            path, at, "truncated", f"zero bytes from here to the end ({size - at} bytes): not written; the records before it kept"
        )
    if kind == "bad-crc":
        return Problem(path, at, "bad-crc", "bad chunk checksum; reading stopped here, the records before it kept")
    if kind == "sequence":
        return Problem(path, at, "bad-record", "a record's chunks are out of order; reading stopped here, the records before it kept")
    return Problem(path, at, "bad-record", "bad chunk header (type or length); reading stopped here, the records before it kept")
