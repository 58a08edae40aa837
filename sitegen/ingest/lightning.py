"""Lightning's CSVLogger folders, read without lightning.

A run is a ``version_N/`` folder (any folder holding ``metrics.csv``
beside ``hparams.yaml``). ``metrics.csv`` has one header, the sorted union of the keys logged
(the logger rewrites the file when keys appear), CRLF line ends and sparse rows: an empty cell is
no value. ``step`` is the step; every other column is a tag as named (``epoch``, and the
``_step``/``_epoch`` twins of metrics logged both ways); ``epoch``, which the logger adds to
every row, once per step. ``hparams.yaml`` -> hparams (nested keys
joined with ``.``), read by :mod:`sitegen.ingest.yamlish`: ``!!python/...`` tags are text.

No wall time is logged (NaN). The scalars are grouped by tag (tags in name order), each tag's
points in file order.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from sitegen.errors import Problem
from sitegen.ingest import yamlish
from sitegen.ingest.csvtyped import Wide, read_file, to_long
from sitegen.ingest.values import flat_hparams
from sitegen.model import ReadOptions, RunData, RunSource

FORMAT = "lightning"
METRICS = "metrics.csv"
HPARAMS = "hparams.yaml"
VERSION = re.compile(r"version_.+")


def _name(directory: Path, archive: Path) -> str:
    rel = directory.relative_to(archive).as_posix()
    return "." if rel in ("", ".") else rel


def claims(filename: str, patterns: Any = None) -> bool:
    return filename == HPARAMS


def gather(dirpath: str, filenames: list[str], dirnames: list[str], archive: Path) -> tuple[list[RunSource], set[str]] | None:
    if METRICS not in filenames or (HPARAMS not in filenames and not VERSION.fullmatch(os.path.basename(dirpath))):
        return None
    directory = Path(dirpath)
    files = tuple(directory / f for f in (METRICS, HPARAMS) if f in filenames)
    return [RunSource(_name(directory, archive), FORMAT, directory, files)], {METRICS, HPARAMS}


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    run = RunData(name=source.name, format=FORMAT)
    for path in source.files:
        if path.name == HPARAMS:
            value = yamlish.read_file(path, run)
            run.hparams = flat_hparams(value) if isinstance(value, dict) else {}
    metrics = next((p for p in source.files if p.name == METRICS), None)
    got = read_file(metrics, run, options, ("",)) if metrics is not None else None
    if got is not None:
        wide = got[1]
        if "step" in wide.header:
            if "epoch" in wide.header:
                _once_per_step(wide, wide.header.index("epoch"), wide.header.index("step"))
            run.scalars = to_long(wide, wide.header.index("step"), slice(None), set())
        else:
            run.problems.append(Problem(str(metrics), 0, "bad-record", "no 'step' column; nothing read"))
    return run


def _once_per_step(wide: Wide, col: int, step_col: int) -> None:
    """The logger adds ``epoch`` to every row it writes: a row that repeats the previous row's
    step and epoch (a validation row after a training row) adds no ``epoch`` point."""
    idx = np.flatnonzero(wide.present[col])
    steps, epochs = wide.values[step_col][idx], wide.values[col][idx]
    repeat = (steps[1:] == steps[:-1]) & (epochs[1:] == epochs[:-1])
    present = wide.present[col].copy()
    present[idx[1:][repeat]] = False
    wide.present[col] = present
