"""Lightning's CSVLogger folders, read without lightning.

A run is a ``version_N/`` folder (any folder holding ``metrics.csv`` beside ``hparams.yaml``).
``metrics.csv`` has one header, the sorted union of the keys logged (the logger rewrites the file
when keys appear), CRLF line ends and sparse rows: an empty cell is no value. ``step`` is the
step; every other column is a tag as named (``epoch``, and the ``_step``/``_epoch`` twins of
metrics logged both ways); ``epoch``, which the logger adds to every row, once per step. A header
line again further down (a second session appended) is the header of the rows after it.
``hparams.yaml`` -> hparams (nested keys joined with ``.``), read by
:mod:`sitegen.ingest.yamlish`: ``!!python/...`` tags are text.

No wall time is logged (NaN). The scalars are grouped by tag (tags in name order), each tag's
points in file order.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from sitegen.errors import Problem
from sitegen.ingest import yamlish
from sitegen.ingest.csvtyped import Wide, read_wide, to_series, typed
from sitegen.ingest.files import read_or_note
from sitegen.ingest.values import grouped_table
from sitegen.model import ReadOptions, RunData, RunSource, SourceFile, flat_hparams

FORMAT = "lightning"
METRICS = "metrics.csv"
HPARAMS = "hparams.yaml"
VERSION = re.compile(r"version_.+")


def _name(directory: Path, archive: Path) -> str:
    rel = directory.relative_to(archive).as_posix()
    return "." if rel in ("", ".") else rel


def claims(filename: str, patterns: Any = None) -> bool:
    return filename == HPARAMS


def gather(
    dirpath: str, filenames: list[str], dirnames: list[str], archive: Path, roots: tuple[str, ...]
) -> tuple[list[RunSource], set[str]] | None:
    if METRICS not in filenames or (HPARAMS not in filenames and not VERSION.fullmatch(os.path.basename(dirpath))):
        return None
    directory = Path(dirpath)
    files = tuple(directory / f for f in (METRICS, HPARAMS) if f in filenames)
    return [RunSource(_name(directory, archive), FORMAT, directory, files)], {METRICS, HPARAMS}


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    run = RunData(name=source.name, format=FORMAT)
    for path in source.files:
        if path.name == HPARAMS:
            value = yamlish.read_file(path, run, options.roots)
            run.hparams = flat_hparams(value) if isinstance(value, dict) else {}
    metrics = next((p for p in source.files if p.name == METRICS), None)
    if metrics is not None:
        _read_metrics(metrics, run, options.roots)
    return run


def _blocks(data: bytes) -> list[tuple[int, bytes]]:
    """(byte offset, text) of each part of the file that starts with a header: one, unless the
    file was written by more than one logger session (a header line again where rows were)."""
    first = data.split(b"\n", 1)[0].split(b",", 1)[0].strip(b"\r\xef\xbb\xbf ")
    if not first or not first[:1].isalpha():
        return [(0, data)]
    starts = [0]
    at = data.find(b"\n" + first + b",")
    while at >= 0:
        starts.append(at + 1)
        at = data.find(b"\n" + first + b",", at + 1)
    return [(a, data[a:b]) for a, b in zip(starts, starts[1:] + [len(data)])]


def _whole(data: bytes) -> Wide | None:
    """The file in one typed parse, when that parse shows it has one header: a header line again
    would be a row whose first cell is text. Not when that text could be a number (``nan``,
    ``inf``, ...): then :func:`_blocks` looks for it. Why: a file of one session (the usual
    case) is read without a pass over its bytes looking for a second header."""
    first = data[: data.find(b"\n")].split(b",", 1)[0].strip(b"\r\xef\xbb\xbf ").lower()
    return None if first.startswith((b"nan", b"inf")) else typed(data, ",", ("",))


def _read_metrics(path: Path, run: RunData, roots: tuple[str, ...]) -> None:
    data = read_or_note(path, roots, run.problems)
    if data is None:
        return
    series: dict[str, tuple[np.ndarray, None, np.ndarray]] = {}
    decoded = 0
    whole = _whole(data)
    for start, block in [(0, data)] if whole is not None else _blocks(data):
        before = len(run.problems)
        wide = whole if whole is not None else read_wide(path, block, run.problems, delimiter=",")
        if start:  # offsets in the file, not in the block
            run.problems[before:] = [p if p.offset is None else replace(p, offset=p.offset + start) for p in run.problems[before:]]
        decoded = start + wide.decoded
        if "step" not in wide.header:
            run.problems.append(Problem(str(path), start, "bad-record", "no 'step' column in this header; its rows not read"))
            continue
        if "epoch" in wide.header:
            _once_per_step(wide, wide.header.index("epoch"), wide.header.index("step"))
        for tag, got in to_series(wide, wide.header.index("step"), slice(None), set()).items():
            old = series.get(tag)
            series[tag] = got if old is None else (np.concatenate([old[0], got[0]]), None, np.concatenate([old[2], got[2]]))
    run.files.append(SourceFile(path, len(data), decoded))
    run.scalars = grouped_table(series)


def _once_per_step(wide: Wide, col: int, step_col: int) -> None:
    """The logger adds ``epoch`` to every row it writes: a row that repeats the previous row's
    step and epoch (a validation row after a training row) adds no ``epoch`` point."""
    present = wide.present[col].copy()
    idx = None if present.all() else np.flatnonzero(present)  # None: every row (the logger's file), nothing to gather
    steps, epochs = (wide.values[step_col], wide.values[col]) if idx is None else (wide.values[step_col][idx], wide.values[col][idx])
    repeat = (steps[1:] == steps[:-1]) & (epochs[1:] == epochs[:-1])
    if idx is None:
        present[1:][repeat] = False
    else:
        present[idx[1:][repeat]] = False
    wide.present[col] = present
