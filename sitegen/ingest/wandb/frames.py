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

from sitegen.errors import Problem
from sitegen.ingest.wandb.fast import PAD, words
from sitegen.ingest.wandb.spans import spans

MAGIC = b":W&B\xe1\xbe\x00"
BLOCK = 32768
CHUNK = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class Records:
    """The intact records of a file: payload ``i`` is ``buf[start[i]:end[i]]`` (records made of
    several chunks are joined after the file's bytes, then come :data:`fast.PAD` zero bytes);
    ``offset``: its first chunk in the file."""

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
    found_off, found_len, found_type = [], [], []
    stop = np.full(len(starts), -1, np.int64)  # per block: offset of a broken chunk
    active = ends - off >= CHUNK
    # a block whose room for a header is cut by the end of the file: truncated there
    short = (~active) & (ends == size) & (off < size) & (starts + BLOCK - off >= CHUNK)
    stop[short] = off[short]
    idx = np.flatnonzero(active)
    while len(idx):
        o = off[idx]
        length = buf[o + 4].astype(np.int64) | (buf[o + 5].astype(np.int64) << 8)
        kind = buf[o + 6].astype(np.int64)
        end = o + CHUNK + length
        bad = (kind < FULL) | (kind > LAST) | (end > ends[idx])
        stop[idx[bad]] = o[bad]
        good = idx[~bad]
        found_off.append(o[~bad])
        found_len.append(length[~bad])
        found_type.append(kind[~bad])
        off[good] = end[~bad]
        more = ends[good] - off[good] >= CHUNK
        cut = (~more) & (ends[good] == size) & (off[good] < size) & (starts[good] + BLOCK - off[good] >= CHUNK)
        stop[good[cut]] = off[good[cut]]
        idx = good[more]
    offs = np.concatenate(found_off) if found_off else np.zeros(0, np.int64)
    lens = np.concatenate(found_len) if found_len else np.zeros(0, np.int64)
    kinds = np.concatenate(found_type) if found_type else np.zeros(0, np.int64)
    order = np.argsort(offs, kind="stable")
    offs, lens, kinds = offs[order], lens[order], kinds[order]
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


def _crcs_hold(buf: np.ndarray, offs: np.ndarray, lens: np.ndarray, stored: np.ndarray) -> bool:
    """Whether every chunk's checksum holds, from one ``zlib.crc32`` pass instead of one call per chunk.

    A copy of the file keeps only the checked bytes (type and payload) of each chunk, each followed
    by its stored CRC XOR the CRC of as many zero bytes; headers and padding are zeroed. CRC-32 is
    affine over GF(2) and ``crc(d + crc(d))`` is the same for every ``d``, so the copy's CRC equals
    that of all zeros exactly when every chunk is intact (up to 2^-32 for damage in several chunks
    that happens to cancel; a single damaged chunk is always caught). A miss: checked one by one.
    """
    ends = offs + CHUNK + lens
    size = int(ends[-1])
    work = np.zeros(size + CHUNK - 1, np.uint8)  # room for the last chunk's CRC
    work[:size] = buf[:size]
    work[: len(MAGIC)] = 0
    work[(offs[:, None] + np.arange(CHUNK - 1)).ravel()] = 0  # checksum and length fields
    block = offs // BLOCK
    last = np.flatnonzero(np.append(block[1:] != block[:-1], True))  # each block's last chunk: padding after it
    pad = ends[last, None] + np.arange(CHUNK - 1)
    work[pad[pad < np.minimum((block[last, None] + 1) * BLOCK, size)]] = 0
    present = np.zeros(int(lens.max()) + 2, bool)
    present[lens + 1] = True
    zeros, crc, at = np.zeros(len(present), np.uint32), 0, 0
    for n in np.flatnonzero(present).tolist():  # CRCs of n zero bytes for each checked length n
        crc, at = zlib.crc32(bytes(n - at), crc), n
        zeros[n] = crc
    fold = (stored ^ zeros[lens + 1]).astype("<u4").view(np.uint8).reshape(-1, 4)
    work[ends[:, None] + np.arange(4)] = fold
    return zlib.crc32(work) == _crc_zeros(len(work))  # type: ignore[arg-type]  # an ndarray is a buffer


