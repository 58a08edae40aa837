"""CSV and JSON-lines metric files (``metrics.csv`` of Lightning's CSVLogger, hand-rolled logs).

Which files: :func:`claims` matches a file's basename against glob patterns, case-insensitively
(:data:`DEFAULT_PATTERNS` unless given). ``*.jsonl``/``*.ndjson``/``*.json`` files are read as
JSON lines, every other file as CSV (``*.tsv`` tab-separated; otherwise comma, or ``;``/tab when
the header line holds no comma).

Layout of a table (CSV header, or the keys of the JSON objects), names compared
case-insensitively:

* **step**: the first of ``step``, ``global_step``, ``iter``, ``iteration``, ``epoch`` that is
  present and holds only whole numbers; a row without a step (no such column, or an empty cell)
  gets its 0-based row number in the file (data rows for CSV, parsed objects for JSON lines).
* **wall time**: the first of ``wall_time``, ``timestamp``, ``time`` present, in seconds (values
  over 1e11 are milliseconds and are divided by 1000; ISO-8601 strings are accepted, naive ones
  taken as UTC); NaN when absent or unreadable.
* **long format** when a ``value`` column and a ``tag``/``metric``/``name`` column exist (first
  of those names wins): one scalar per row, tagged with that cell; other columns are ignored.
* **wide format** otherwise: every other column is a metric whose tag is the column name (the
  same name in several files of a run, or twice in one header, is one tag). A CSV column is a
  metric when most of its non-empty cells are numbers; its non-numeric cells are skipped and
  reported. Columns with an empty name (a pandas index) are ignored. For JSON lines, a key's
  value is a metric when it is a number (not a bool) or one of the strings ``nan``/``inf``/
  ``-inf``/``infinity`` (any case); other strings, lists and nulls are ignored; nested objects
  are flattened with ``/`` (``{"train": {"loss": 1}}`` → ``train/loss``).

Numbers: ``nan``/``NaN`` → NaN; ``inf``, ``-inf``, ``Infinity``, ``-Infinity`` (any case) → ±inf;
surrounding whitespace is ignored; empty cells give no scalar.

Order of the scalars table: files in name order; within a file, row (line) order; within a wide
row, columns in header order (JSON: key order of the object). Nothing is sorted or deduplicated.

Damage is never raised: a bad JSON line is a ``bad-record`` problem with its byte offset and the
other lines are still read; a last line without its newline that does not parse (JSON) or has
fewer cells than the header (CSV) is ``truncated``; text that is not UTF-8 is decoded with
replacement characters and reported.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from sitegen.errors import Problem
from sitegen.ingest.checks import scalar_problems
from sitegen.ingest.files import read_or_note
from sitegen.model import RUN_SCALARS_SCHEMA, ReadOptions, RunData, RunSource, SourceFile, empty_table

FORMAT = "tabular"

#: basename globs claimed when no patterns are given (read at call time, so config may set it)
DEFAULT_PATTERNS: tuple[str, ...] = ("*.csv", "*.jsonl")
STEP_COLUMNS = ("step", "global_step", "iter", "iteration", "epoch")
TIME_COLUMNS = ("wall_time", "timestamp", "time")
TAG_COLUMNS = ("tag", "metric", "name")
VALUE_COLUMN = "value"
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")
MS_THRESHOLD = 1e11  # wall times above this are milliseconds
_NONFINITE = {
    "nan": math.nan,
    "+nan": math.nan,
    "-nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "-inf": -math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-infinity": -math.inf,
}
_INT64_LIMIT = 2.0**63


def claims(filename: str, patterns: Sequence[str] | None = None) -> bool:
    """Is ``filename`` (a basename) a metrics table? ``patterns`` default to DEFAULT_PATTERNS."""
    pats = DEFAULT_PATTERNS if patterns is None else patterns
    name = filename.rpartition("/")[2].lower()  # (a string op: the scan asks of every file)
    return any(fnmatch.fnmatchcase(name, p.lower()) for p in pats)


# --------------------------------------------------------------------------------------------
# numbers
# --------------------------------------------------------------------------------------------


def _py_float(cell: str) -> float | None:
    s = cell.strip()
    if not s or "_" in s or not s.isascii():
        return None
    try:
        return float(s)
    except ValueError:
        return None


def _parse_cells(cells: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(values, numeric, empty)`` for a column of text cells (vectorized when all parse)."""
    import pyarrow.compute as pc  # lazy: keeps a rebuild that changes nothing quick

    arr = cells if isinstance(cells, pa.Array) else pa.array(cells, pa.string())
    trimmed = pc.utf8_trim_whitespace(arr)
    empty_arr = pc.equal(trimmed, "")
    empty = np.asarray(empty_arr.to_numpy(zero_copy_only=False), dtype=bool)
    try:
        values = pc.cast(pc.if_else(empty_arr, pa.scalar("nan"), trimmed), pa.float64())
        return values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False), ~empty, empty
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    if isinstance(cells, pa.Array):
        cells = cells.to_pylist()
    values = np.full(len(cells), np.nan)
    numeric = np.zeros(len(cells), dtype=bool)
    for i, cell in enumerate(cells):
        if empty[i]:
            continue
        v = _py_float(cell)
        if v is not None:
            values[i] = v
            numeric[i] = True
    return values, numeric, empty


