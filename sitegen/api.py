"""The public Python API: read an archive without building a site."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from .model import SCALARS_SCHEMA, ReadOptions, RunData
from .read import READERS
from .scan import scan


def read_run(path: str | Path, *, options: ReadOptions = ReadOptions()) -> RunData:
    """Everything one run directory holds (its own files only, not its sub-runs)."""
    path = Path(path)
    sources = [s for s in scan(path) if s.name == "."]
    if not sources:
        raise FileNotFoundError(f"{path}: holds no log files of a known format")
    return READERS[sources[0].format].read(sources[0], options)


def read_runs(path: str | Path, *, options: ReadOptions = ReadOptions()) -> list[RunData]:
    """Every run below ``path`` (sub-runs included, each under its own name), in name order."""
    return [READERS[s.format].read(s, options) for s in scan(Path(path))]


def read_scalars(path: str | Path, *, options: ReadOptions = ReadOptions()) -> pa.Table:
    """All scalars below ``path`` as one table: run, tag, step, wall_time, value.

    Every record as written: runs in name order, files of a run in name order, records in file
    order; no dedup, no purge, NaN and +-inf kept.
    """
    tables = []
    for run in read_runs(path, options=options):
        t = run.scalars
        tables.append(t.add_column(0, "run", pa.repeat(pa.scalar(run.name, pa.string()), t.num_rows)))
    if not tables:
        return SCALARS_SCHEMA.empty_table()
    return pa.concat_tables(tables).cast(SCALARS_SCHEMA)
