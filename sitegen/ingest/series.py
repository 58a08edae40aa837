"""Scalars collected point by point with their wall times, for the JSON-lines readers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sitegen.ingest.values import grouped_table


class Series:
    """Per tag: steps, wall times (seconds) and values in the order they were logged; a point
    without a step gets the tag's previous step + 1 (0 for its first), as the trackers' servers do."""

    def __init__(self) -> None:
        self.points: dict[str, tuple[list[int], list[float], list[float]]] = {}

    def add(self, tag: str, step: int | None, wall: float, value: float) -> None:
        cols = self.points.get(tag)
        if cols is None:
            cols = self.points[tag] = ([], [], [])
        if step is None:
            step = cols[0][-1] + 1 if cols[0] else 0
        cols[0].append(step)
        cols[1].append(wall)
        cols[2].append(value)

    def clear(self, tag: str) -> None:
        self.points.pop(tag, None)

    def table(self) -> pa.Table:
        return grouped_table(
            {t: (np.array(s, np.int64), np.array(w, np.float64), np.array(v, np.float64)) for t, (s, w, v) in self.points.items()}
        )


def numeric(t: pa.DataType) -> bool:
    """An Arrow type :func:`bulk_table` takes as numbers (null: a column of nulls)."""
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t)


def bulk_table(tags: pa.Array, step: pa.Array, wall: pa.Array, value: pa.Array) -> pa.Table | None:
    """What :class:`Series` makes of these points added one by one in this order (a null step:
    the tag's previous step + 1), from whole columns. None when a step is not a whole number
    within int64 (the caller then adds the points one by one and reports them)."""
    if pa.types.is_floating(step.type):
        s = step.to_numpy(zero_copy_only=False)
        if not np.all(np.isnan(s) | ((s == np.floor(s)) & (np.abs(s) < 2**63))):
            return None
    code = tags.dictionary_encode()
    names, codes = code.dictionary.to_pylist(), code.indices.to_numpy()
    missing = step.is_null().to_numpy(zero_copy_only=False)
    steps = pc.fill_null(step, 0).cast(pa.int64()).to_numpy(zero_copy_only=False)
    walls = wall.cast(pa.float64()).to_numpy(zero_copy_only=False)
    values = value.cast(pa.float64()).to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    series = {}
    for c, tag in enumerate(names):
        sel = order[bounds[c] : bounds[c + 1]]
        series[tag] = (_fill_steps(steps[sel], missing[sel]), walls[sel], values[sel])
    return grouped_table(series)


def _fill_steps(s: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Steps of one tag; a missing one is the previous step + 1 (0 for the first)."""
    if not missing.any():
        return s
    i = np.arange(len(s))
    known = np.maximum.accumulate(np.where(missing, -1, i))
    base = np.where(known >= 0, s[np.maximum(known, 0)], -1)
    return np.where(known >= 0, base + (i - known), i - known - 1).astype(np.int64)