def _integral(values: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.isfinite(values) & (np.floor(values) == values) & (np.abs(values) < _INT64_LIMIT)


def _exact_ints(cells: Any, values: np.ndarray) -> np.ndarray:
    """Whole-number cells as int64, exact beyond 2**53 when they are written as integers."""
    import pyarrow.compute as pc  # lazy: keeps a rebuild that changes nothing quick

    approx = np.nan_to_num(values).astype(np.int64)
    arr = cells if isinstance(cells, pa.Array) else pa.array(cells, pa.string())
    try:
        exact = pc.cast(pc.utf8_trim_whitespace(arr), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return approx  # some cells are empty or written as floats
    return exact.to_numpy(zero_copy_only=False).astype(np.int64)


def _iso_seconds(text: str) -> float:
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        return math.nan
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _wall_seconds(values: np.ndarray) -> np.ndarray:
    return np.where(values > MS_THRESHOLD, values / 1000.0, values)


# --------------------------------------------------------------------------------------------
# output collection
# --------------------------------------------------------------------------------------------


@dataclass
class _Out:
    """Scalars collected in order; a part's tags are str objects or (codes, names)."""

    tags: list[Any] = field(default_factory=list)
    steps: list[np.ndarray] = field(default_factory=list)
    walls: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)

    def add(self, tags: Any, steps: np.ndarray, walls: np.ndarray, values: np.ndarray) -> None:
        if len(values):
            self.tags.append(tags)
            self.steps.append(steps.astype(np.int64, copy=False))
            self.walls.append(walls.astype(np.float64, copy=False))
            self.values.append(values.astype(np.float64, copy=False))

    @staticmethod
    def _tag_array(tags: Any) -> pa.Array:
        if isinstance(tags, tuple):
            codes, names = tags
            dictionary = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(names, pa.string()))
            return dictionary.cast(pa.string())
        return pa.array(tags, pa.string())

    def table(self) -> pa.Table:
        if not self.values:
            return empty_table(RUN_SCALARS_SCHEMA)
        return pa.table(
            {
                "tag": pa.concat_arrays([self._tag_array(t) for t in self.tags]),
                "step": pa.array(np.concatenate(self.steps), pa.int64()),
                "wall_time": pa.array(np.concatenate(self.walls), pa.float64()),
                "value": pa.array(np.concatenate(self.values), pa.float64()),
            },
            schema=RUN_SCALARS_SCHEMA,
        )


def _first(lower: Sequence[str], names: Sequence[str]) -> list[int]:
    """Column indexes of ``names`` in priority order (first column of each name present)."""
    out = []
    for n in names:
        if n in lower:
            out.append(lower.index(n))
    return out


# --------------------------------------------------------------------------------------------
# text decoding
# --------------------------------------------------------------------------------------------


@dataclass
class _Text:
    text: str
    encoding: str
    bom: int  # bytes of byte-order mark before the text

    def byte_offset(self, char_offset: int) -> int:
        return self.bom + len(self.text[:char_offset].encode(self.encoding, errors="replace"))


def _decode(data: bytes, path: str, problems: list[Problem]) -> _Text:
    if data.startswith(b"\xef\xbb\xbf"):
        enc, bom = "utf-8", 3
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        enc, bom = ("utf-16-le" if data[:2] == b"\xff\xfe" else "utf-16-be"), 2
    else:
        enc, bom = "utf-8", 0
    body = data[bom:]
    try:
        text = body.decode(enc)
    except UnicodeDecodeError as exc:
        problems.append(Problem(path, bom + exc.start, "bad-encoding", f"not {enc.upper()}; undecodable bytes replaced"))
        text = body.decode(enc, errors="replace")
    return _Text(text, enc, bom)


# --------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------