def frame_records(buf: np.ndarray, path: str, verify: bool = True, raw: bytes | None = None) -> Records:
    """Every intact record of the file ``buf`` (uint8; ``raw``: the same as bytes, when at
    hand), and the problem where reading stopped."""
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
    if verify and len(offs):
        stored = words(buf, offs, 4).astype(np.uint32)
        if not _crcs_hold(buf, offs, lens, stored):  # some chunk is damaged: find the first, chunk by chunk
            data = buf.tobytes() if raw is None else raw  # bytes slices are the cheapest to make
            first = (offs + 6).tolist()  # the type of the chunk, then its payload: one slice
            calc = np.fromiter(
                map(zlib.crc32, map(data.__getitem__, map(slice, first, (offs + CHUNK + lens).tolist()))), np.uint32, len(offs)
            )
            bad = np.flatnonzero(calc != stored)
            if len(bad):
                b = int(bad[0])
                stop_at, stop_kind = int(offs[b]), "bad-crc"
                offs, lens, kinds = offs[:b], lens[:b], kinds[:b]
    # the sequence FULL | FIRST MIDDLE* LAST: state after each chunk (inside a record or not)
    opened = np.where(kinds == FIRST, 1, np.where(kinds == LAST, 0, -1))
    marks = np.flatnonzero(opened >= 0)
    state = np.zeros(len(kinds), np.int64)
    if len(marks):
        last = np.maximum.accumulate(np.where(opened >= 0, np.arange(len(kinds)), -1))
        state = np.where(last >= 0, opened[np.maximum(last, 0)], 0)
    before = np.concatenate([[0], state[:-1]]) if len(state) else state
    wrong = np.flatnonzero(((kinds == FULL) | (kinds == FIRST)) & (before == 1) | ((kinds == MIDDLE) | (kinds == LAST)) & (before == 0))
    if len(wrong):
        w = int(wrong[0])
        if int(offs[w]) < stop_at or stop_kind == "":
            stop_at, stop_kind = int(offs[w]), "sequence"
        offs, lens, kinds, state = offs[:w], lens[:w], kinds[:w], state[:w]
    # a record left open after whole chunks: wandb's writer is between two writes (it writes a
    # block as soon as it is full, the rest of the record at its next flush): not damage
    open_from = len(kinds)
    if len(state) and state[-1] == 1:
        open_from = int(np.flatnonzero(kinds == FIRST)[-1])
        if not stop_kind:
            out.open_at = int(offs[open_from])
    k = kinds[:open_from]
    heads = np.flatnonzero((k == FULL) | (k == FIRST))  # each record's first chunk, in file order
    out.offset = offs[heads]
    out.start = offs[heads] + CHUNK
    out.end = out.start + lens[heads]
    parts = np.flatnonzero(k != FULL)  # chunks of records in several: joined after the file's bytes
    extra = np.zeros(0, np.uint8)
    if len(parts):
        extra = _joined(buf, offs[parts] + CHUNK, offs[parts] + CHUNK + lens[parts])
        upto = size + np.cumsum(lens[parts])  # where each chunk's bytes end there
        first, last = np.flatnonzero(k[parts] == FIRST), np.flatnonzero(k[parts] == LAST)
        joined = k[heads] == FIRST
        out.start[joined], out.end[joined] = upto[first] - lens[parts[first]], upto[last]
    out.buf = np.concatenate([buf, extra, np.zeros(PAD, np.uint8)])
    out.intact = int(offs[open_from - 1] + CHUNK + lens[open_from - 1]) if open_from else len(MAGIC)
    if stop_kind:
        out.problems.append(_problem(path, stop_at, stop_kind, size))
    return out


def _joined(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The bytes of the spans one after another (copied by Arrow in one pass)."""
    pieces = spans(buf, start, stop)
    data, offsets = pieces.buffers()[2], np.frombuffer(pieces.buffers()[1], np.int64)
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
