"""``sitegen export`` writes every scalar, unsampled, to Parquet or CSV."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

import sitegen
from tests.support import EXAMPLE


def _export(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sitegen", "export", str(EXAMPLE), "--out", str(out)], capture_output=True, text=True)


def test_parquet_and_csv_hold_every_record(tmp_path: Path):
    expected = sitegen.read_scalars(EXAMPLE)
    assert expected.num_rows > 1000
    r = _export(tmp_path / "all.parquet")
    assert r.returncode == 0, r.stderr
    got = pq.read_table(tmp_path / "all.parquet")
    assert got.column_names == ["run", "tag", "step", "wall_time", "value"]
    assert got.column("run").to_pylist() == expected.column("run").to_pylist()
    assert np.array_equal(got.column("value").to_numpy(), expected.column("value").to_numpy(), equal_nan=True)
    assert _export(tmp_path / "all.csv").returncode == 0
    csv = pacsv.read_csv(tmp_path / "all.csv")
    assert csv.num_rows == expected.num_rows
    assert csv.column("step").to_pylist() == expected.column("step").to_pylist()


def test_bad_output_suffix_is_one_line_and_exit_2(tmp_path: Path):
    r = _export(tmp_path / "all.xlsx")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "all.xlsx" in r.stderr and "Traceback" not in r.stderr