def _delimiter(path: Path, text: str) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    cut = text.find("\n")
    head = text if cut < 0 else text[:cut]
    if "," in head:
        return ","
    counts = {d: head.count(d) for d in (";", "\t")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


@dataclass
class _Grid:
    """A CSV file as text columns (Arrow string arrays or sequences of str)."""

    header: list[str]
    columns: list[Any]
    nrows: int
    row_offset: Callable[[int], int]  # byte offset of data row i
    decoded: int


def _cell(column: Any, i: int) -> str:
    v = column[i]
    return v.as_py() if isinstance(v, pa.Scalar) else v


def _stripped(column: Any) -> np.ndarray:
    import pyarrow.compute as pc  # lazy: keeps a rebuild that changes nothing quick

    if not isinstance(column, pa.Array):
        column = pa.array(column, pa.string())
    return np.asarray(pc.utf8_trim_whitespace(column).to_numpy(zero_copy_only=False), dtype=object)


def _grid_python(spath: str, data: bytes, dec: _Text, delim: str, problems: list[Problem] | None) -> _Grid:
    """The reference path: Python's csv module, row by row (handles every oddity)."""
    text = dec.text
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delim)
    rows: list[list[str]] = []
    row_lines: list[int] = []  # 0-based physical line where each row starts
    errors = 0
    prev = 0
    sink: list[Problem] = problems if problems is not None else []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            errors += 1
            if errors <= 5:
                sink.append(Problem(spath, None, "bad-record", f"line {prev + 1}: {exc}; row skipped"))
            prev = reader.line_num
            if errors > 1000:
                sink.append(Problem(spath, None, "bad-record", "too many bad rows; rest of file not read"))
                break
            continue
        if row:  # empty lines are no rows (as in pyarrow's ignore_empty_lines)
            rows.append(row)
            row_lines.append(prev)
        prev = reader.line_num

    line_starts: list[int] | None = None

    def offset_of(r: int) -> int:  # r indexes rows (0 = header)
        nonlocal line_starts
        if line_starts is None:
            line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
        line = row_lines[r]
        return dec.byte_offset(line_starts[line] if line < len(line_starts) else len(text))

    decoded = len(data)
    if not rows:
        return _Grid([], [], 0, lambda i: offset_of(i + 1), decoded)
    header = [h.strip() for h in rows[0]]
    body = rows[1:]
    ncol = len(header)
    # a last row cut short by an unfinished write
    if body and not text.endswith(("\n", "\r")) and len(body[-1]) < ncol:
        off = offset_of(len(rows) - 1)
        sink.append(Problem(spath, off, "truncated", f"last row has {len(body[-1])} of {ncol} cells and no newline; not read"))
        body = body[:-1]
        decoded = off
    long_rows = [i for i, r in enumerate(body) if len(r) > ncol]
    if long_rows:
        sink.append(
            Problem(
                spath,
                offset_of(1 + long_rows[0]),
                "bad-record",
                f"{len(long_rows)} row(s) have more cells than the header's {ncol}; extra cells ignored",
            )
        )
    if any(len(r) != ncol for r in body):
        body = [r[:ncol] if len(r) >= ncol else r + [""] * (ncol - len(r)) for r in body]
    columns = [list(c) for c in zip(*body)] if body else [[] for _ in range(ncol)]
    return _Grid(header, columns, len(body), lambda i: offset_of(i + 1), decoded)


def _grid_arrow(spath: str, data: bytes, dec: _Text, delim: str) -> _Grid | None:
    """The fast path: pyarrow's CSV parser, all cells as strings; None when in doubt."""
    import pyarrow.csv as pacsv  # lazy: keeps a rebuild that changes nothing quick

    if dec.encoding != "utf-8":
        return None
    body = data[dec.bom :]
    nl = body.find(b"\n")
    if nl < 0 or b'"' in body[:nl] or not body.endswith((b"\n", b"\r")):
        return None  # header spanning lines, or a last line that may be cut short
    try:
        header_text = body[:nl].decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        return None
    try:
        header = [h.strip() for h in next(csv.reader([header_text], delimiter=delim), [])]
    except csv.Error:
        return None  # a stray CR inside the header line: the reference path reports it
    if not header or (len(header) == 1 and not header[0]):
        return None
    names = [f"c{i}" for i in range(len(header))]
    rest = body[nl + 1 :]
    try:
        table = pacsv.read_csv(
            io.BytesIO(rest),
            read_options=pacsv.ReadOptions(column_names=names),
            parse_options=pacsv.ParseOptions(delimiter=delim, newlines_in_values=True, ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names},
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError):
        return None  # ragged rows, bad UTF-8, ...: the reference path reports them
    columns = [table.column(i).combine_chunks() for i in range(len(header))]
    slow: list[_Grid] = []

    def row_offset(i: int) -> int:  # only needed for problems: ask the reference path
        if not slow:
            slow.append(_grid_python(spath, data, dec, delim, None))
        return slow[0].row_offset(i)

    return _Grid(header, columns, table.num_rows, row_offset, len(data))


