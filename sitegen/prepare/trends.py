"""A model's trend: each key metric's last (and best) value of every run against the run's start
time, the change points of that series and the current baseline band. Pure functions.

Change points come from a simple step detection (binary segmentation, as asv's regression
detection looks for steps, not single noisy points): a split is kept when the two sides' means
differ by more than :data:`THRESHOLD` standard errors and each side has :data:`MIN_SEGMENT` runs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from sitegen.prepare.changes import RunState

MIN_SEGMENT = 3
THRESHOLD = 5.0  # standard errors between the two sides' means


@dataclass
class Trend:
    """One metric of one group: its points in start order, change points and baseline band."""

    metric: str
    runs: list[RunState]  # with a value of the metric, by start time then name
    values: list[float]
    best: list[float | None]
    changes: list[int] = field(default_factory=list)  # indices where a new level starts
    band: tuple[float, float, float] | None = None  # (first start, low, high) of the last level


def change_points(values: list[float], *, min_segment: int = MIN_SEGMENT, threshold: float = THRESHOLD) -> list[int]:
    """Where the level of ``values`` steps (index of the first value of each new level), by
    recursive binary segmentation; each split is scored in one pass over prefix sums."""
    s1, s2 = [0.0], [0.0]
    for v in values:
        s1.append(s1[-1] + v)
        s2.append(s2[-1] + v * v)
    found: list[int] = []

    def score(lo: int, i: int, hi: int) -> float:
        """The distance of the means of values[lo:i] and values[i:hi], in standard errors."""
        nl, nr = i - lo, hi - i
        ml, mr = (s1[i] - s1[lo]) / nl, (s1[hi] - s1[i]) / nr
        ss = (s2[i] - s2[lo]) - nl * ml * ml + (s2[hi] - s2[i]) - nr * mr * mr
        var = max(ss / max(1, hi - lo - 2), (1e-9 * (abs(ml) + abs(mr))) ** 2, 1e-300)  # flat sides: still a step
        return abs(ml - mr) / math.sqrt(var * (1 / nl + 1 / nr))

    def split(lo: int, hi: int) -> None:
        if hi - lo < 2 * min_segment:
            return
        best, at = max((score(lo, i, hi), i) for i in range(lo + min_segment, hi - min_segment + 1))
        if best < threshold:
            return
        found.append(at)
        split(lo, at)
        split(at, hi)

    split(0, len(values))
    return sorted(found)


def trend(metric: str, states: list[RunState]) -> Trend:
    """The trend of ``metric`` over ``states`` (runs without a start time or a value left out)."""
    have = sorted((s for s in states if metric in s.metrics and s.start_time is not None), key=lambda s: (s.start_time, s.name))
    values = [s.metrics[metric] for s in have]
    t = Trend(metric, have, values, [s.best.get(metric) for s in have], change_points(values))
    if values:
        first = t.changes[-1] if t.changes else 0
        last = values[first:]
        mean = statistics.fmean(last)
        sd = statistics.pstdev(last) if len(last) > 1 else 0.0
        t.band = (float(have[first].start_time or 0.0), mean - sd, mean + sd)
    return t
