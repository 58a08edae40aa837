"""The public Python API: read an archive without building a site."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from sitegen.fileio import real_roots
from sitegen.ingest import READERS
from sitegen.ingest.scan import scan
from sitegen.model import SCALARS_SCHEMA, ReadOptions, RunData, empty_table


def _within(path: Path, options: ReadOptions) -> ReadOptions:
    """``options`` reading nothing outside ``path`` unless they name their own roots."""
    return options if options.roots else replace(options, roots=real_roots(path))


def read_run(path: str | Path, *, options: ReadOptions = ReadOptions()) -> RunData:
    """Everything one run directory holds (its own files only, not its sub-runs)."""
    path = Path(path)
    options = _within(path, options)
    sources = [s for s in scan(path) if s.name == "."]
    if not sources:
        raise FileNotFoundError(f"{path}: holds no log files of a known format")
    return READERS[sources[0].format].read(sources[0], options)


def read_runs(path: str | Path, *, options: ReadOptions = ReadOptions()) -> list[RunData]:
    """Every run below ``path`` (sub-runs included, each under its own name), in name order."""
    options = _within(Path(path), options)
    return [READERS[s.format].read(s, options) for s in scan(Path(path), roots=options.roots)]


def _repeat_string(text: str, n: int) -> pa.Array:
    """``n`` copies of ``text`` as a string array, built from its buffers: much faster
    than ``pa.repeat`` for the million-row columns of large logs."""
    raw = text.encode()
    if n == 0 or len(raw) * n >= 2**31:
        return pa.repeat(pa.scalar(text, pa.string()), n)
    offsets = np.arange(0, (n + 1) * len(raw), len(raw), dtype=np.int32) if raw else np.zeros(n + 1, np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw * n))


def read_scalars(path: str | Path, *, options: ReadOptions = ReadOptions()) -> pa.Table:
    """All scalars below ``path`` as one table: run, tag, step, wall_time, value.

    Every record as written: runs in name order, files of a run in name order, records in file
    order; no dedup, no purge (the site's charts supersede what a resumed run wrote again;
    its downloads, like this table, keep it), NaN and +-inf kept.
    """
    tables = []
    for run in read_runs(path, options=options):
        t = run.scalars
        tables.append(t.add_column(0, "run", _repeat_string(run.name, t.num_rows)))
    if not tables:
        return empty_table(SCALARS_SCHEMA)
    return pa.concat_tables(tables).cast(SCALARS_SCHEMA)
