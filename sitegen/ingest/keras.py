"""Keras' CSVLogger files, read without keras.

A run is (part of) a ``*.csv`` or ``*.log`` file whose header starts with ``epoch`` (and has
no ``step``) and whose epochs are mostly whole numbers >= 0: ``epoch`` is the step, ``NA`` a missing
value. ``append=True`` puts several ``fit`` calls in one file under one header: where the epoch
does not go up, a new run starts. The runs of ``<dir>/<file>`` are named ``<dir>/<file>``, ``<dir>/<file>#2``, ... in
file order, so appending a run never renames the earlier ones.

No wall time is logged (NaN). The scalars are grouped by tag (tags in name order), each tag's
points in file order.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from sitegen.errors import Problem
from sitegen.ingest.csvtyped import Wide, header_of, read_file, read_wide, to_long
from sitegen.ingest.files import read_head, read_regular
from sitegen.model import ReadOptions, RunData, RunSource

FORMAT = "keras"
SUFFIXES = (".csv", ".log")


def _name(directory: Path, archive: Path) -> str:
    rel = directory.relative_to(archive).as_posix()
    return "." if rel in ("", ".") else rel


def _keras_header(header: list[str]) -> bool:
    return bool(header) and header[0] == "epoch" and "step" not in header


def _segments(wide: Wide) -> list[tuple[int, int]]:
    """(first row, end row) of each run in the file: a new one where the epoch does not go up."""
    n = wide.nrows
    idx = np.flatnonzero(wide.present[0][:n] & np.isfinite(wide.values[0][:n]))
    epochs = wide.values[0][idx]
    starts = [0, *idx[1:][epochs[1:] <= epochs[:-1]].tolist()]
    return list(zip(starts, starts[1:] + [n])) if n else []


def claims(filename: str, patterns: Any = None) -> bool:
    return False


def gather(
    dirpath: str, filenames: list[str], dirnames: list[str], archive: Path, roots: tuple[str, ...]
) -> tuple[list[RunSource], set[str]] | None:
    candidates = sorted(f for f in filenames if not f.startswith(".") and f.lower().endswith(SUFFIXES))
    if not candidates:
        return None  # (most folders: no Path made, nothing read)
    runs: list[RunSource] = []
    taken: set[str] = set()
    directory = Path(dirpath)
    for f in candidates:
        path = directory / f
        try:
            if not _keras_header(header_of(read_head(path, 4096, roots))):
                continue
            data = read_regular(path, roots)
        except OSError:
            continue
        wide = read_wide(path, data, [], missing=("NA", ""), delimiter=",")
        epochs = wide.values[0][wide.present[0]] if wide.header and wide.header[0] == "epoch" else None
        whole = np.isfinite(epochs) & (epochs >= 0) & (np.floor(epochs) == epochs) if epochs is not None else None
        if whole is None or whole.sum() <= (~whole).sum():
            continue  # fractional or negative epochs: not Keras' count of epochs (the generic reader's)
        n = max(1, len(_segments(wide)))
        base = f if dirpath == str(archive) or directory == archive else f"{_name(directory, archive)}/{f}"
        runs += [RunSource(base if k == 1 else f"{base}#{k}", FORMAT, directory, (path,)) for k in range(1, n + 1)]
        taken.add(f)
    return (runs, taken) if runs else None


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    run = RunData(name=source.name, format=FORMAT)
    path = source.files[0]
    m = re.search(r"#(\d+)$", source.name)
    k = int(m.group(1)) if m and not source.name.endswith("/" + path.name) else 1
    got = read_file(path, run, options, ("NA", ""))
    if got is None:
        return run
    wide = got[1]
    if not _keras_header(wide.header):
        run.problems.append(Problem(str(path), 0, "bad-record", "header does not start with 'epoch'; nothing read"))
        return run
    segments = _segments(wide)
    if k > len(segments):
        run.problems.append(Problem(str(path), None, "bad-record", f"the file holds {len(segments)} run(s), not {k}; nothing read"))
        return run
    a, b = segments[k - 1]
    run.meta["runs_in_file"] = str(len(segments))
    run.scalars = to_long(wide, 0, slice(a, b), set())
    return run
