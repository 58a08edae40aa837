"""Scalars collected point by point with their wall times, for the JSON-lines readers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

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
