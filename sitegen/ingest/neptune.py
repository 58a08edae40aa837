"""Neptune 1.x offline and async runs (``init_run(mode="offline")``), read without neptune.

Layout: ``.neptune/{offline,async}/run__<uuid>__<pid>__<rand>/`` holding ``metadata.json``
(container id, creation time, OS, Python) and ``data-<n>.log`` (JSON lines ``{"obj": {"type",
"path", ...}, "version", "at"}``, a new file every 64 MiB). Operations are replayed in order:
``LogFloats`` -> scalars (path joined by ``/``; ``ts`` the wall time; a null step continues the
previous one); ``LogStrings`` -> texts (console capture under ``monitoring/`` left out);
``Assign*`` -> hparams by path, except ``sys/name`` (title), ``sys/description``,
``sys/hostname`` (host) and ``source_code/entrypoint``; ``sys/tags`` string-set operations -> tags;
``Clear*Log`` and ``DeleteAttribute`` undo what came before. The client drops NaN/inf before
writing, and offline runs keep no git or project information (sent when synced). A last line
without its newline is being written: left for the next build, no problem. neptune-scale's
``run_operations.sqlite3`` (protobuf in SQLite) is not read: the scan reports its folder once.
"""

from __future__ import annotations

import io
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from sitegen.errors import Problem
from sitegen.ingest.files import read_or_note
from sitegen.ingest.jsonlines import as_float, as_step, parse_lines, pick_lines
from sitegen.ingest.series import Series, bulk_table, numeric
from sitegen.ingest.values import summary_text
from sitegen.model import ReadOptions, RunData, RunSource, SourceFile, Text, hparam_value

FORMAT = "neptune"
HIDDEN_FOLDERS = (".neptune",)
DATA = re.compile(r"data-(\d+)\.log")
META = "metadata.json"
SCALE = "run_operations.sqlite3"
ASSIGN = ("AssignFloat", "AssignInt", "AssignBool", "AssignString", "AssignDatetime")
FLOATS = b'{"obj": {"type": "LogFloats", '  # how the client starts a LogFloats line
SYS = {"sys/name": "title", "sys/description": "description", "sys/hostname": "tag:host", "source_code/entrypoint": "tag:command"}


def claims(filename: str, patterns: Any = None) -> bool:
    return False


def gather(
    dirpath: str, filenames: list[str], dirnames: list[str], archive: Path, roots: tuple[str, ...]
) -> tuple[list[RunSource], set[str]] | None:
    """A ``run__*`` folder inside ``offline/`` or ``async/``: its data logs in order."""
    head, base = os.path.split(dirpath)
    if not base.startswith("run__") or os.path.basename(head) not in ("offline", "async"):
        return None
    logs = sorted((f for f in filenames if DATA.fullmatch(f)), key=lambda f: int(f[5:-4]))
    if not logs:
        return None
    directory = Path(dirpath)
    files = [directory / f for f in logs] + ([directory / META] if META in filenames else [])
    rel = directory.relative_to(archive).as_posix()
    return [RunSource("." if rel in ("", ".") else rel, FORMAT, directory, tuple(files))], {*logs, META}


def unread(dirpath: str, filenames: list[str]) -> str | None:
    """neptune-scale writes a SQLite file of protobuf operations per run: not read."""
    if SCALE in filenames:
        return f"a neptune-scale run ({SCALE}): not read (sitegen reads Neptune 1.x offline/async runs only)"
    return None


def read(source: RunSource, options: ReadOptions = ReadOptions(), *, bulk: bool = True) -> RunData:
    """One run: its metadata, then every operation of its data logs in order.

    With ``bulk``, the ``LogFloats`` lines as the client writes them (the bulk of a run) are cut
    out and parsed by ``pyarrow.json`` in one pass (:func:`_bulk_scalars`), the other lines one
    by one. If those lines are not regular, or another line touches the scalars (a ``LogFloats``
    written otherwise, ``ClearFloatLog``, ``DeleteAttribute``), the run is read line by line."""
    run = RunData(name=source.name, format=FORMAT)
    if "/.neptune/" in source.name:  # offline runs keep no project: the folder holding .neptune/ stands for it
        run.meta["experiment"] = source.name.split("/.neptune/", 1)[0]
    logs = [p for p in source.files if p.name != META]
    for p in source.files:
        if p.name == META:
            _metadata(p, run, options.roots)
    state = _State()
    picked: list[bytes] = []
    for i, path in enumerate(logs):
        data = read_or_note(path, options.roots, run.problems)
        if data is None:
            continue
        lines_, skip = pick_lines(data, FLOATS) if bulk else (b"", [])
        picked.append(lines_)
        lines, end = parse_lines(data, str(path), run.problems, live_tail=i == len(logs) - 1, skip=skip)
        run.files.append(SourceFile(path, len(data), end))
        for _, rec in lines:
            obj = rec.get("obj") if isinstance(rec, dict) else None
            if isinstance(obj, dict) and isinstance(obj.get("path"), list) and all(isinstance(s, str) for s in obj["path"]):
                if bulk and obj.get("type") in ("LogFloats", "ClearFloatLog", "DeleteAttribute"):
                    return read(source, options, bulk=False)
                state.apply(obj, "/".join(obj["path"]), rec.get("at"), run)
    if state.bad_steps:
        tag, count = next(iter(state.bad_steps.items())), sum(state.bad_steps.values())
        run.problems.append(
            Problem(
                str(logs[0]) if logs else source.name,
                None,
                "bad-value",
                f"{count} points with a step that is not a whole number (first in {tag[0]!r}); not read",
            )
        )
    run.scalars = state.series.table()
    if any(picked):
        table = _bulk_scalars(b"".join(picked))
        if table is None:
            return read(source, options, bulk=False)
        run.scalars = table
    run.texts = state.texts
    for key in sorted(state.hparams):
        run.hparams[key] = hparam_value(state.hparams[key])
    if state.tags:
        run.meta["tags"] = ", ".join(sorted(state.tags))
    return run


