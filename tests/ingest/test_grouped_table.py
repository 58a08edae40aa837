"""The chunked scalars table of the tracker readers (values.grouped_table)."""

from __future__ import annotations

import numpy as np

from sitegen.ingest.values import OWN_CHUNK, grouped_table
from sitegen.model import RUN_SCALARS_SCHEMA, tag_groups


def test_large_and_small_tags_in_name_order_with_every_point() -> None:
    big = OWN_CHUNK + 5
    series = {
        "b/large": (np.arange(big, dtype=np.int64), None, np.linspace(0, 1, big)),
        "a/small": (np.array([3, 1], np.int64), np.array([1.5, 2.5]), np.array([0.25, np.nan])),
        "c/small": (np.array([7], np.int64), None, np.array([-np.inf])),
        "d/empty": (np.zeros(0, np.int64), None, np.zeros(0)),
    }
    table = grouped_table(series)
    assert table.schema.equals(RUN_SCALARS_SCHEMA)
    assert table.column("tag").to_pylist() == ["a/small"] * 2 + ["b/large"] * big + ["c/small"]
    assert table.column("step").to_pylist() == [3, 1, *range(big), 7]
    walls = table.column("wall_time").to_numpy()
    assert walls[:2].tolist() == [1.5, 2.5] and np.isnan(walls[2:]).all()
    values = table.column("value").to_numpy()
    expect = np.concatenate([[0.25, np.nan], np.linspace(0, 1, big), [-np.inf]])
    assert np.array_equal(values, expect, equal_nan=True)
    assert table.column("value").num_chunks >= 2  # the large tag is a chunk of its own
    groups = tag_groups(table)
    assert groups.tags == ["a/small", "b/large", "c/small"] and groups.in_place


def test_no_points_is_the_empty_table() -> None:
    table = grouped_table({"x": (np.zeros(0, np.int64), None, np.zeros(0))})
    assert table.num_rows == 0 and table.schema.equals(RUN_SCALARS_SCHEMA)
