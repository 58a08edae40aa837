"""Shared by the readers of other trackers' files: numbers, summary text, tables."""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from sitegen.model import RUN_SCALARS_SCHEMA, empty_scalars, numeric_array, remember_tag_groups, strings_from_codes


def number(v: Any) -> float | None:
    """A JSON value as a float when it is a number (not a bool); None otherwise."""
    if isinstance(v, float):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    return None


def summary_text(v: Any) -> str:
    """A summary value as shown on the run page: floats to the last digit written."""
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)
    return str(v)


class Columns:
    """Scalars collected row by row: one table at the end, grouped by tag (see :func:`grouped_table`)."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.codes: list[int] = []
        self.steps: list[int] = []
        self.values: list[float] = []

    def add(self, tag: str, step: int, value: float) -> None:
        code = self.names.get(tag)
        if code is None:
            code = self.names[tag] = len(self.names)
        self.codes.append(code)
        self.steps.append(step)
        self.values.append(value)

    def table(self) -> pa.Table:
        codes = np.array(self.codes, np.int64)
        steps = np.array(self.steps, np.int64)
        values = np.array(self.values, np.float64)
        parts = {tag: codes == code for tag, code in self.names.items()}
        return grouped_table({tag: (steps[m], None, values[m]) for tag, m in parts.items()})


def pooled(n: int, dtype: "np.typing.DTypeLike") -> np.ndarray:
    """An uninitialised array of ``n`` items in a buffer of pyarrow's memory pool. Why: the
    table's columns are Arrow memory either way, and the pool keeps the pages of freed buffers
    for the next ones, where numpy's large arrays are mapped afresh and unmapped when freed
    (every page of every read faulted in again)."""
    kind = np.dtype(dtype)
    return np.frombuffer(pa.allocate_buffer(n * kind.itemsize), kind, n)


def gather(values: np.ndarray, keep: np.ndarray, n: int) -> np.ndarray:
    """``values[keep]`` (``n`` of them are kept) in a :func:`pooled` array."""
    return np.compress(keep, values, out=pooled(n, values.dtype))


#: a tag with at least this many points is a chunk of the table of its own, its columns used as
#: they are (no copy); the points of smaller tags are gathered into shared chunks
OWN_CHUNK = 4096
_SHARED_ROWS = 1 << 16  # rows of small tags per shared chunk (their tag bytes stay far below 2 GiB)


def grouped_table(series: Mapping[str, tuple[np.ndarray, "np.ndarray | None", np.ndarray]]) -> pa.Table:
    """A run's scalars table from ``{tag: (steps, wall times or None for NaN, values)}``: tags in
    name order, each tag's points in file order. Why grouped and chunked: a large tag's steps and
    values become its chunk without being copied into one long column, its tag strings are one
    repeated string (no lookup per row), and the site's grouping by tag finds the rows in place."""
    tags = sorted(t for t, cols in series.items() if len(cols[0]))
    if not tags:
        return empty_scalars()
    counts = [len(series[t][0]) for t in tags]
    nan = pooled(max(counts), np.float64)  # views of it: the wall times of tags that have none
    nan.fill(np.nan)
    names = _repeated([(t, n) for t, n in zip(tags, counts) if n >= OWN_CHUNK])
    batches: list[pa.RecordBatch] = []
    small: list[str] = []
    rows = 0
    for tag, n in zip(tags, counts):
        if n >= OWN_CHUNK:
            if small:  # the smaller tags before it first: chunks stay in tag order
                batches.append(_shared_chunk(small, series, nan))
                small, rows = [], 0
            batches += _own_chunks(names[tag], series[tag], nan)
            continue
        small.append(tag)
        rows += n
        if rows >= _SHARED_ROWS:
            batches.append(_shared_chunk(small, series, nan))
            small, rows = [], 0
    if small:
        batches.append(_shared_chunk(small, series, nan))
    table = pa.Table.from_batches(batches, schema=RUN_SCALARS_SCHEMA)
    code_type = np.int16 if len(tags) < 2**15 else np.int64
    remember_tag_groups(table, tags, np.repeat(np.arange(len(tags), dtype=code_type), counts))
    return table


def _cap(tag: str) -> int:
    """Rows of ``tag`` per chunk: its tag bytes stay under 2 GiB (int32 offsets)."""
    return max(1, (2**31 - 1) // max(1, len(tag.encode("utf-8", "surrogatepass"))))


def _repeated(tags: list[tuple[str, int]]) -> dict[str, pa.Array]:
    """Each ``(tag, n)`` as ``min(n, cap)`` copies of the tag in a string array (offsets a ramp,
    bytes one repeat). Why the bytes of all of them in one :func:`pooled` array: one buffer
    whose pages are kept from read to read, not one ``bytes`` per tag."""
    raws = [t.encode("utf-8", "surrogatepass") for t, _ in tags]
    rows = [min(n, _cap(t)) for t, n in tags]
    blob = pooled(sum(len(r) * k for r, k in zip(raws, rows)), np.uint8)
    out: dict[str, pa.Array] = {}
    at = 0
    for (tag, _), raw, k in zip(tags, raws, rows):
        part = blob[at : at + len(raw) * k]
        at += len(part)
        part.reshape(k, len(raw))[:] = np.frombuffer(raw, np.uint8)  # (one broadcast copy)
        offsets = pooled(k + 1, np.int32)  # 0, len, 2 len, ...
        offsets.fill(len(raw))
        offsets[0] = 0
        np.cumsum(offsets, dtype=np.int32, out=offsets)
        out[tag] = pa.StringArray.from_buffers(k, pa.py_buffer(offsets), pa.py_buffer(part))
    return out


def _own_chunks(names: pa.Array, cols: tuple[np.ndarray, "np.ndarray | None", np.ndarray], nan: np.ndarray) -> list[pa.RecordBatch]:
    """One large tag as record batches of at most ``len(names)`` rows (its tag strings, made by
    :func:`_repeated`: as many as keep their bytes under 2 GiB)."""
    steps, walls, values = cols
    n = len(steps)
    cap = len(names)
    out = []
    for a in range(0, n, cap):
        b = min(n, a + cap)
        out.append(
            pa.RecordBatch.from_arrays(
                [
                    names.slice(0, b - a),
                    numeric_array(steps[a:b], "<i8"),
                    numeric_array(nan[: b - a] if walls is None else walls[a:b], "<f8"),
                    numeric_array(values[a:b], "<f8"),
                ],
                schema=RUN_SCALARS_SCHEMA,
            )
        )
    return out


def _shared_chunk(
    tags: list[str], series: Mapping[str, tuple[np.ndarray, "np.ndarray | None", np.ndarray]], nan: np.ndarray
) -> pa.RecordBatch:
    """Small tags' points gathered into one record batch."""
    cols = [series[t] for t in tags]
    counts = [len(c[0]) for c in cols]
    return pa.RecordBatch.from_arrays(
        [
            strings_from_codes(tags, np.repeat(np.arange(len(tags)), counts)),
            numeric_array(np.concatenate([c[0] for c in cols]), "<i8"),
            numeric_array(np.concatenate([nan[:k] if c[1] is None else c[1] for c, k in zip(cols, counts)]), "<f8"),
            numeric_array(np.concatenate([c[2] for c in cols]), "<f8"),
        ],
        schema=RUN_SCALARS_SCHEMA,
    )
