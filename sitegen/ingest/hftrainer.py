"""Hugging Face Trainer output folders (``trainer_state.json``), read without transformers.

Layout: ``<output_dir>/checkpoint-<step>/trainer_state.json`` for each saved checkpoint, and
``<output_dir>/trainer_state.json`` when the script called ``save_state()``. The output folder is
one run; the state with the highest ``global_step`` is read (a damaged one gives way to the next
best). ``training_args.bin`` is a pickle: never opened.

What is taken: ``log_history`` rows with keys ``eval_*`` -> ``eval/*``, ``test_*`` -> ``test/*``,
others -> ``train/*`` (``epoch`` too, from training rows only: an evaluation row repeats the
step and epoch of the training row before it), as the Trainer's TensorBoard callback names them; the
row with ``train_runtime`` (the end-of-training summary) -> ``meta["summary.<key>"]``, not a chart.
``best_metric``, ``best_model_checkpoint``, ``best_global_step``, ``trial_name`` -> ``meta``;
``train_batch_size``, ``num_train_epochs``, ``max_steps``, ``logging_steps``, ``eval_steps``,
``save_steps`` and ``trial_params`` -> hparams; the model's ``config.json`` (beside the state,
else in the output folder) -> hparams under ``model.``. Bare ``NaN``/``Infinity`` are values.
Log rows have no wall time (NaN). The scalars are grouped by tag (tags in name order), each tag's
points in file order. A state that is not valid JSON is salvaged row by row: every
row that parses is kept and each damaged stretch is one problem with its byte offset.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sitegen.errors import Problem
from sitegen.ingest.csvtyped import Wide, numbers, to_long
from sitegen.ingest.files import problem, read_regular, read_regular_array
from sitegen.ingest.values import Columns, number, pooled, summary_text
from sitegen.model import ReadOptions, RunData, RunSource, SourceFile, flat_hparams, hparam_value

FORMAT = "hftrainer"
STATE = "trainer_state.json"
CONFIG = "config.json"
CHECKPOINT = re.compile(r"checkpoint-(\d+)")
HPARAM_KEYS = ("train_batch_size", "num_train_epochs", "max_steps", "logging_steps", "eval_steps", "save_steps")
META_KEYS = ("best_metric", "best_model_checkpoint", "best_global_step", "trial_name")
TOP_KEYS = ("global_step", *HPARAM_KEYS, *META_KEYS, "trial_params")


def claims(filename: str, patterns: Any = None) -> bool:
    return filename == STATE


def gather(
    dirpath: str, filenames: list[str], dirnames: list[str], archive: Path, roots: tuple[str, ...]
) -> tuple[list[RunSource], set[str]] | None:
    """An output folder: its own state and those of its ``checkpoint-*`` folders (not descended)."""
    ckpts = [d for d in dirnames if CHECKPOINT.fullmatch(d)]
    if STATE not in filenames and not ckpts:
        return None
    directory = Path(dirpath)
    files = [directory / STATE] if STATE in filenames else []
    taken: set[str] = set()
    for d in sorted(ckpts, key=lambda d: int(CHECKPOINT.fullmatch(d).group(1))):  # type: ignore[union-attr]
        if os.path.isfile(os.path.join(dirpath, d, STATE)):
            files.append(directory / d / STATE)
            taken.add(d)
            if os.path.isfile(os.path.join(dirpath, d, CONFIG)):
                files.append(directory / d / CONFIG)
    if not any(f.name == STATE for f in files):
        return None
    if CONFIG in filenames:
        files.append(directory / CONFIG)
    rel = directory.relative_to(archive).as_posix()
    name = "." if rel in ("", ".") else rel
    return [RunSource(name, FORMAT, directory, tuple(files))], taken | {STATE, CONFIG}


def _candidates(source: RunSource) -> list[tuple[int, Path]]:
    """(checkpoint step, state file): the output folder's own state first (saved last; its step
    unknown until read), then the checkpoints from the highest step down."""
    out = []
    for p in source.files:
        if p.name == STATE:
            m = CHECKPOINT.fullmatch(p.parent.name)
            out.append((int(m.group(1)) if m and p.parent != source.directory else 2**63, p))
    return sorted(out, key=lambda c: -c[0])


def _byte_offset(text: str, char: int) -> int:
    return len(text[:char].encode("utf-8", "surrogatepass"))


def _salvage(text: str, path: str, problems: list[Problem]) -> dict[str, Any]:
    """A state that is not valid JSON: the top-level fields that parse, and every log row that
    parses (after a damaged row, reading goes on at the next ``{``)."""
    dec = json.JSONDecoder()
    out: dict[str, Any] = {}
    for key in TOP_KEYS:
        m = re.search(r'"%s"\s*:\s*' % re.escape(key), text)
        if m:
            try:
                out[key] = dec.raw_decode(text, m.end())[0]
            except ValueError:
                pass
    m = re.search(r'"log_history"\s*:\s*\[', text)
    rows: list[Any] = []
    i, n = (m.end(), len(text)) if m else (1, len(text))
    damaged_at: int | None = None if m else 0
    while i < n:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i < n and text[i] == "]" and damaged_at is None:
            break
        row, end = None, i
        if i < n and text[i] == "{":
            try:
                row, end = dec.raw_decode(text, i)
            except ValueError:
                pass
        if isinstance(row, dict) and isinstance(row.get("step"), int) and not any(isinstance(v, (dict, list)) for v in row.values()):
            if damaged_at is not None:
                _damaged(text, damaged_at, i, path, problems)
                damaged_at = None
            rows.append(row)
            i = end
            continue
        if damaged_at is None:
            damaged_at = i
        nxt = text.find("{", i + 1)
        i = nxt if nxt >= 0 else n
    if damaged_at is not None:
        _damaged(text, damaged_at, n, path, problems)
    out["log_history"] = rows
    return out


def _damaged(text: str, start: int, end: int, path: str, problems: list[Problem]) -> None:
    offset = _byte_offset(text, start)
    if end >= len(text):
        problems.append(Problem(path, offset, "truncated", "log_history ends early (damaged or cut short); the rows before it kept"))
    else:
        problems.append(Problem(path, offset, "bad-record", f"damaged log rows up to byte {_byte_offset(text, end)}; skipped"))


def _load(path: Path, problems: list[Problem], roots: tuple[str, ...]) -> tuple[dict[str, Any] | None, int, int]:
    """(the state, file size, bytes read intact) or (None, 0, 0) when it cannot be read. The
    log rows are a list of dicts, or a ``pa.Table`` when the fast path read them."""
    try:
        buf = read_regular_array(path, roots, pooled)  # (pyarrow's pool: see values.pooled)
    except OSError as exc:
        problems.append(problem(path, exc))
        return None, 0, 0
    fast = _fast(buf)
    if fast is not None:
        return fast, len(buf), len(buf)
    data = buf.tobytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(Problem(str(path), exc.start, "bad-encoding", "not UTF-8; undecodable bytes replaced"))
        text = data.decode("utf-8", errors="replace")
    where, why = 0, "not a trainer state"
    try:
        state = json.loads(text)
        if isinstance(state, dict) and isinstance(state.get("log_history"), list):
            return state, len(data), len(data)
    except json.JSONDecodeError as exc:
        where, why = exc.pos, exc.msg
    except (ValueError, RecursionError):
        pass
    before = len(problems)
    state = _salvage(text, str(path), problems)
    if len(problems) == before:  # every row read: the damage is elsewhere
        kind = "truncated" if where >= len(text.rstrip()) else "bad-record"
        problems.append(Problem(str(path), _byte_offset(text, where), kind, f"not valid JSON ({why}); every log row read"))
    first = problems[before].offset if len(problems) > before else len(data)
    return state, len(data), first if first is not None else 0


_OPEN = b'\n  "log_history": [\n    {'
_CLOSE = b"\n    }\n  ]"
_EDGE = 1 << 16  # where the fast path looks for the start and the end of log_history
_CUT = b"},\n    {\n  "  # the end of a log row and the start of the next (two bytes of its first line's indent)
_HALVES = b']}{"a":[{'  # ... what the bytes after that "}" become: the end of one object, the start of another
_HALVES_ABOVE = 1 << 16  # bytes of log rows below which they are parsed as one object


def _fast(buf: np.ndarray) -> dict[str, Any] | None:
    """The state as ``TrainerState.save_to_json`` lays it out (indent 2, sorted keys), its log
    rows parsed by ``pyarrow.json``: the space before ``"log_history"`` becomes ``{`` and the
    byte after its ``]`` becomes ``}``, so no pass over the rows is needed to make them JSON
    lines. Why in two halves, the second on a thread of its own: pyarrow parses an object in one
    block, on one thread (blocks that end inside an object are refused, and looking for where an
    object ends is a pass over it); the row end nearest the middle becomes ``}]}{"a":[{``. The
    halves are joined when their columns agree, else parsed again as one object. None (``buf``
    as it was) when the layout or a value is not what that writer makes."""
    start = buf[:_EDGE].tobytes().find(_OPEN)
    tail = max(0, len(buf) - _EDGE)
    end = buf[tail:].tobytes().rfind(_CLOSE)
    if start < 0 or end < 0 or tail + end <= start:
        return None
    lo, hi = start + len(_OPEN) - 1, tail + end + len(_CLOSE) - 2  # the first row's "{", after the last "}"
    try:
        state = json.loads(buf[:lo].tobytes() + buf[hi:].tobytes())
    except (ValueError, RecursionError):
        return None
    if not isinstance(state, dict) or state.get("log_history") != []:
        return None
    key, close = start + 2, hi + 2  # the space before '"log_history"', the byte after its "]"
    if close >= len(buf) or buf[key] != ord(" ") or buf[close] not in (ord(","), ord("\n")):
        return None
    cut = _middle(buf, lo, hi) if hi - lo >= _HALVES_ABOVE else None
    history = _parse(buf, key, close, cut)
    if history is False:  # the halves' columns differ (a key first seen as int, then float)
        history = _parse(buf, key, close, None)
    if not isinstance(history, pa.Table):
        return None
    state["log_history"] = history
    return state


def _middle(buf: np.ndarray, lo: int, hi: int) -> int | None:
    """Where the first row end at or after the middle of ``buf[lo:hi]`` is (looked for in a
    small window first: rows are short); None when there is none."""
    at, window = (lo + hi) // 2, 4096
    while True:
        found = buf[at : min(hi, at + window)].tobytes().find(_CUT)
        if found >= 0:
            return at + found
        if at + window >= hi:
            return None
        window *= 16


def _parse(buf: np.ndarray, key: int, close: int, cut: int | None) -> "pa.Table | None | bool":
    """The log rows between ``key`` and ``close`` as a table, in halves at ``cut`` (None: as one
    object); None when they are not rows, False when the halves' columns cannot be joined."""
    from concurrent.futures import ThreadPoolExecutor

    edits = [(key, b"{"), (close, b"}"), *([] if cut is None else [(cut + 1, _HALVES)])]
    saved = [(at, buf[at : at + len(new)].tobytes()) for at, new in edits]
    try:
        for at, new in edits:
            buf[at : at + len(new)] = np.frombuffer(new, np.uint8)
        if cut is None:
            return _rows(buf[key : close + 1], "log_history")
        with ThreadPoolExecutor(1) as pool:  # (waits for the second half before the bytes are put back)
            second = pool.submit(_rows, buf[cut + 3 : close + 1], "a")
            first = _rows(buf[key : cut + 3], "log_history")
            halves = (first, second.result())
    except (pa.ArrowException, ValueError, KeyError):  # bad JSON, bad UTF-8 in a key (a ValueError), rows not objects
        return None
    finally:  # the caller's buffer as it was, whatever happened
        for at, old in saved:
            buf[at : at + len(old)] = np.frombuffer(old, np.uint8)
    if halves[0] is None or halves[1] is None:
        return None
    try:
        return pa.concat_tables(halves, promote_options="default")  # a key missing from a half: null there
    except (pa.ArrowException, TypeError):
        return False


def _rows(piece: np.ndarray, name: str) -> pa.Table | None:
    """One object ``{name: [rows]}`` parsed by ``pyarrow.json`` in one block: the rows as a
    table, a column per key; None when they are not rows with an integer ``step`` each."""
    import pyarrow.json as pajson  # lazy: keeps a rebuild that changes nothing quick

    table = pajson.read_json(
        pa.BufferReader(pa.py_buffer(piece)),
        read_options=pajson.ReadOptions(block_size=len(piece) + 1),  # one object: one block
        parse_options=pajson.ParseOptions(newlines_in_values=True),
    )
    rows = table.column(name).chunk(0).flatten() if table.num_rows == 1 and table.column_names == [name] else None
    names = [rows.type.field(i).name for i in range(rows.type.num_fields)] if isinstance(rows, pa.StructArray) else []
    if not isinstance(rows, pa.StructArray) or rows.null_count or len(set(names)) != len(names) or "step" not in names:
        return None
    history = pa.Table.from_arrays(rows.flatten(), names=names)
    step = history.column("step")
    return history if step.type == pa.int64() and not step.null_count else None


def _table_scalars(table: pa.Table) -> tuple[pa.Table, dict[str, Any]]:
    """The fast path's rows: columns in name order (the writer's key order within each row)."""
    names = sorted(table.column_names)
    summary: dict[str, Any] = {}
    keep = np.ones(table.num_rows, bool)
    if "train_runtime" in names:
        col = table.column("train_runtime")
        is_summary = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), bool)
        for i in np.flatnonzero(is_summary):
            summary.update((k, v) for k, v in table.slice(int(i), 1).to_pylist()[0].items() if k != "step" and v is not None)
        keep = ~is_summary
    evaluation = np.zeros(table.num_rows, bool)
    header, values, present, epoch = [], [], [], None
    for name in names:
        col = table.column(name)
        if name != "step" and not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
            if name.startswith(("eval_", "test_")):
                evaluation |= np.asarray(col.is_valid().to_numpy(zero_copy_only=False), bool)
            continue
        v, p = numbers(col)
        header.append(name if name == "step" else _tag(name))
        values.append(v if name == "step" else v.astype(np.float64, copy=False))
        present.append(p)
        if name.startswith(("eval_", "test_")):
            evaluation |= p
        epoch = len(header) - 1 if name == "epoch" else epoch
    if epoch is not None:
        present[epoch] = present[epoch] & ~evaluation
    wide = Wide(header, values, present, table.num_rows, 0, lambda i: None)
    rows: "slice | np.ndarray" = keep if not keep.all() else slice(None)  # no summary row: no copies
    return to_long(wide, header.index("step"), rows, set()), summary


def _tag(key: str) -> str:
    if key.startswith("eval_"):
        return "eval/" + key[5:]
    if key.startswith("test_"):
        return "test/" + key[5:]
    return "train/" + key


def _config(source: RunSource, state_path: Path, problems: list[Problem], roots: tuple[str, ...]) -> tuple[dict[str, Any], Path | None]:
    for p in (state_path.parent / CONFIG, source.directory / CONFIG):
        if p in source.files:
            try:
                obj = json.loads(read_regular(p, roots))
            except (OSError, ValueError, RecursionError) as exc:
                problems.append(Problem(str(p), None, "bad-record", f"model config not read: {exc}"))
                continue
            if isinstance(obj, dict):
                return obj, p
    return {}, None


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    """The run of one output folder, from its most advanced trainer state."""
    run = RunData(name=source.name, format=FORMAT)
    chosen: tuple[tuple[int, bool, int], dict[str, Any], Path, int, int] | None = None
    for ckpt_step, path in _candidates(source):
        if chosen is not None and chosen[0][1] and ckpt_step != 2**63 and ckpt_step <= chosen[0][2]:
            break  # an intact state is at least this far: older checkpoints hold fewer rows
        found: list[Problem] = []
        state, size, intact = _load(path, found, options.roots)
        run.problems += found
        if state is None:
            continue
        history = state.get("log_history")
        rank = (history.num_rows if isinstance(history, pa.Table) else len(history or []), not found, _step(state))
        if chosen is None or rank > chosen[0]:
            chosen = (rank, state, path, size, intact)
    if chosen is None:
        return run
    _, state, path, size, intact = chosen
    run.files.append(SourceFile(path, size, intact))
    history = state.get("log_history")
    run.scalars, summary = _table_scalars(history) if isinstance(history, pa.Table) else _scalars(history or [])
    for key, value in summary.items():
        run.meta[f"summary.{key}"] = summary_text(value)
    for key in META_KEYS:
        if state.get(key) is not None:
            run.meta[key] = summary_text(state[key])
    config, config_path = _config(source, path, run.problems, options.roots)
    if config_path is not None:
        size = config_path.stat().st_size
        run.files.append(SourceFile(config_path, size, size))
        flat_hparams(config, "model", run.hparams)
    for key in HPARAM_KEYS:
        if state.get(key) is not None:
            run.hparams[key] = hparam_value(state[key])
    if isinstance(state.get("trial_params"), dict):
        flat_hparams(state["trial_params"], "", run.hparams)
    return run


def _step(state: dict[str, Any]) -> int:
    s = state.get("global_step")
    return s if isinstance(s, int) and not isinstance(s, bool) else -1


def _scalars(rows: list[Any]) -> tuple[Any, dict[str, Any]]:
    cols = Columns()
    summary: dict[str, Any] = {}
    for row in rows:
        if not isinstance(row, dict):
            continue
        step = row.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or abs(step) >= 2**63:
            continue
        if "train_runtime" in row:
            summary.update((k, v) for k, v in row.items() if k != "step")
            continue
        evaluation = any(k.startswith(("eval_", "test_")) for k in row)
        for key, raw in row.items():
            if key == "step" or (evaluation and key == "epoch"):
                continue
            value = number(raw)
            if value is None:
                continue
            cols.add(_tag(key), step, value)
    return cols.table(), summary
