"""Byte spans of a buffer as Arrow arrays: keys told apart, JSON numbers parsed, in bulk.

Split from :mod:`.fast` (the field walk): these copy the spans the walk found with Arrow's
``take`` (no per-byte index arrays) and hand them to Arrow's hash table or cast.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def spans(buf: np.ndarray, start: np.ndarray, stop: np.ndarray, kind: pa.DataType | None = None) -> pa.Array:
    """The byte strings ``buf[start[i]:stop[i]]`` as one Arrow array, copied by Arrow.

    Fast for spans that are a few runs in buffer order, each run of disjoint spans (the fields
    :func:`fields` lists): per run, one ``take`` of the even entries of an array laid over
    ``buf`` whose odd entries are the gaps. Anything else is sorted first, or gathered by numpy.
    """
    kind = pa.large_binary() if kind is None else kind
    n = len(start)
    cuts = np.flatnonzero(start[1:] < start[:-1]) + 1
    if len(cuts) > 64:
        order = np.argsort(start, kind="stable")
        where = np.empty(n, np.int64)
        where[order] = np.arange(n)
        return _laid(buf, start[order], stop[order], kind).take(pa.array(where))
    bounds = [0, *cuts.tolist(), n]
    parts = [_laid(buf, start[a:b], stop[a:b], kind) for a, b in zip(bounds, bounds[1:])]
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _laid(buf: np.ndarray, start: np.ndarray, stop: np.ndarray, kind: pa.DataType) -> pa.Array:
    """:func:`spans` of spans in buffer order."""
    n = len(start)
    if n > 1 and (start[1:] < stop[:-1]).any():  # overlapping spans: one gather
        lens = stop - start
        ends = np.cumsum(lens)
        text = buf[np.arange(ends[-1]) - np.repeat(ends - lens - start, lens)]
        offsets = np.concatenate([[0], ends]).astype(np.int64)
        return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(text)])
    offsets = np.empty(2 * n + 1, np.int64)
    offsets[0:-1:2], offsets[1:-1:2] = start, stop
    offsets[-1] = stop[-1] if n else 0
    laid = pa.Array.from_buffers(kind, 2 * n, [None, pa.py_buffer(offsets), pa.py_buffer(buf)])
    return laid.take(pa.array(np.arange(0, 2 * n, 2)))


def key_codes(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """Codes of the byte strings ``buf[start:stop]`` (equal bytes, equal code) and each code's
    bytes: Arrow's hash table over the spans (exact)."""
    if not len(start):
        return np.zeros(0, np.int64), []
    enc = spans(buf, start, stop).dictionary_encode()
    return enc.indices.to_numpy().astype(np.int64), enc.dictionary.to_pylist()


def numbers(buf: np.ndarray, start: np.ndarray, stop: np.ndarray, raw: bytes | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(value, is a number) of the JSON texts ``buf[start:stop]``: numbers, ``NaN`` and
    ``[-]Infinity``; anything else (objects, strings, bools) not. ``raw``: ``buf`` as bytes."""
    n = len(start)
    out = np.full(n, np.nan)
    if not n:
        return out, np.zeros(0, bool)
    length = stop - start
    first = buf[np.minimum(start, len(buf) - 1)]
    numeric = (length > 0) & (((first >= ord("0")) & (first <= ord("9"))) | (first == ord("-")) | (first == ord("N")) | (first == ord("I")))
    idx = np.flatnonzero(numeric)
    if not len(idx):
        return out, numeric
    try:  # parsed by Arrow's cast (correctly rounded, NaN/Infinity too)
        out[idx] = spans(buf, start[idx], stop[idx], pa.large_string()).cast(pa.float64()).to_numpy(zero_copy_only=False)
        return out, numeric
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        pass  # one that is not a number after all: one at a time below
    data = raw if raw is not None and int(stop[idx].max()) <= len(raw) else buf.tobytes()
    for k, t in zip(idx.tolist(), map(data.__getitem__, map(slice, start[idx].tolist(), stop[idx].tolist()))):
        try:
            out[k] = float(t)
        except ValueError:
            numeric[k] = False
    return out, numeric
