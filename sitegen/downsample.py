"""Thin long series for charts without hiding what matters.

Unlike a reservoir sample, the selection is deterministic and always keeps the first and last
points, the global minimum and maximum, and every NaN/+-inf (drawn as markers). Between them,
MinMaxLTTB (tsdownsample, Rust) keeps the shape, so spikes survive. Like tsdownsample, selectors
return *indices*, so one selection applies to every column.

A step written twice (a resumed run) is drawn with its newest value; the raw table keeps both.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import numpy as np

from sitegen.model import Series, Stats

log = logging.getLogger(__name__)

try:  # the fast path; the numpy reference below is its oracle in the tests
    from tsdownsample import MinMaxLTTBDownsampler
except ImportError:  # pragma: no cover - tsdownsample is a declared dependency
    MinMaxLTTBDownsampler = None  # type: ignore[misc, assignment]  # the optional class is checked for None below
try:
    # tsdownsample's kernel for int64 steps and float64 values, called directly: the public
    # wrapper's argument checks cost more than the kernel on a short line, and a build thins
    # tens of thousands of lines. Same function, same result.
    from tsdownsample._rust._tsdownsample_rs import minmaxlttb as _mml

    _KERNEL = _mml.sequential.downsample_i64_f64
    from tsdownsample._rust._tsdownsample_rs import minmax as _mm

    _MINMAX = _mm.sequential.downsample_f64  # min and max per bucket in one pass; skips NaN
except (ImportError, AttributeError):  # pragma: no cover - other tsdownsample versions
    _KERNEL = _MINMAX = None
MINMAX_RATIO = 4  # tsdownsample's default


def newest_per_step(step: np.ndarray) -> np.ndarray | None:
    """Indices of the last occurrence of each step, sorted by step; None when the steps are
    already strictly increasing (the common case, which then costs one compare pass)."""
    if len(step) < 2 or bool(np.all(step[1:] > step[:-1])):
        return None
    order = np.argsort(step, kind="stable")
    s = step[order]
    keep = np.empty(len(s), dtype=bool)
    keep[:-1] = s[1:] != s[:-1]
    keep[-1] = True
    return order[keep]


def minmax_reference(x: np.ndarray, y: np.ndarray, n_out: int) -> np.ndarray:
    """Slow, obvious reference: split x's index range into n_out/2 equal buckets, keep min and max."""
    n = len(y)
    if n <= n_out:
        return np.arange(n)
    buckets = max(n_out // 2, 1)
    bounds = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep: list[int] = [0, n - 1]
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b > a:
            seg = y[a:b]
            keep += [a + int(np.argmin(seg)), a + int(np.argmax(seg))]
    return np.unique(np.array(keep, dtype=np.int64))


def _shape_indices(x: np.ndarray, y: np.ndarray, n_out: int) -> np.ndarray:
    """Indices (into finite-only, step-sorted arrays) that keep the series' shape."""
    if len(y) <= n_out:
        return np.arange(len(y))
    if n_out >= 4 and _KERNEL is not None and x.dtype == np.int64 and y.dtype == np.float64:
        return np.asarray(_KERNEL(np.ascontiguousarray(x), np.ascontiguousarray(y), n_out, ratio=MINMAX_RATIO), dtype=np.int64)
    if MinMaxLTTBDownsampler is not None and n_out >= 4:
        idx = MinMaxLTTBDownsampler().downsample(x, y, n_out=n_out, minmax_ratio=MINMAX_RATIO, parallel=False)
        return np.asarray(idx, dtype=np.int64)
    return minmax_reference(x, y, n_out)


def downsample(step: np.ndarray, wall_time: np.ndarray, value: np.ndarray, n_out: int) -> Series:
    """Exact stats plus a thinned, chart-ready copy of one series (arrays in write order).

    Drawn: at most about ``n_out`` finite points chosen by MinMaxLTTB, plus the first and last
    point, the finite min and max, and every non-finite point of the newest-per-step series.
    """
    if n_out < 8:
        raise ValueError(f"n_out: need at least 8 points, got {n_out}")
    step = np.asarray(step, dtype=np.int64)
    value = np.asarray(value, dtype=np.float64)
    wall_time = np.asarray(wall_time, dtype=np.float64)
    n = len(step)
    if n == 0:
        raise ValueError("downsample: empty series")
    base = newest_per_step(step)
    s, v = (step, value) if base is None else (step[base], value[base])
    lo: int | None  # positions of the finite min and max in (s, v); None: no finite value
    hi: int | None
    keep = [np.array([0, len(s) - 1])]
    quick = _quick_scan(v) if len(s) > n_out else None
    if quick is not None:  # a long series with no infinity: three passes instead of six
        lo, hi, bad = quick
        all_finite = bad is None
        if bad is not None:
            keep.append(bad)
        # both kernels skip NaN, so the values need no filling
        keep.append(np.concatenate([[lo, hi], _shape_indices(s, v, n_out - 8)]))
    else:
        finite = np.isfinite(v)
        all_finite = bool(finite.all())
        bad = None if all_finite else np.flatnonzero(~finite)
        lo = hi = None
        if bad is not None:
            keep.append(bad)
    if quick is None and (bad is None or len(bad) < len(v)):
        # Non-finite points are kept as markers anyway; for choosing the rest, each is given its
        # finite neighbour's value, which costs O(non-finite) instead of compacting every array.
        fv = v if bad is None else _filled(v, bad)
        lo, hi = int(np.argmin(fv)), int(np.argmax(fv))
        if bad is not None and bad[0] == 0:  # a leading non-finite run holds copies of what follows it
            first = int(bad[np.flatnonzero(np.diff(bad) != 1)[0]] + 1) if np.any(np.diff(bad) != 1) else int(bad[-1] + 1)
            lo, hi = (first if lo < first else lo), (first if hi < first else hi)
        if len(s) > n_out:
            keep.append(np.concatenate([[lo, hi], _shape_indices(s, fv, n_out - 8)]))
    # a series that fits is drawn whole; else the chosen positions in (s, v), sorted by step
    whole = len(s) <= n_out
    idx = np.arange(len(s)) if whole else _sorted_unique(np.concatenate(keep), len(s))
    orig = idx if base is None else base[idx]
    if all_finite and base is None:
        nan = posinf = neginf = 0
    else:
        raw_bad = value[bad] if base is None else value[~np.isfinite(value)]
        nan, posinf, neginf = int(np.isnan(raw_bad).sum()), int(np.isposinf(raw_bad).sum()), int(np.isneginf(raw_bad).sum())
    fs = s
    st = Stats(
        count=n,
        nan=nan,
        posinf=posinf,
        neginf=neginf,
        first_step=int(step[0]),
        first_value=float(value[0]),
        last_step=int(step[-1]),
        last_value=float(value[-1]),
        min_step=None if lo is None else int(fs[lo]),
        min_value=None if lo is None else float(v[lo]),
        max_step=None if hi is None else int(fs[hi]),
        max_value=None if hi is None else float(v[hi]),
    )
    if base is not None and st.min_value is not None:
        # duplicates may hide an older extreme from the drawn series; stats are over every record
        st = _raw_extremes(st, step, value, value[np.isfinite(value)])
    if whole and base is None:  # every point, in place: no copies
        return Series(step, wall_time, value, st, False)
    return Series(step[orig], wall_time[orig], value[orig], st, len(idx) < len(s))


def _sorted_unique(idx: np.ndarray, n: int) -> np.ndarray:
    """``np.unique(idx)`` for indices in ``0..n-1``: by a mask when ``n`` is small next to them
    (a comparison line's 500 of 2,000 points), else by sorting."""
    if n > 16 * len(idx):
        return np.unique(idx)
    seen = np.zeros(n, dtype=bool)
    seen[idx] = True
    return np.flatnonzero(seen)


def level_bits(step: np.ndarray, wall_time: np.ndarray, value: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """Bit k of a point is set when ``downsample(..., sizes[k])`` draws it (at most 8 sizes).

    Exactly the same choice as calling :func:`downsample` per size, but a series with strictly
    increasing steps and no infinity (the common case) is scanned for its extremes and NaNs
    once, not once per size."""
    step = np.asarray(step, dtype=np.int64)
    value = np.asarray(value, dtype=np.float64)
    n = len(step)
    bits = np.zeros(n, dtype=np.uint8)
    quick = _quick_scan(value) if n > min(sizes) and newest_per_step(step) is None else None
    for k, size in enumerate(sizes):
        bit = np.uint8(1 << k)
        if n <= size:
            bits |= bit
        elif quick is not None:
            lo, hi, bad = quick
            bits[_shape_indices(step, value, size - 8)] |= bit
            bits[[0, n - 1, lo, hi]] |= bit
            if bad is not None:
                bits[bad] |= bit
        else:
            t = downsample(step, wall_time, value, size)
            bits[np.searchsorted(step, t.step)] |= bit
    return bits


def _quick_scan(v: np.ndarray) -> tuple[int, int, np.ndarray | None] | None:
    """(argmin, argmax of the finite values, non-finite positions or None) of a long series
    with no infinity, in a NaN-propagating min pass and one Rust min/max pass (which skips
    NaN); None when there is an infinity, no finite value or no kernel (the general path)."""
    if _MINMAX is None or _KERNEL is None or len(v) < 8:
        return None
    v = np.ascontiguousarray(v)
    cand = np.asarray(_MINMAX(v, 4), dtype=np.int64)
    lo, hi = int(cand[np.argmin(v[cand])]), int(cand[np.argmax(v[cand])])
    if not (math.isfinite(v[lo]) and math.isfinite(v[hi])):
        return None
    bad = _nan_positions(v)
    return (lo, hi, bad) if bad is None or len(bad) < len(v) else None


NAN_BLOCK = 1 << 16


def _nan_positions(v: np.ndarray) -> np.ndarray | None:
    """Positions of NaN values (None: there are none), in one pass: a NaN-propagating min per
    cache-sized block, positions looked up only in blocks that have one."""
    out = []
    for a in range(0, len(v), NAN_BLOCK):
        block = v[a : a + NAN_BLOCK]
        if math.isnan(float(block.min())):
            out.append(np.flatnonzero(np.isnan(block)) + a)
    return np.concatenate(out) if out else None


def _filled(v: np.ndarray, bad: np.ndarray) -> np.ndarray:
    """A copy of ``v`` whose non-finite entries (``bad``, sorted) hold the nearest finite value
    before them (after them, for a leading run). Needs at least one finite value."""
    out = v.copy()
    cut = np.flatnonzero(np.diff(bad) != 1) + 1
    starts = bad[np.concatenate([[0], cut])]
    ends = bad[np.concatenate([cut - 1, [len(bad) - 1]])]
    src = np.where(starts > 0, starts - 1, ends + 1)
    out[bad] = np.repeat(v[src], ends - starts + 1)
    return out


def _raw_extremes(st: Stats, step: np.ndarray, value: np.ndarray, raw_finite: np.ndarray) -> Stats:
    lo, hi = float(raw_finite.min()), float(raw_finite.max())
    if lo == st.min_value and hi == st.max_value:
        return st
    i, j = int(np.flatnonzero(value == lo)[0]), int(np.flatnonzero(value == hi)[0])
    return replace(st, min_step=int(step[i]), min_value=lo, max_step=int(step[j]), max_value=hi)
