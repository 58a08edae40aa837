"""A minimal protobuf wire-format walker.

We parse logs without generated protobuf code so that neither tensorflow nor tensorboard is a
runtime dependency. Any malformation raises :class:`WireError`; callers turn it into a problem
naming the file and record offset.
"""

from __future__ import annotations

import struct
from typing import Iterator

VARINT, I64, LEN, I32 = 0, 1, 2, 5


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint too long")


def to_int64(value: int) -> int:
    """Reinterpret a decoded varint as a signed 64-bit integer (negative int64 use 10 bytes)."""
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def iter_fields(buf: memoryview | bytes) -> Iterator[tuple[int, int, int | memoryview]]:
    """Yield ``(field_number, wire_type, value)``: int for varint/fixed, memoryview for LEN.

    Fixed-width values are returned as raw unsigned integers; use :func:`f32`/:func:`f64`.
    """
    view = memoryview(buf)
    pos, end = 0, len(view)
    value: int | memoryview
    while pos < end:
        key, pos = read_varint(view, pos)
        field, wt = key >> 3, key & 7
        if field == 0:
            raise WireError("field number 0")
        if wt == VARINT:
            value, pos = read_varint(view, pos)
        elif wt == I64:
            if pos + 8 > end:
                raise WireError("truncated fixed64")
            value = struct.unpack_from("<Q", view, pos)[0]
            pos += 8
        elif wt == LEN:
            length, pos = read_varint(view, pos)
            if pos + length > end:
                raise WireError("length-delimited field runs past the end")
            value = view[pos : pos + length]
            pos += length
        elif wt == I32:
            if pos + 4 > end:
                raise WireError("truncated fixed32")
            value = struct.unpack_from("<I", view, pos)[0]
            pos += 4
        else:
            raise WireError(f"unsupported wire type {wt}")
        yield field, wt, value


def encode_varint(n: int) -> bytes:
    """The varint bytes of ``n`` (negative numbers as their 64-bit two's complement, 10 bytes).
    The writer-side inverse of :func:`read_varint`, for tests and benchmark inputs."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def f32(raw: int) -> float:
    return struct.unpack("<f", struct.pack("<I", raw))[0]


def f64(raw: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", raw))[0]


def packed(value: int | memoryview, wt: int, fmt: str) -> list:
    """Values of a repeated numeric field, packed (LEN) or not; ``fmt`` is 'f', 'd', 'q' or 'v'."""
    if wt == LEN:
        data = bytes(value)
        if fmt == "v":
            out, pos, view = [], 0, memoryview(data)
            while pos < len(view):
                v, pos = read_varint(view, pos)
                out.append(to_int64(v))
            return out
        size = struct.calcsize(fmt)
        if len(data) % size:
            raise WireError("packed field length is not a multiple of its element size")
        return list(struct.unpack(f"<{len(data) // size}{fmt}", data))
    if fmt == "f":
        return [f32(value)]  # type: ignore[arg-type]
    if fmt == "d":
        return [f64(value)]  # type: ignore[arg-type]
    return [to_int64(value)]  # type: ignore[arg-type]


def text(value: int | memoryview) -> str:
    if not isinstance(value, memoryview):
        raise WireError("expected a length-delimited field")
    return bytes(value).decode("utf-8", errors="replace")
