"""Wide CSV/TSV metric files of known loggers as numbers: pyarrow's typed parser first, the
generic reader's checked path (:mod:`sitegen.ingest.tabular`) for anything it refuses.

Why a second path beside tabular's: these files have a known layout (every column but the text
ones is numeric), so Arrow parses the numbers directly instead of strings then casts.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from sitegen.errors import Problem
from sitegen.ingest import tabular
from sitegen.ingest.files import read_or_note
from sitegen.ingest.values import gather, grouped_table
from sitegen.model import ReadOptions, RunData, SourceFile


@dataclass
class Wide:
    """A file's columns as float64 (NaN where a cell is missing) and which cells are present."""

    header: list[str]
    values: list[np.ndarray]
    present: list[np.ndarray]
    nrows: int
    decoded: int  # bytes read up to the last whole row
    row_offset: Callable[[int], Any]  # byte offset of data row i (None on the typed path: no problems there)


def read_wide(path: Path, data: bytes, problems: list[Problem], *, missing: Sequence[str] = ("",), delimiter: str | None = None) -> Wide:
    """Every column of a CSV file as numbers; ``missing``: cell texts that mean "no value"."""
    fast = typed(data, delimiter or ("\t" if path.suffix.lower() == ".tsv" else ","), missing)
    if fast is not None:
        return fast
    return _checked(path, data, problems, missing, delimiter)


def typed(data: bytes, delim: str, missing: Sequence[str]) -> Wide | None:
    """Every column as numbers by pyarrow's typed parser; None when it refuses the file (a
    cell that is not a number, a row of another width, no header, ...)."""
    import pyarrow.csv as pacsv  # lazy: keeps a rebuild that changes nothing quick

    if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")) or not data.endswith((b"\n", b"\r")):
        return None
    nl = data.find(b"\n")
    if nl < 0 or b'"' in data[:nl]:
        return None
    try:
        header = [h.strip() for h in data[:nl].decode("utf-8").rstrip("\r").split(delim)]
    except UnicodeDecodeError:
        return None
    if len(set(header)) != len(header) or not all(header):
        return None
    names = [f"c{i}" for i in range(len(header))]
    try:
        table = pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(data).slice(nl + 1)),  # the rows, not copied
            read_options=pacsv.ReadOptions(column_names=names),
            parse_options=pacsv.ParseOptions(delimiter=delim, ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(column_types={n: pa.float64() for n in names}, null_values=list(missing)),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError):
        return None
    values, present = zip(*(numbers(table.column(i)) for i in range(len(header))))
    return Wide(header, list(values), list(present), table.num_rows, len(data), lambda i: None)


def numbers(col: "pa.ChunkedArray") -> tuple[np.ndarray, np.ndarray]:
    """A numeric column of pyarrow's as (values, present). Why not ``to_numpy``: a column with
    missing cells would be copied to put NaN in them, and then copied again as float64; here the
    values are the column's own memory (one copy when it came in several chunks), int64 kept as
    it is, and a missing cell's slot is left as it is: ``present`` says to skip it."""
    arr = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    n, kind = len(arr), {pa.float64(): np.float64, pa.int64(): np.int64}.get(arr.type)
    if kind is None:
        return arr.to_numpy(zero_copy_only=False).astype(np.float64), np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
    validity, data = arr.buffers()[:2]
    values = np.frombuffer(data, kind, n, arr.offset * 8) if n else np.empty(0, kind)
    if not arr.null_count:
        return values, np.ones(n, bool)
    bits = np.unpackbits(np.frombuffer(validity, np.uint8), count=arr.offset + n, bitorder="little")
    return values, bits[arr.offset :].view(bool)