def _bulk_scalars(lines: bytes) -> pa.Table | None:
    """The scalars of ``LogFloats`` lines, parsed by ``pyarrow.json``: what :meth:`_State.apply`
    makes of them, point by point, for the layout the client writes (``path`` a list of strings;
    ``values`` a list of ``{value, step, ts}`` with numbers, ``step`` whole or null). None for
    anything else (the caller then replays every line)."""
    try:
        table = pajson.read_json(io.BytesIO(lines), read_options=pajson.ReadOptions(use_threads=False))
        obj = table.column("obj").combine_chunks()
        path, values = obj.field("path"), obj.field("values")
        point = pc.list_flatten(values)
        cols = {f: point.field(f) for f in ("value", "step", "ts")}
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, KeyError, AttributeError, TypeError):
        return None
    if not pa.types.is_list(path.type) or not pa.types.is_string(path.type.value_type) or not all(numeric(c.type) for c in cols.values()):
        return None
    tags = pc.binary_join(path, "/").take(pc.list_parent_indices(values))
    keep = pc.and_(pc.is_valid(tags), pc.is_valid(cols["value"]))
    keep = pc.and_(keep, pc.invert(pc.fill_null(pc.starts_with(tags, "monitoring/"), False)))
    return bulk_table(tags.filter(keep), cols["step"].filter(keep), cols["ts"].filter(keep), cols["value"].filter(keep))


class _State:
    """What the operations built up so far."""

    def __init__(self) -> None:
        self.series = Series()
        self.texts: list[Text] = []
        self.text_steps: dict[str, int] = {}
        self.hparams: dict[str, Any] = {}
        self.tags: set[str] = set()
        self.bad_steps: dict[str, int] = {}

    def apply(self, obj: dict[str, Any], path: str, at: Any, run: RunData) -> None:
        kind = obj.get("type")
        if kind in ASSIGN:
            value = obj.get("value")
            if kind == "AssignDatetime":
                ms = as_float(value)
                value = _iso(ms / 1000.0) if ms is not None else value
            if path in SYS:
                if value not in (None, ""):
                    run.meta[SYS[path]] = summary_text(value)
            elif path.startswith(("sys/", "monitoring/")):
                return
            else:
                self.hparams[path] = value
        elif kind in ("LogFloats", "LogStrings") and isinstance(obj.get("values"), list):
            if path.startswith("monitoring/"):
                return
            for v in obj["values"]:
                if isinstance(v, dict):
                    self._point(kind, path, v)
        elif kind == "ClearFloatLog":
            self.series.clear(path)
        elif kind == "ClearStringLog":
            self.texts = [t for t in self.texts if t.tag != path]
            self.text_steps.pop(path, None)
        elif kind == "DeleteAttribute":
            self.hparams.pop(path, None)
            self.series.clear(path)
        elif path == "sys/tags" and kind in ("AddStrings", "RemoveStrings", "ClearStringSet"):
            values = {summary_text(s) for s in obj.get("values") or [] if isinstance(s, str)}
            self.tags = set() if kind == "ClearStringSet" else self.tags | values if kind == "AddStrings" else self.tags - values

    def _point(self, kind: str, path: str, v: dict[str, Any]) -> None:
        raw = v.get("step")
        step = as_step(raw)
        if step is None and raw is not None:
            self.bad_steps[path] = self.bad_steps.get(path, 0) + 1
            return
        ts = as_float(v.get("ts"))
        wall = ts if ts is not None else float("nan")
        if kind == "LogFloats":
            value = as_float(v.get("value"))
            if value is not None:
                self.series.add(path, step, wall, value)
        elif isinstance(v.get("value"), str):
            if step is None:
                step = self.text_steps.get(path, -1) + 1
            self.text_steps[path] = step
            self.texts.append(Text(path, step, wall, v["value"]))


def _iso(seconds: float) -> str:
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).isoformat()
    except (ValueError, OverflowError, OSError):
        return repr(seconds)


def _metadata(path: Path, run: RunData, roots: tuple[str, ...]) -> None:
    data = read_or_note(path, roots, run.problems)
    if data is None:
        return
    run.files.append(SourceFile(path, len(data), len(data)))
    try:
        meta = json.loads(data)
    except (ValueError, RecursionError):
        run.problems.append(Problem(str(path), 0, "bad-record", "not valid JSON; the run's creation time not read"))
        return
    if not isinstance(meta, dict):
        return
    if isinstance(meta.get("containerId"), str):
        run.meta["run_id"] = meta["containerId"]
    for key, name in (("os", "tag:os"), ("pythonVersion", "tag:python"), ("neptuneClientVersion", "tag:neptune.version")):
        if isinstance(meta.get(key), str) and meta[key]:
            run.meta[name] = meta[key]
    created = meta.get("createdAt")
    if isinstance(created, str):
        try:
            run.meta["start_time"] = repr(datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp())
        except (ValueError, OverflowError, OSError):
            pass
