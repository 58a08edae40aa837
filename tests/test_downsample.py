"""Downsampling keeps first, last, extremes and every non-finite point; matches the reference."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sitegen.downsample import downsample, minmax_reference, newest_per_step


def test_spike_nan_and_last_value_survive():
    n = 200_000
    step = np.arange(n, dtype=np.int64)
    value = np.sin(step / 5000.0)
    value[12345] = 50.0
    value[777] = np.nan
    value[150_000] = -np.inf
    s = downsample(step, step * 1.0, value, 2000)
    assert len(s.step) <= 2000 + 8
    assert s.thinned
    assert 12345 in s.step and 777 in s.step and 150_000 in s.step
    assert s.step[0] == 0 and s.step[-1] == n - 1
    assert np.all(np.diff(s.step) > 0)
    assert s.stats.max_value == 50.0 and s.stats.max_step == 12345
    assert s.stats.nan == 1 and s.stats.neginf == 1 and s.stats.count == n
    assert s.stats.last_value == value[-1]


def test_resumed_run_draws_the_newest_value_per_step():
    step = np.array([0, 1, 2, 3, 4, 2, 3, 4, 5], dtype=np.int64)
    value = np.array([0, 1, 2, 3, 4, 20, 30, 40, 50], dtype=np.float64)
    s = downsample(step, step * 1.0, value, 100)
    assert s.step.tolist() == [0, 1, 2, 3, 4, 5]
    assert s.value.tolist() == [0, 1, 20, 30, 40, 50]
    assert s.stats.count == 9 and s.stats.max_value == 50


def test_newest_per_step_matches_a_dict():
    rng = np.random.default_rng(1)
    step = rng.integers(0, 50, 500)
    idx = newest_per_step(step)
    expected = {}
    for i, s in enumerate(step.tolist()):
        expected[s] = i
    assert idx.tolist() == [expected[s] for s in sorted(expected)]


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=1, max_size=3000),
    n_out=st.integers(min_value=8, max_value=400),
)
def test_selection_invariants(values, n_out):
    value = np.array(values, dtype=np.float64)
    step = np.arange(len(value), dtype=np.int64)
    s = downsample(step, step * 1.0, value, n_out)
    chosen = set(s.step.tolist())
    assert 0 in chosen and len(value) - 1 in chosen
    assert set(np.flatnonzero(~np.isfinite(value)).tolist()) <= chosen
    finite = np.isfinite(value)
    if finite.any():
        assert s.stats.min_value == value[finite].min() and s.stats.max_value == value[finite].max()
        assert int(np.flatnonzero(value == value[finite].max())[0]) in chosen or value[finite].max() in s.value
    assert len(s.step) <= n_out + np.count_nonzero(~finite) + 4
    assert np.array_equal(s.value, value[s.step], equal_nan=True)


def test_reference_keeps_each_buckets_extremes():
    rng = np.random.default_rng(7)
    y = rng.standard_normal(10_000)
    idx = minmax_reference(np.arange(10_000), y, 100)
    bounds = np.linspace(0, 10_000, 51).astype(int)
    for a, b in zip(bounds[:-1], bounds[1:]):
        assert a + int(np.argmax(y[a:b])) in idx and a + int(np.argmin(y[a:b])) in idx


def test_leading_and_trailing_non_finite_runs():
    value = np.array([np.nan, np.inf, 5.0, 1.0, 7.0, np.nan, -np.inf], dtype=np.float64)
    step = np.arange(len(value), dtype=np.int64)
    s = downsample(step, step * 1.0, value, 100)
    assert (s.stats.min_step, s.stats.min_value, s.stats.max_step, s.stats.max_value) == (3, 1.0, 4, 7.0)
    assert (s.stats.nan, s.stats.posinf, s.stats.neginf) == (2, 1, 1)
    assert s.step.tolist() == list(range(7))
    only_bad = downsample(step[:2], step[:2] * 1.0, value[:2], 100)
    assert only_bad.stats.min_value is None and only_bad.step.tolist() == [0, 1]


def test_direct_kernel_is_tsdownsample():
    """The kernel called directly picks exactly what tsdownsample's public API picks."""
    from tsdownsample import MinMaxLTTBDownsampler

    from sitegen import downsample as ds

    assert ds._KERNEL is not None  # the installed tsdownsample has it: the fast path is used
    rng = np.random.default_rng(7)
    for n, n_out in ((5_000, 100), (100_003, 1_992), (2_001, 1_992)):
        x = np.cumsum(rng.integers(1, 5, n)).astype(np.int64)
        y = rng.standard_normal(n)
        y[rng.integers(0, n)] = 1e6
        want = MinMaxLTTBDownsampler().downsample(x, y, n_out=n_out, minmax_ratio=ds.MINMAX_RATIO)
        assert np.array_equal(ds._shape_indices(x, y, n_out), want)


