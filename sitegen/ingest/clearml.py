"""ClearML offline sessions (``Task.set_offline(True)``), read without clearml.

Layout: ``offline-<task id>/`` (under ``~/.clearml/cache/offline/`` where ClearML writes it)
holding ``task.json`` (name, project, tags, hyperparameter sections, ``script`` with the git
commit), ``metrics.jsonl`` (one JSON array of events per line) and ``log.jsonl`` (console
lines); ``Task.close()`` also zips the folder to ``offline-<id>.zip`` beside it, read when the
folder is not there. What is taken: ``training_stats_scalar`` events -> scalars ``metric/variant``
(``iter`` the step, ``timestamp`` ms the wall time); hyperparameters -> ``section/name`` (typed
by their ``type``); ``script.version_num``/``repository``/``branch``/``tag`` -> git commit, remote,
branch and tag; the first log event's ``worker`` -> host and its time -> start time. ClearML writes NaN
and inf as 0.0 unless told otherwise: the run info says so. Images, plots, console text and
configuration objects are not read. A last line being written is left for the next build.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sitegen.errors import Problem
from sitegen.ingest.files import problem, read_or_note, read_zip_members
from sitegen.ingest.jsonlines import as_float, as_step, parse_lines
from sitegen.ingest.series import Series
from sitegen.ingest.values import summary_text
from sitegen.model import HParamValue, ReadOptions, RunData, RunSource, SourceFile, hparam_value

FORMAT = "clearml"
TASK, METRICS, LOG = "task.json", "metrics.jsonl", "log.jsonl"
FILES = (TASK, METRICS, LOG)
MAX_MEMBER = 1 << 30
GIT = {"version_num": "git.commit", "repository": "git.remote", "branch": "git.branch", "tag": "git.tag", "entry_point": "command"}
NAN_NOTE = "ClearML writes NaN and inf as 0.0 (unless the script set Logger.set_reporting_nan_value): a 0.0 may have been NaN or inf"


def claims(filename: str, patterns: Any = None) -> bool:
    return False


def gather(
    dirpath: str, filenames: list[str], dirnames: list[str], archive: Path, roots: tuple[str, ...]
) -> tuple[list[RunSource], set[str]] | None:
    """The folder itself when it is an ``offline-*`` session, and each ``offline-*.zip`` here
    whose folder is not beside it."""
    session = os.path.basename(dirpath).startswith("offline-") and TASK in filenames
    zips = sorted(f for f in filenames if f.startswith("offline-") and f.endswith(".zip"))
    if not session and not zips:
        return None  # (asked of every folder of the archive)
    directory = Path(dirpath)
    rel = directory.relative_to(archive).as_posix()
    runs: list[RunSource] = []
    taken: set[str] = set()
    if session:
        files = tuple(directory / f for f in FILES if f in filenames)
        runs.append(RunSource("." if rel in ("", ".") else rel, FORMAT, directory, files))
        taken |= {f for f in FILES if f in filenames}
    for z in zips:
        if z[:-4] not in dirnames:
            runs.append(RunSource(z[:-4] if rel in ("", ".") else f"{rel}/{z[:-4]}", FORMAT, directory, (directory / z,)))
            taken.add(z)
    return (runs, taken) if runs else None


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    """One offline session, from its folder or its zip."""
    run = RunData(name=source.name, format=FORMAT)
    blobs: dict[str, tuple[bytes, str]] = {}
    if len(source.files) == 1 and source.files[0].suffix == ".zip":
        path = source.files[0]
        try:
            zm = read_zip_members(path, options.roots, lambda n: n in FILES, MAX_MEMBER)
        except OSError as exc:
            run.problems.append(problem(path, exc))
            return run
        damage = zm.problem(path)
        if damage is not None:
            run.problems.append(damage)
        run.files.append(SourceFile(path, zm.size, zm.size if zm.damaged_at is None else zm.damaged_at))
        blobs = {name: (data, f"{path}:{name}") for name, data in zm.data.items()}
        live = False
    else:
        for p in source.files:
            data = read_or_note(p, options.roots, run.problems)
            if data is not None:
                blobs[p.name] = (data, str(p))
        live = True
    if TASK in blobs:
        _task(*blobs[TASK], run)
    series = Series()
    for name in (METRICS, LOG):
        if name not in blobs:
            continue
        data, where = blobs[name]
        lines, end = parse_lines(data, where, run.problems, live_tail=live)
        if live:
            run.files.append(SourceFile(source.directory / name, len(data), end))
        for _, events in lines:
            for ev in events if isinstance(events, list) else [events]:
                if isinstance(ev, dict):
                    _event(ev, series, run)
    run.scalars = series.table()
    if run.scalars.num_rows:
        run.meta["note"] = NAN_NOTE
    return run


def _task(data: bytes, where: str, run: RunData) -> None:
    if not where.endswith(".zip:" + TASK):
        run.files.insert(0, SourceFile(Path(where), len(data), len(data)))
    try:
        task = json.loads(data)
    except (ValueError, RecursionError):
        run.problems.append(Problem(where, 0, "bad-record", "not valid JSON; the task's name, project and hyperparameters not read"))
        return
    if not isinstance(task, dict):
        return
    for key, name in (("name", "title"), ("project_name", "experiment"), ("id", "run_id"), ("type", "task_type")):
        if isinstance(task.get(key), str) and task[key]:
            run.meta[name] = task[key]
    tags = task.get("tags")
    if isinstance(tags, list) and tags:
        run.meta["tags"] = ", ".join(sorted(summary_text(t) for t in tags))
    script = task.get("script")
    if isinstance(script, dict):
        for key, name in GIT.items():
            if isinstance(script.get(key), str) and script[key]:
                run.meta[f"tag:{name}"] = script[key]
    sections = task.get("hyperparams")
    if isinstance(sections, dict):
        for section in sorted(sections, key=str):
            params = sections[section]
            if isinstance(params, dict):
                for key in sorted(params, key=str):
                    p = params[key]
                    if isinstance(p, dict) and "value" in p:
                        run.hparams[f"{section}/{p.get('name', key)}"] = _typed(p.get("value"), p.get("type"))


def _typed(value: Any, kind: Any) -> HParamValue:
    """A hyperparameter as ClearML stored it (text) typed by its ``type`` field."""
    if isinstance(value, str):
        if kind in ("int", "float"):
            number = as_float(value)
            if number is not None:
                return number
        if kind == "bool" and value in ("True", "False"):
            return value == "True"
    return hparam_value(value)


def _event(ev: dict[str, Any], series: Series, run: RunData) -> None:
    kind = ev.get("type")
    ts = as_float(ev.get("timestamp"))
    wall = ts / 1000.0 if ts is not None else float("nan")
    if kind == "training_stats_scalar":
        metric, variant = ev.get("metric"), ev.get("variant")
        value, step = as_float(ev.get("value")), as_step(ev.get("iter"))
        if isinstance(metric, str) and isinstance(variant, str) and value is not None and step is not None:
            series.add(f"{metric}/{variant}", step, wall, value)
    elif kind == "log":
        if "tag:host" not in run.meta and isinstance(ev.get("worker"), str) and ev["worker"]:
            run.meta["tag:host"] = ev["worker"]
        if "start_time" not in run.meta and wall == wall:
            run.meta["start_time"] = repr(wall)
