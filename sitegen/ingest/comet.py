"""Comet offline experiments (``OfflineExperiment``), read without comet_ml.

Layout: ``.cometml-runs/<32 hex key>.zip`` (or the folder given as ``offline_directory``) holding
``experiment.json`` (key, project, workspace, start/stop times in ms, tags) and ``messages.json``
(JSON lines ``{"type", "payload"}``; older clients wrote every message as ``ws_msg``). Each zip is
one run. What is taken: ``metric_msg`` -> scalars (``<context>_<name>`` when logged in a context,
as Comet shows it; a null step continues the tag's previous step; ``NaN``/``Infinity`` strings
are values; ``local_timestamp`` the wall time); ``parameter_msg`` -> hparams (``a|b`` nested names
-> ``a.b``, auto-logged ``curr_step``/``curr_epoch`` left out); ``log_other`` -> ``tag:<key>``
(``Name`` -> the title); ``system_details`` -> host, OS, Python, command; ``git_metadata`` ->
commit, remote, branch. Uploaded files, console output and package lists are not read. A crashed
writer leaves an empty 22-byte zip (its data stays in a temp folder): one problem says so.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from sitegen.errors import Problem
from sitegen.ingest.files import problem, read_zip_members
from sitegen.ingest.jsonlines import as_float, as_step, parse_lines, pick_lines
from sitegen.ingest.series import Series, bulk_table, numeric
from sitegen.ingest.values import summary_text
from sitegen.model import ReadOptions, RunData, RunSource, SourceFile, hparam_value

FORMAT = "comet"
METRIC = (b'{"payload":{', b',"type":"metric_msg"}')  # how the client starts and ends a metric line
HIDDEN_FOLDERS = (".cometml-runs",)
KEY = re.compile(r"[0-9a-f]{32}\.zip")
EXPERIMENT, MESSAGES = "experiment.json", "messages.json"
MAX_MEMBER = 1 << 30
AUTO_PARAMS = ("curr_step", "curr_epoch")
SYSTEM = {"hostname": "host", "os": "os", "python_version": "python", "command": "command", "user": "user"}
GIT = {"parent": "git.commit", "origin": "git.remote", "branch": "git.branch"}
SKIPPED_OTHERS = ("offline_experiment", "hasNestedParams")


def claims(filename: str, patterns: Any = None) -> bool:
    return KEY.fullmatch(filename) is not None


def gather(
    dirpath: str, filenames: list[str], dirnames: list[str], archive: Path, roots: tuple[str, ...]
) -> tuple[list[RunSource], set[str]] | None:
    """One run per ``<key>.zip`` of the folder, named ``<folder>/<key>``."""
    zips = sorted(f for f in filenames if f.endswith(".zip") and KEY.fullmatch(f))
    if not zips:
        return None
    directory = Path(dirpath)
    rel = directory.relative_to(archive).as_posix()
    prefix = "" if rel in ("", ".") else rel + "/"
    return [RunSource(prefix + z[:-4], FORMAT, directory, (directory / z,)) for z in zips], set(zips)


def read(source: RunSource, options: ReadOptions = ReadOptions(), *, bulk: bool = True) -> RunData:
    """One offline experiment from its zip. With ``bulk``, the ``metric_msg`` lines as the client
    writes them (the bulk of a run) are cut out and parsed by ``pyarrow.json`` in one pass
    (:func:`_bulk_scalars`), the others one by one; if those lines are not regular, or another
    line holds a metric, every line is replayed by ``json`` (the reference)."""
    run = RunData(name=source.name, format=FORMAT)
    path = source.files[0]
    try:
        zm = read_zip_members(path, options.roots, lambda n: n in (EXPERIMENT, MESSAGES), MAX_MEMBER)
    except OSError as exc:
        run.problems.append(problem(path, exc))
        return run
    damage = zm.problem(path)
    if damage is not None:
        run.problems.append(damage)
    if not zm.names and zm.damaged_at is None:
        run.problems.append(
            Problem(
                str(path),
                0,
                "truncated",
                "empty placeholder archive: the run ended before Comet archived it (its data stayed in a temp folder)",
            )
        )
    intact = zm.size if zm.damaged_at is None else zm.damaged_at
    run.files.append(SourceFile(path, zm.size, intact))
    _experiment(zm.data.get(EXPERIMENT), f"{path}:{EXPERIMENT}", run)
    raw = zm.data.get(MESSAGES)
    if raw is None:
        if zm.names:
            run.problems.append(Problem(str(path), None, "bad-record", f"no {MESSAGES} in the archive"))
        return run
    picked, skip = pick_lines(raw, METRIC[0], METRIC[1]) if bulk else (b"", [])
    lines, _ = parse_lines(raw, f"{path}:{MESSAGES}", run.problems, skip=skip)
    series = Series()
    params: dict[str, Any] = {}
    for _, msg in lines:
        if isinstance(msg, dict) and isinstance(msg.get("payload"), dict):
            if bulk and (msg.get("type") == "metric_msg" or (msg.get("type") == "ws_msg" and "metric" in msg["payload"])):
                return read(source, options, bulk=False)  # scalars outside the picked lines: all in order
            _message(msg.get("type"), msg["payload"], series, params, run)
    run.scalars = series.table()
    if picked:
        table = _bulk_scalars(picked)
        if table is None:
            return read(source, options, bulk=False)
        run.scalars = table
    for name in sorted(params):
        run.hparams[name] = hparam_value(params[name])
    return run


def _bulk_scalars(lines: bytes) -> pa.Table | None:
    """The scalars of ``metric_msg`` lines parsed by ``pyarrow.json``: what :func:`_message`
    makes of them, for the layout the client writes (numbers; a step whole or null; a context
    string or none). None for anything else."""
    try:
        table = pajson.read_json(io.BytesIO(lines), read_options=pajson.ReadOptions(use_threads=False))
        payload = table.column("payload").combine_chunks()
        metric = payload.field("metric")
        name, value, step = metric.field("metricName"), metric.field("metricValue"), metric.field("step")
        wall = payload.field("local_timestamp")
        names = [f.name for f in payload.type]
        context = payload.field("context") if "context" in names else pa.nulls(len(payload), pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, KeyError, AttributeError, TypeError):
        return None
    if not all(numeric(c.type) for c in (value, step, wall)) or not pa.types.is_string(name.type):
        return None
    if not (pa.types.is_string(context.type) or pa.types.is_null(context.type)):
        return None
    ctx = pc.fill_null(context.cast(pa.string()), "")
    tags = pc.if_else(pc.equal(ctx, ""), name, pc.binary_join_element_wise(ctx, name, "_"))
    keep = pc.and_(pc.is_valid(name), pc.is_valid(value))
    return bulk_table(tags.filter(keep), step.filter(keep), pc.divide(wall.cast(pa.float64()), 1000.0).filter(keep), value.filter(keep))


def _experiment(raw: bytes | None, where: str, run: RunData) -> None:
    if raw is None:
        return
    try:
        exp = json.loads(raw)
    except (ValueError, RecursionError):
        run.problems.append(Problem(where, 0, "bad-record", "not valid JSON; the run's project and times not read"))
        return
    if not isinstance(exp, dict):
        return
    for key, name in (("project_name", "experiment"), ("workspace", "workspace"), ("offline_id", "run_id")):
        if isinstance(exp.get(key), str) and exp[key]:
            run.meta[name] = exp[key]
    for key, name in (("start_time", "start_time"), ("stop_time", "end_time")):
        ms = as_float(exp.get(key))
        if ms is not None and ms == ms and abs(ms) < 1e16:
            run.meta[name] = repr(ms / 1000.0)
    tags = exp.get("tags")
    if isinstance(tags, list) and tags:
        run.meta["tags"] = ", ".join(sorted(summary_text(t) for t in tags))


def _message(kind: Any, p: dict[str, Any], series: Series, params: dict[str, Any], run: RunData) -> None:
    if kind == "ws_msg":  # older clients: one message type holding any of these parts
        for part, sub in (("metric", "metric_msg"), ("param", "parameter_msg"), ("params", "parameter_msg")):
            if isinstance(p.get(part), dict):
                _message(sub, p, series, params, run)
        other = p.get("log_other")
        if isinstance(other, dict):
            _message("log_other", {"key": other.get("key"), "value": other.get("val")}, series, params, run)
        if isinstance(p.get("git_meta"), dict):
            _message("git_metadata", {"git_metadata": p["git_meta"]}, series, params, run)
        return
    if kind == "metric_msg":
        m = p.get("metric")
        if not isinstance(m, dict) or not isinstance(m.get("metricName"), str):
            return
        value = as_float(m.get("metricValue"))
        step = as_step(m.get("step"))
        if value is None or (step is None and m.get("step") is not None):
            return
        context = p.get("context")
        tag = f"{context}_{m['metricName']}" if isinstance(context, str) and context else m["metricName"]
        ts = as_float(p.get("local_timestamp"))
        series.add(tag, step, ts / 1000.0 if ts is not None else float("nan"), value)
    elif kind == "parameter_msg":
        for part in ("param", "params"):
            q = p.get(part)
            if isinstance(q, dict) and isinstance(q.get("paramName"), str):
                if q.get("source") == "auto-logged" and q["paramName"] in AUTO_PARAMS:
                    continue
                params[q["paramName"].replace("|", ".")] = q.get("paramValue")
    elif kind == "log_other":
        key, value = p.get("key"), p.get("value")
        if not isinstance(key, str) or key in SKIPPED_OTHERS:
            return
        if key == "Name" and value is not None:
            run.meta["title"] = summary_text(value)
        else:
            run.meta[f"tag:{key}"] = summary_text(value)
    elif kind == "system_details":
        for key, name in SYSTEM.items():
            v = p.get(key)
            if v not in (None, "", []):
                run.meta[f"tag:{name}"] = " ".join(map(str, v)) if isinstance(v, list) else summary_text(v)
    elif kind == "git_metadata":
        g = p.get("git_metadata")
        if isinstance(g, dict):
            for key, name in GIT.items():
                if isinstance(g.get(key), str) and g[key]:
                    run.meta[f"tag:{name}"] = g[key]
