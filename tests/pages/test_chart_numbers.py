"""Page data columns (:func:`sitegen.pages.charts.numbers`): float32 is chosen exactly when every
value survives it (NaN payloads aside), and the columns decode back to the values."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sitegen.pages.charts import _same_floats, decode_numbers, numbers

SPECIAL = [0.0, -0.0, 1.5, 0.1, 1e-45, 3.4028234663852886e38, 1e300, math.inf, -math.inf, math.nan,
           np.frombuffer(np.uint64(0x7FF8000000000123).tobytes(), np.float64)[0],  # a NaN with a payload
           np.frombuffer(np.uint64(0xFFF0000000000001).tobytes(), np.float64)[0]]  # a signalling, negative NaN
floats = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True, width=32).map(float),
                   st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(floats, floats), min_size=1, max_size=40))
def test_same_floats_is_array_equal_with_equal_nan(pairs):
    a = np.array([x for x, _ in pairs], dtype=np.float64)
    b = np.array([y for _, y in pairs], dtype=np.float64)
    assert _same_floats(a, b) == np.array_equal(a, b, equal_nan=True)
    assert _same_floats(a, a.copy())


@settings(max_examples=300, deadline=None)
@given(st.lists(floats, min_size=1, max_size=300))
def test_numbers_choose_float32_exactly_when_it_keeps_every_value(values):
    v = np.array(values, dtype=np.float64)
    col = numbers(v)
    with np.errstate(over="ignore", invalid="ignore"):
        keeps = np.array_equal(v.astype(np.float32).astype(np.float64), v, equal_nan=True)
    assert ("f4" in col) == keeps
    back = decode_numbers(col)
    assert back == [x if math.isfinite(x) else None for x in v.tolist()]