def _read_csv(path: Path, data: bytes, out: _Out, problems: list[Problem]) -> int:
    """Add one CSV file's scalars to ``out``; return decoded_bytes."""
    spath = str(path)
    n_before = len(problems)
    dec = _decode(data, spath, problems)
    delim = _delimiter(path, dec.text)
    grid = None if len(problems) > n_before else _grid_arrow(spath, data, dec, delim)
    if grid is None:
        grid = _grid_python(spath, data, dec, delim, problems)
    header, columns, nrows, decoded = grid.header, grid.columns, grid.nrows, grid.decoded
    if nrows == 0:
        return decoded
    offset_of_row = grid.row_offset
    lower = [h.lower() for h in header]
    parsed: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def col(j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if j not in parsed:
            parsed[j] = _parse_cells(columns[j])
        return parsed[j]

    # step
    step = np.arange(nrows, dtype=np.int64)
    step_col = None
    for j in _first(lower, STEP_COLUMNS):
        values, numeric, empty = col(j)
        bad = ~numeric & ~empty
        if numeric.sum() > bad.sum() and _integral(values[numeric]).all():
            step_col = j
            step = np.where(numeric, _exact_ints(columns[j], values), step)
            bad_rows = np.flatnonzero(bad)
            if len(bad_rows):
                first = int(bad_rows[0])
                problems.append(
                    Problem(
                        spath,
                        offset_of_row(first),
                        "bad-value",
                        f"step column {header[j]!r}: {len(bad_rows)} non-numeric cell(s) "
                        f"(first {_cell(columns[j], first)[:40]!r}); row numbers used instead",
                    )
                )
            break
    # wall time
    wall = np.full(nrows, np.nan)
    time_cols = _first(lower, TIME_COLUMNS)
    wall_col = time_cols[0] if time_cols else None
    if wall_col is not None:
        values, numeric, empty = col(wall_col)
        wall = np.where(numeric, values, np.nan)
        bad = np.flatnonzero(~numeric & ~empty)
        for i in bad:
            wall[i] = _iso_seconds(_cell(columns[wall_col], int(i)))
        wall = _wall_seconds(wall)

    def report_bad(name: str, bad: np.ndarray, cells: Any) -> None:
        first = int(bad[0])
        problems.append(
            Problem(
                spath,
                offset_of_row(first),
                "bad-value",
                f"column {name!r}: {len(bad)} non-numeric cell(s) skipped (first {_cell(cells, first)[:40]!r})",
            )
        )

    tag_cols = _first(lower, TAG_COLUMNS)
    if VALUE_COLUMN in lower and tag_cols:
        tj, vj = tag_cols[0], lower.index(VALUE_COLUMN)
        values, numeric, empty = col(vj)
        tags = _stripped(columns[tj])
        has_tag = tags != ""
        bad = np.flatnonzero(~numeric & ~empty & has_tag)
        if len(bad):
            report_bad(header[vj], bad, columns[vj])
        keep = numeric & has_tag
        out.add(tags[keep], step[keep], wall[keep], values[keep])
        return decoded

    metric_cols: list[int] = []
    for j, name in enumerate(header):
        if j in (step_col, wall_col) or not name:
            continue
        values, numeric, empty = col(j)
        n_num = int(numeric.sum())
        n_bad = nrows - n_num - int(empty.sum())
        if n_num == 0 or n_num <= n_bad:
            continue  # a text column
        if n_bad:
            report_bad(name, np.flatnonzero(~numeric & ~empty), columns[j])
        metric_cols.append(j)
    if not metric_cols:
        return decoded
    m = len(metric_cols)
    vals = np.stack([col(j)[0] for j in metric_cols], axis=1)  # rows x metrics
    mask = np.stack([col(j)[1] for j in metric_cols], axis=1)
    names = [header[j] for j in metric_cols]
    flat = mask.ravel()
    out.add(
        (np.tile(np.arange(m, dtype=np.int32), nrows)[flat], names),
        np.repeat(step, m)[flat],
        np.repeat(wall, m)[flat],
        vals.ravel()[flat],
    )
    return decoded


# --------------------------------------------------------------------------------------------
# JSON lines
# --------------------------------------------------------------------------------------------


def _json_number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    if isinstance(v, str):
        return _NONFINITE.get(v.strip().lower())
    return None


def _flatten(obj: dict, prefix: str = "") -> dict:
    out: dict = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def _read_jsonl(path: Path, data: bytes, out: _Out, problems: list[Problem]) -> int:
    spath = str(path)
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    records: list[dict] = []
    offsets: list[int] = []  # byte offset of each record's line
    decoded = len(data)
    offset = bom
    pieces = data[bom:].split(b"\n")
    for n, raw in enumerate(pieces):
        start = offset
        offset += len(raw) + 1
        line = raw.strip()
        if not line:
            continue
        last_unterminated = n == len(pieces) - 1
        try:
            obj = json.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            if last_unterminated:
                problems.append(Problem(spath, start, "truncated", f"last line has no newline and does not parse ({exc}); not read"))
                decoded = start
            else:
                shown = raw[:60].decode("utf-8", errors="replace")
                problems.append(Problem(spath, start, "bad-record", f"bad JSON line {shown!r} ({exc}); skipped"))
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(spath, start, "bad-record", f"JSON line is a {type(obj).__name__}, not an object; skipped"))
            continue
        if any(isinstance(v, dict) for v in obj.values()):
            obj = _flatten(obj)
        records.append(obj)
        offsets.append(start)
    if not records:
        return decoded

    # keys of the whole file, first-seen order; step/time keys chosen once per file
    seen: dict[str, None] = {}
    for r in records:
        for k in r:
            seen.setdefault(k, None)
    keys = list(seen)
    lower = [k.lower() for k in keys]
    step_key = None
    for j in _first(lower, STEP_COLUMNS):
        k = keys[j]
        nums = [_json_number(r[k]) for r in records if r.get(k) is not None]
        good = np.array([x for x in nums if x is not None], dtype=np.float64)
        if len(good) > len(nums) - len(good) and _integral(good).all():
            step_key = k
            break
    time_idx = _first(lower, TIME_COLUMNS)
    wall_key = keys[time_idx[0]] if time_idx else None
    tag_keys = [keys[j] for j in _first(lower, TAG_COLUMNS)]
    value_key = keys[lower.index(VALUE_COLUMN)] if VALUE_COLUMN in lower else None

    tags: list[str] = []
    steps: list[int] = []
    walls: list[float] = []
    values: list[float] = []
    for row, r in enumerate(records):
        s = r.get(step_key) if step_key is not None else None
        step = row
        if isinstance(s, int) and not isinstance(s, bool) and abs(s) < _INT64_LIMIT:
            step = s
        elif s is not None:
            x = _json_number(s)
            if x is not None and _integral(np.array([x])).all():
                step = int(x)
            else:
                problems.append(
                    Problem(spath, offsets[row], "bad-value", f"step {s!r} of key {step_key!r} is not a whole number; row number used")
                )
        wall = math.nan
        if wall_key is not None and wall_key in r:
            w = r[wall_key]
            x = _json_number(w)
            if x is None and isinstance(w, str):
                x = _iso_seconds(w)
            if x is not None:
                wall = x / 1000.0 if x > MS_THRESHOLD else x
        if value_key is not None and value_key in r:
            tag = next((r[k] for k in tag_keys if isinstance(r.get(k), str)), None)
            if tag is not None:  # a long-format record
                v = _json_number(r[value_key])
                if v is not None and tag.strip():
                    tags.append(tag.strip())
                    steps.append(step)
                    walls.append(wall)
                    values.append(v)
                continue
        for k, raw_v in r.items():
            if k == step_key or k == wall_key:
                continue
            v = _json_number(raw_v)
            if v is None:
                continue
            tags.append(k)
            steps.append(step)
            walls.append(wall)
            values.append(v)
    out.add(
        np.array(tags, dtype=object),
        np.array(steps, dtype=np.int64),
        np.array(walls, dtype=np.float64),
        np.array(values, dtype=np.float64),
    )
    return decoded


# --------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    """Read every file of ``source`` (in name order) into one scalars table."""
    run = RunData(name=source.name, format=FORMAT)
    out = _Out()
    for path in sorted((Path(p) for p in source.files), key=lambda p: (p.name, str(p))):
        data = read_or_note(path, options.roots, run.problems)
        if data is None:
            continue
        mine = _Out()
        if path.suffix.lower() in JSON_SUFFIXES:
            decoded = _read_jsonl(path, data, mine, run.problems)
        else:
            decoded = _read_csv(path, data, mine, run.problems)
        run.problems += scalar_problems(mine.table(), str(path), wall_times=False)
        for name in ("tags", "steps", "walls", "values"):
            getattr(out, name).extend(getattr(mine, name))
        run.files.append(SourceFile(path, len(data), decoded))
    run.scalars = out.table()
    return run
