"""Aligned steps and quantile bands: the arithmetic of a summarised comparison page (see
:mod:`sitegen.pages.bands`), on plain arrays, without pages or the cache."""

from __future__ import annotations

import math

import numpy as np

QUANTILES = (0.1, 0.5, 0.9)  # the band's low edge, the median line, its high edge
GRID = 200  # aligned steps per tag at most

#: a group's steps of a tag: its first, its last and its distinct steps (None: more than ``GRID``)
Span = tuple[int, int, "np.ndarray | None"]


def aligned(run_of: np.ndarray, step: np.ndarray, value: np.ndarray, n_runs: int, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each run's value at each of ``grid``'s steps, ``(n_runs, len(grid))``: its last point at or
    before the step (the last logged of equal steps), and where it has one (not before its first
    point, not after its last). One search over all runs' points, keyed by (run, step)."""
    if not len(step):
        return np.full((n_runs, len(grid)), np.nan), np.zeros((n_runs, len(grid)), bool)
    lo = min(int(step.min()), int(grid.min())) if len(grid) else int(step.min())
    span = max(int(step.max()), int(grid.max()) if len(grid) else 0) - lo + 1
    if n_runs * span < 2**62:  # a step's place is its distance from the first (no sort of the steps)
        rank, grank, width = step - lo, grid - lo, span
    else:  # steps too far apart for one int64 key: their ranks among all steps
        uniq = np.unique(np.concatenate([step, grid]))
        rank, grank, width = np.searchsorted(uniq, step), np.searchsorted(uniq, grid), len(uniq)
    key = run_of.astype(np.int64) * width + rank
    if len(key) > 1 and not bool((key[1:] >= key[:-1]).all()):  # (gathered points come in order)
        order = np.argsort(key, kind="stable")  # stable: the last logged of equal steps stays last
        key, run_of, rank, value = key[order], run_of[order], rank[order], value[order]
    counts = np.bincount(run_of, minlength=n_runs)
    starts = np.cumsum(counts) - counts
    last = np.where(counts > 0, rank[np.maximum(starts + counts - 1, 0)], -1)
    q = np.arange(n_runs, dtype=np.int64)[:, None] * width + grank[None, :]
    pos = np.searchsorted(key, q, side="right") - 1
    ok = (pos >= starts[:, None]) & (grank[None, :] <= last[:, None])
    vals = value[np.clip(pos, 0, None)]
    return np.where(ok, vals, np.nan), ok


def quantiles(v: np.ndarray, ps: tuple[float, ...] = QUANTILES) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``v`` (runs x steps), its quantiles ``ps`` over its finite values (linear
    interpolation, as ``numpy.nanquantile``; NaN where a column has none), and their count."""
    v = np.where(np.isfinite(v), v, np.nan)
    s = np.sort(v, axis=0)  # NaN last
    n = np.isfinite(v).sum(axis=0)
    out = np.full((len(ps), v.shape[1]), np.nan)
    cols = np.arange(v.shape[1])
    for k, p in enumerate(ps):
        h = p * np.maximum(n - 1, 0)
        lo = np.floor(h).astype(np.int64)
        hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
        a, b = s[lo, cols], s[hi, cols]
        with np.errstate(invalid="ignore"):
            out[k] = np.where(n > 0, a + (b - a) * (h - lo), np.nan)
    return out, n


def grid_of(steps: np.ndarray, most: int) -> np.ndarray:
    """The aligned steps of a tag: every step when there are at most ``most``, else the first,
    the last and the multiples of a power of two between them (at most ``most`` in all). As
    the runs grow, such a grid keeps its steps (until the power doubles): a group whose runs
    did not change keeps its band there (see :func:`sitegen.pages.bands._banded`)."""
    if not len(steps):
        return np.zeros(0, np.int64)
    return _grid(int(steps.min()), int(steps.max()), distinct(steps), most)


def distinct(steps: np.ndarray) -> np.ndarray:
    """The distinct steps of a non-empty column, sorted (close steps: which are present, without a sort)."""
    first, last = int(steps.min()), int(steps.max())
    if last - first < 4 * len(steps):
        seen = np.zeros(last - first + 1, bool)
        seen[steps - first] = True
        return np.flatnonzero(seen) + first
    return np.unique(steps)


def _grid(first: int, last: int, u: np.ndarray | None, most: int) -> np.ndarray:
    """:func:`grid_of` of steps from ``first`` to ``last`` whose distinct steps are ``u`` (None:
    more than ``most`` of them)."""
    if u is not None and len(u) <= most:
        return u
    stride = 1 << max(0, math.ceil(math.log2((last - first) / max(most - 3, 1))))
    while (last - first) // stride + 3 > most:  # (float rounding of the log)
        stride *= 2
    inner = np.arange(-(-first // stride) * stride, last + 1, stride, dtype=np.int64)
    return np.unique(np.concatenate([np.array([first, last], np.int64), inner]))


def grid_of_spans(spans: list[Span | None], most: int) -> np.ndarray:
    """:func:`grid_of` of the groups' steps of a tag from their spans alone (see :class:`sitegen.pages.bands.Digest`: the
    union of their distinct steps, or past ``GRID`` of one group's, its first and last)."""
    have = [sp for sp in spans if sp is not None]
    if not have:
        return np.zeros(0, np.int64)
    us = [sp[2] for sp in have if sp[2] is not None]
    u = np.unique(np.concatenate(us)) if len(us) == len(have) else None
    return _grid(min(sp[0] for sp in have), max(sp[1] for sp in have), u, most)
