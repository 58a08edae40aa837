"""TFRecord framing, the reference way: one record at a time, obviously correct.

Layout of a record: u64 LE length, u32 masked CRC32C of those 8 bytes, payload, u32 masked
CRC32C of the payload. This walk is the oracle the vectorized decoder is tested against, and its
damage policy is the project's policy:

* fewer bytes left than a whole record whose length CRC checks out: the tail is "not written
  yet" (a ``truncated`` problem); ``end`` stays at the last complete record;
* bad length CRC: the length cannot be trusted, so scan forward byte by byte for the next offset
  whose length CRC checks out and whose record fits in the file (``bad-length`` problem);
* bad payload CRC (when verifying): the length was proven by its own CRC, so skip exactly this
  record (``bad-crc`` problem) and go on with the next one.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterator

import google_crc32c

from sitegen.errors import Problem

HEADER = 12  # u64 length + u32 length CRC
FOOTER = 4
_MASK_DELTA = 0xA282EAD8


def crc32c(data: bytes | memoryview) -> int:
    return google_crc32c.value(bytes(data))


def mask(crc: int) -> int:
    """TFRecord's CRC mask: rotate right by 15 bits, then add a constant (mod 2**32)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def masked_crc32c(data: bytes | memoryview) -> int:
    return mask(crc32c(data))


def frame(payload: bytes) -> bytes:
    """One TFRecord record around ``payload``: the writer-side inverse of :func:`iter_records`
    (tests and benchmarks use it to lay out records byte for byte as writers do)."""
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", masked_crc32c(head)) + payload + struct.pack("<I", masked_crc32c(payload))


@dataclass
class Framing:
    """What the walk found besides the records themselves."""

    end: int = 0  # offset just past the last complete record (where an incremental read resumes)
    problems: list[Problem] = field(default_factory=list)


def _length_ok(buf: memoryview, off: int) -> bool:
    return masked_crc32c(buf[off : off + 8]) == struct.unpack_from("<I", buf, off + 8)[0]


def _resync(buf: memoryview, start: int) -> int | None:
    """First offset >= start whose length CRC checks out and whose record fits in the buffer."""
    size = len(buf)
    for off in range(start, size - HEADER + 1):
        if _length_ok(buf, off):
            (length,) = struct.unpack_from("<Q", buf, off)
            if off + HEADER + length + FOOTER <= size:
                return off
    return None


def iter_records(
    buf: bytes | memoryview, path: str, framing: Framing, *, verify: bool = True, start: int = 0
) -> Iterator[tuple[int, memoryview]]:
    """Yield ``(record_offset, payload)`` for every intact record, reporting damage in ``framing``."""
    view = memoryview(buf)
    size = len(view)
    off = start
    framing.end = start
    while off < size:
        if size - off < HEADER:
            framing.problems.append(Problem(path, off, "truncated", f"incomplete record header ({size - off} bytes): not written yet"))
            return
        if not _length_ok(view, off):
            nxt = _resync(view, off + 1)
            skipped = (nxt if nxt is not None else size) - off
            framing.problems.append(
                Problem(path, off, "bad-length", f"bad length checksum; skipped {skipped} bytes to the next valid record")
            )
            if nxt is None:
                return
            off = nxt
            continue
        (length,) = struct.unpack_from("<Q", view, off)
        stop = off + HEADER + length + FOOTER
        if stop > size:
            framing.problems.append(
                Problem(path, off, "truncated", f"incomplete record ({size - off} of {length + HEADER + FOOTER} bytes): not written yet")
            )
            return
        payload = view[off + HEADER : off + HEADER + length]
        if verify and masked_crc32c(payload) != struct.unpack_from("<I", view, off + HEADER + length)[0]:
            framing.problems.append(Problem(path, off, "bad-crc", "bad payload checksum; record skipped"))
        else:
            yield off, payload
        off = stop
        framing.end = off