def test_a_series_that_fits_is_drawn_whole():
    step = np.arange(2000, dtype=np.int64)
    value = np.sin(step / 50.0)
    s = downsample(step, step * 0.5, value, 2000)
    assert not s.thinned and np.array_equal(s.step, step) and np.array_equal(s.value, value)


def test_comparison_levels_keep_what_matters_at_every_resolution():
    from sitegen.pages.compare import LEVELS, level_bits

    rng = np.random.default_rng(3)
    step = np.arange(500, dtype=np.int64) * 7
    value = rng.standard_normal(500)
    value[123], value[321], value[400] = 40.0, np.nan, -np.inf
    bits = level_bits(step, step * 0.5, value)
    finite = np.isfinite(value)
    for k, n in enumerate(LEVELS):
        keep = np.flatnonzero(bits & (1 << k))
        assert len(keep) <= n + 8
        assert {0, 499, 123, 321, 400, int(np.argmin(np.where(finite, value, np.inf)))} <= set(keep.tolist()), n


@pytest.mark.parametrize("case", ["plain", "nan", "inf", "ties", "irregular-steps", "all-nan"])
def test_level_bits_choose_exactly_what_downsample_chooses(case):
    """The one-scan level bits equal thinning the line once per level."""
    from sitegen.pages.compare import LEVELS, level_bits

    rng = np.random.default_rng(5)
    step = np.arange(500, dtype=np.int64) * 3
    value = rng.standard_normal(500)
    if case == "nan":
        value[[0, 77, 78, 400]] = np.nan
    elif case == "inf":
        value[[10, 300]] = [np.inf, -np.inf]
    elif case == "ties":
        value = np.round(value)
    elif case == "irregular-steps":  # lines come thinned already: steps increase, unevenly
        step = np.cumsum(rng.integers(1, 50, 500))
    elif case == "all-nan":
        value[:] = np.nan
    bits = level_bits(step, step * 0.5, value)
    for k, n in enumerate(LEVELS):
        got = step[(bits & (1 << k)) != 0]
        want = downsample(step, step * 0.5, value, n).step if len(step) > n else step
        assert np.array_equal(np.unique(got), np.unique(want)), (case, n)


@pytest.mark.parametrize("case", ["nan-scattered", "nan-ends", "nan-block", "inf", "ties"])
def test_long_series_fast_scan_keeps_what_matters(case):
    """Long series take the quick scan (Rust min/max, no filled copy) unless they hold an
    infinity; either way NaN/inf, first, last, min and max survive with exact stats."""
    rng = np.random.default_rng(11)
    n = 300_000
    step = np.arange(n, dtype=np.int64) * 2
    value = rng.standard_normal(n)
    if case == "nan-scattered":
        value[rng.integers(0, n, 50)] = np.nan
    elif case == "nan-ends":
        value[0] = value[-1] = np.nan
    elif case == "nan-block":
        value[65_536:2 * 65_536 + 7] = np.nan
    elif case == "inf":
        value[10] = np.inf
        value[20] = -np.inf
        value[30] = np.nan
    else:
        value = np.round(value)  # many equal minima and maxima: the first one is reported
    s = downsample(step, step * 0.5, value, 2000)
    finite = np.isfinite(value)
    bad = np.flatnonzero(~finite)
    assert set((bad * 2).tolist()) <= set(s.step.tolist())
    assert s.step[0] == 0 and s.step[-1] == 2 * (n - 1)
    masked = np.where(finite, value, np.inf)
    lo = int(np.argmin(masked))
    hi = int(np.argmax(np.where(finite, value, -np.inf)))
    assert (s.stats.min_step, s.stats.min_value) == (2 * lo, value[lo])
    assert (s.stats.max_step, s.stats.max_value) == (2 * hi, value[hi])
    assert s.stats.nan == int(np.isnan(value).sum()) and s.stats.count == n
    assert len(s.step) - len(bad) <= 2000
