"""A model's trend: each key metric's last (and best) value of every run against the run's start
time, and against the commit the run records (commits in the order of their first run), the
change points of each series and the current baseline band. Pure functions.

Change points come from a simple step detection (binary segmentation, as asv's regression
detection looks for steps, not single noisy points): a split is kept when the two sides' means
differ by more than :data:`THRESHOLD` standard errors and each side has :data:`MIN_SEGMENT` runs.
"""

from __future__ import annotations

import bisect
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
    got = band(values, t.changes)
    if got is not None:
        t.band = (float(have[got[0]].start_time or 0.0), got[1], got[2])
    return t


def band(values: list[float], changes: list[int]) -> tuple[int, float, float] | None:
    """The current baseline: (index of its first value, mean - sd, mean + sd) since the last change point."""
    if not values:
        return None
    first = changes[-1] if changes else 0
    last = values[first:]
    mean = statistics.fmean(last)
    sd = statistics.pstdev(last) if len(last) > 1 else 0.0
    return first, mean - sd, mean + sd


@dataclass
class CommitTrend:
    """One metric of one group against commits: each commit (in the order of its first run's
    start) with its runs, the median of their last values, change points and band over those."""

    metric: str
    commits: list[str]  # full hashes as recorded (a short one that a longer one extends is merged)
    labels: list[str]  # the git tag, else the short hash (unique)
    runs: list[list[RunState]]  # of each commit, by start time then name
    values: list[float]  # the median of each commit's runs' last values
    changes: list[int] = field(default_factory=list)  # commit indices where a new level starts
    band: tuple[int, float, float] | None = None  # (first commit, low, high) of the last level


def canonical(hashes: set[str]) -> dict[str, str]:
    """Each hash -> the one longer recorded hash it is a prefix of (a short hash from one source,
    the full one from another), when there is exactly one; else itself."""
    ordered = sorted(hashes)
    out = {}
    for h in ordered:
        i = bisect.bisect_right(ordered, h)
        longer = []
        while i < len(ordered) and ordered[i].startswith(h):
            longer.append(ordered[i])
            i += 1
        full = [x for x in longer if not any(y != x and y.startswith(x) for y in longer)]
        out[h] = full[0] if len(full) == 1 else h
    return out


def commit_trend(metric: str, states: list[RunState]) -> CommitTrend:
    """The trend of ``metric`` over the commits of ``states`` (runs without a commit, a start
    time or a value left out)."""
    have = sorted(
        (s for s in states if s.commit and metric in s.metrics and s.start_time is not None), key=lambda s: (s.start_time, s.name)
    )
    full = canonical({s.commit for s in states if s.commit})
    by_commit: dict[str, list[RunState]] = {}
    for s in have:
        by_commit.setdefault(full[s.commit or ""], []).append(s)  # (first run first: dicts keep order)
    commits = list(by_commit)
    runs = [by_commit[c] for c in commits]
    values = [statistics.median(r.metrics[metric] for r in rs) for rs in runs]
    size = 7  # short hashes as git abbreviates them: as long as it takes to tell them apart
    while size < max(map(len, commits), default=0) and len({c[:size] for c in commits}) < len(commits):
        size += 1
    labels: list[str] = []
    for c, rs in zip(commits, runs):
        tag = next((r.commit_tag for r in rs if r.commit_tag), None)
        label = c[:size] if tag is None else tag if tag not in labels else f"{tag} {c[:size]}"
        labels.append(label if label not in labels else c)
    t = CommitTrend(metric, commits, labels, runs, values, change_points(values))
    t.band = band(values, t.changes)
    return t