def _checked(path: Path, data: bytes, problems: list[Problem], missing: Sequence[str], delimiter: str | None) -> Wide:
    """The generic reader's grid (its checks and problems), cells parsed one column at a time."""
    spath = str(path)
    before = len(problems)
    dec = tabular._decode(data, spath, problems)
    delim = delimiter or tabular._delimiter(path, dec.text)
    grid = None if len(problems) > before else tabular._grid_arrow(spath, data, dec, delim)
    if grid is None:
        grid = tabular._grid_python(spath, data, dec, delim, problems)
    values, present = [], []
    gone = set(missing) - {""}
    for j, name in enumerate(grid.header):
        cells = grid.columns[j]
        if gone:
            cells = ["" if c.strip() in gone else c for c in (cells.to_pylist() if isinstance(cells, pa.Array) else cells)]
        v, numeric, empty = tabular._parse_cells(cells)
        bad = np.flatnonzero(~numeric & ~empty)
        if len(bad) and name:
            first = int(bad[0])
            shown = tabular._cell(cells, first)[:40]
            problems.append(
                Problem(
                    spath, grid.row_offset(first), "bad-value", f"column {name!r}: {len(bad)} non-numeric cell(s) skipped (first {shown!r})"
                )
            )
        values.append(v)
        present.append(numeric)
    return Wide(grid.header, values, present, grid.nrows, grid.decoded, grid.row_offset)


def header_of(data: bytes) -> list[str]:
    """The cells of a file's first line (BOM and CR stripped)."""
    head = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    line = head.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", errors="replace")
    try:
        return [c.strip() for c in next(csv.reader([line]), [])]
    except csv.Error:  # a stray CR inside the line
        return []


def to_long(wide: Wide, step_col: int, rows: "slice | np.ndarray", skip: set[int]) -> Any:
    """Wide columns to the scalars table, grouped by tag (:func:`grouped_table`); rows without
    a whole-number step are left out."""
    return grouped_table(to_series(wide, step_col, rows, skip))


def to_series(wide: Wide, step_col: int, rows: "slice | np.ndarray", skip: set[int]) -> dict[str, tuple[np.ndarray, None, np.ndarray]]:
    """``{tag: (steps, None, values)}`` of the wide columns (no wall times; see :func:`to_long`).
    A dense column's steps and values are views; sparse columns with the same rows share one
    array of steps (HF: the train metrics, the eval metrics)."""
    steps, ok = steps_of(wide.values[step_col][rows], wide.present[step_col][rows])
    shared: dict[bytes, np.ndarray] = {}  # the steps of the rows of a mask, by its bits
    series: dict[str, tuple[np.ndarray, None, np.ndarray]] = {}
    for j, name in enumerate(wide.header):
        if j == step_col or j in skip or not name:
            continue
        keep = wide.present[j][rows] if ok is None else wide.present[j][rows] & ok
        n = int(np.count_nonzero(keep))
        if n == len(keep):  # a dense column (Keras, HF train rows): views, not copies
            series[name] = (steps, None, wide.values[j][rows])
        elif n:
            key = np.packbits(keep).tobytes()
            if key not in shared:
                shared[key] = gather(steps, keep, n)
            series[name] = (shared[key], None, gather(wide.values[j][rows], keep, n))
    return series


def steps_of(values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, "np.ndarray | None"]:
    """(the steps as int64, the rows that have one; None: every row). A step is a whole number
    below 2**63 in magnitude, read as float64 (so that int64 steps beyond 2**53 round as float
    ones do); int64 steps within 2**53 are whole already and are used as they are."""
    if values.dtype == np.int64 and len(values) and -(2**53) <= values.min() and values.max() <= 2**53:
        return values, None if present.all() else present
    steps_f = values.astype(np.float64, copy=False)
    with np.errstate(invalid="ignore"):
        ok = present & np.isfinite(steps_f) & (np.floor(steps_f) == steps_f) & (np.abs(steps_f) < 2.0**63)
    if ok.all():
        return steps_f.astype(np.int64), None
    return np.where(ok, steps_f, 0).astype(np.int64), ok


def read_file(path: Path, run: RunData, options: ReadOptions, missing: tuple[str, ...]) -> tuple[bytes, Wide] | None:
    data = read_or_note(path, options.roots, run.problems)
    if data is None:
        return None
    wide = read_wide(path, data, run.problems, missing=missing, delimiter=",")
    run.files.append(SourceFile(path, len(data), wide.decoded))
    return data, wide
