"""Byte spans of a buffer as Arrow arrays: keys told apart, JSON numbers parsed, in bulk.

Split from :mod:`.fast` (the field walk): these copy the spans the walk found with Arrow's
``take`` (no per-byte index arrays) and hand them to Arrow's hash table or cast.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_NUMBER_START = np.zeros(256, bool)  # the first byte of a JSON number, NaN or [-]Infinity
_NUMBER_START[list(b"0123456789-NI")] = True


def spans(buf: np.ndarray, start: np.ndarray, stop: np.ndarray, text: bool = False) -> pa.Array:
    """The byte strings ``buf[start[i]:stop[i]]`` as one Arrow array (``text``: of strings), copied by Arrow.

    Fast for spans that are a few runs in buffer order, each run of disjoint spans (the fields
    :func:`fields` lists): per run, one ``take`` of the even entries of an array laid over
    ``buf`` whose odd entries are the gaps. Anything else is sorted first, or gathered by numpy.
    32-bit offsets (Arrow's ``binary``/``string``) unless the buffer or the spans need more: the
    ``take`` is several times faster than over 64-bit ones.
    """
    wide = len(buf) >= 2**31 or int((stop - start).sum()) >= 2**31
    kind = (pa.large_string() if text else pa.large_binary()) if wide else (pa.string() if text else pa.binary())
    n = len(start)
    cuts = np.flatnonzero(start[1:] < start[:-1]) + 1
    if len(cuts) > 64:
        order = np.argsort(start, kind="stable")
        where = np.empty(n, np.int64)
        where[order] = np.arange(n)
        return _laid(buf, start[order], stop[order], kind, wide).take(pa.array(where))
    bounds = [0, *cuts.tolist(), n]
    parts = [_laid(buf, start[a:b], stop[a:b], kind, wide) for a, b in zip(bounds, bounds[1:])]
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _laid(buf: np.ndarray, start: np.ndarray, stop: np.ndarray, kind: pa.DataType, wide: bool) -> pa.Array:
    """:func:`spans` of spans in buffer order (``wide``: 64-bit offsets)."""
    n = len(start)
    size = np.int64 if wide else np.int32
    if n > 1 and (start[1:] < stop[:-1]).any():  # overlapping spans: one gather
        lens = stop - start
        ends = np.cumsum(lens)
        text = buf[np.arange(ends[-1]) - np.repeat(ends - lens - start, lens)]
        offsets = np.concatenate([[0], ends]).astype(size)
        return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(text)])
    offsets = np.empty(2 * n + 1, size)
    offsets[0:-1:2], offsets[1:-1:2] = start, stop
    offsets[-1] = stop[-1] if n else 0
    laid = pa.Array.from_buffers(kind, 2 * n, [None, pa.py_buffer(offsets), pa.py_buffer(buf)])
    return laid.take(pa.array(np.arange(0, 2 * n, 2, dtype=size)))


def key_codes(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """Codes of the byte strings ``buf[start:stop]`` (equal bytes, equal code) and each code's
    bytes: Arrow's hash table over the spans (exact)."""
    if not len(start):
        return np.zeros(0, np.int64), []
    enc = spans(buf, start, stop).dictionary_encode()
    return enc.indices.to_numpy().astype(np.int64), enc.dictionary.to_pylist()


def numbers(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, is a number) of the JSON texts ``buf[start:stop]``: numbers, ``NaN`` and
    ``[-]Infinity``; anything else (objects, strings, bools) not."""
    n = len(start)
    out = np.full(n, np.nan)
    if not n:
        return out, np.zeros(0, bool)
    numeric = _NUMBER_START[buf[np.minimum(start, len(buf) - 1)]] & (stop > start)
    every = bool(numeric.all())
    idx = np.flatnonzero(numeric)
    if not len(idx):
        return out, numeric
    try:  # parsed by Arrow's cast (correctly rounded, NaN/Infinity too)
        got = spans(buf, *((start, stop) if every else (start[idx], stop[idx])), text=True).cast(pa.float64())
        got = got.to_numpy(zero_copy_only=False)
        if every:
            return got, numeric
        out[idx] = got
        return out, numeric
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        pass  # one that is not a number after all: one at a time below
    data = buf.tobytes()
    for k, t in zip(idx.tolist(), map(data.__getitem__, map(slice, start[idx].tolist(), stop[idx].tolist()))):
        try:
            out[k] = float(t)
        except ValueError:
            numeric[k] = False
    return out, numeric
