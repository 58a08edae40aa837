"""Shared by the readers of other trackers' files: numbers, summary text, tables."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa

from sitegen.model import RUN_SCALARS_SCHEMA, empty_scalars, numeric_array, remember_tag_groups


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
        return grouped_table({tag: (steps[m], np.full(int(m.sum()), np.nan), values[m]) for tag, m in parts.items()})


def grouped_table(series: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> pa.Table:
    """A run's scalars table from ``{tag: (steps, wall times, values)}``: tags in name order,
    each tag's points in file order. Why grouped: the tag column is then made of runs of one
    string (cheap to build), and the site's grouping by tag finds the rows already in place."""
    tags = sorted(t for t, cols in series.items() if len(cols[0]))
    if not tags:
        return empty_scalars()
    counts = [len(series[t][0]) for t in tags]
    raw = [t.encode("utf-8", "surrogatepass") for t in tags]
    total = sum(len(b) * c for b, c in zip(raw, counts))
    if total >= 2**31:
        tag_array = pa.array(np.repeat(np.array(tags, dtype=object), counts), pa.string())
    else:
        offsets, base = [np.zeros(1, np.int32)], 0
        for b, c in zip(raw, counts):
            offsets.append(np.arange(1, c + 1, dtype=np.int32) * len(b) + base)
            base += len(b) * c
        data = b"".join(b * c for b, c in zip(raw, counts))
        tag_array = pa.StringArray.from_buffers(sum(counts), pa.py_buffer(np.concatenate(offsets)), pa.py_buffer(data))
    table = pa.Table.from_arrays(
        [
            tag_array,
            numeric_array(np.concatenate([series[t][0] for t in tags]), "<i8"),
            numeric_array(np.concatenate([series[t][1] for t in tags]), "<f8"),
            numeric_array(np.concatenate([series[t][2] for t in tags]), "<f8"),
        ],
        schema=RUN_SCALARS_SCHEMA,
    )
    remember_tag_groups(table, tags, np.repeat(np.arange(len(tags)), counts))
    return table
