"""Weights & Biases run files (``wandb/{offline-,}run-<time>-<id>/run-<id>.wandb``), read
without the ``wandb`` or ``protobuf`` packages.

The ``.wandb`` file is the run's transaction log (the ``files/`` folder beside it is partial
offline): framing in :mod:`.frames`, ``wandb_internal.Record`` messages walked by :mod:`.fast`.
Taken: history rows -> scalars (tag: the key, nested keys joined by ``.``; step: the ``_step``
item, else the record's step; wall time: ``_timestamp``; wandb 0.16 logs a nested dict as JSON
under one key, 0.31 splits it into ``nested_key`` items: both give ``a.b``); the config (the run
record's, then update/remove records in order) -> hparams; summary records folded in order ->
``meta["summary.<key>"]``; the run record -> ``title``, ``experiment`` (project), ``run_id``,
``entity``, ``group``, ``job_type``, ``tags``, ``notes``, ``start_time``, host and git remote and
commit (``tag:`` keys, shown as environment/provenance); environment records -> ``tag:`` keys;
the exit record -> ``status`` (FINISHED, FAILED; RUNNING without one), ``exit_code``,
``end_time``. Keys ``_step``, ``_timestamp``, ``_runtime`` and ``_wandb.*`` are not charts.

A resumed run (one id in several folders) is one run, named after its first folder: its files
are read in folder-time order and fold into one history, config and summary (a later file's run
record fills what an earlier left empty; its exit record wins).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from sitegen.errors import Problem
from sitegen.ingest.files import problem, read_regular, read_regular_array
from sitegen.ingest.media import image_mime
from sitegen.ingest.protowire import LEN, VARINT, WireError, iter_fields, to_int64
from sitegen.ingest.values import grouped_table, summary_text
from sitegen.ingest.wandb import fast
from sitegen.ingest.wandb.frames import frame_records
from sitegen.ingest.wandb.history import State, history_rows, json_value, key_name, text
from sitegen.ingest.wandb.summary import fold_summary
from sitegen.model import Image, ReadOptions, RunData, RunSource, SourceFile, flat_hparams

log = logging.getLogger(__name__)
FORMAT = "wandb"
RUN_DIR = re.compile(r"(?:offline-)?run-(\d{8}_\d{6})-([A-Za-z0-9_-]+)")
RUN_FILE = re.compile(r"run-([A-Za-z0-9_-]+)\.wandb")
#: Record fields (wandb/proto/wandb_internal.proto)
HISTORY, SUMMARY, CONFIG, RUN, EXIT, ENVIRONMENT = 2, 3, 5, 17, 18, 26
ENV_FIELDS = {1: "os", 2: "python", 5: "source.args", 6: "source.program", 7: "source.code_path", 12: "host",
              14: "python.executable", 18: "gpu", 25: "cuda"}  # fmt: skip
ENV_COUNTS = {16: "cpu_count", 17: "cpu_count_logical", 19: "gpu_count"}


def claims(filename: str, patterns: Any = None) -> bool:
    return RUN_FILE.fullmatch(filename) is not None


def gather(
    dirpath: str, filenames: list[str], dirnames: list[str], archive: Path, roots: tuple[str, ...] = ()
) -> tuple[list[RunSource], set[str]] | None:
    """The run folders of a ``wandb/`` folder, one run per id (a resumed run's folders are one
    run); the ``latest-run`` link is skipped. A run file right in ``dirpath`` makes it a run."""
    groups: dict[str, list[tuple[str, str]]] = {}
    taken: set[str] = set()
    for d in dirnames:
        m = RUN_DIR.fullmatch(d)
        if m and os.path.isfile(os.path.join(dirpath, d, f"run-{m.group(2)}.wandb")):
            groups.setdefault(m.group(2), []).append((m.group(1), d))
            taken.add(d)
    own = sorted(f for f in filenames if claims(f))
    if not groups and not own:
        return None  # (asked of every folder of the archive)
    directory = Path(dirpath)
    runs = []
    if groups and "latest-run" in dirnames:  # a link to the newest run folder (a copy of it after `cp -L`)
        taken.add("latest-run")
    for rid, dirs in sorted(groups.items()):
        dirs.sort()
        first = directory / dirs[0][1]
        files = tuple(directory / d / f"run-{rid}.wandb" for _, d in dirs)
        runs.append(RunSource(first.relative_to(archive).as_posix(), FORMAT, first, files))
    if own:
        rel = directory.relative_to(archive).as_posix()
        runs.append(RunSource("." if rel in ("", ".") else rel, FORMAT, directory, tuple(directory / f for f in own)))
        taken.update(own)
    return (runs, taken) if runs else None


def _items(raw: memoryview, number: int) -> list[tuple[str, str]]:
    """(name, value_json) of the items in field ``number`` of a config or summary message."""
    out = []
    for num, wt, v in iter_fields(raw):
        if num == number and wt == LEN:
            name, value = key_name(v), ""  # type: ignore[arg-type]
            for n2, w2, v2 in iter_fields(v):  # type: ignore[arg-type]
                if n2 == 16 and w2 == LEN:
                    value = text(v2)
            if name:
                out.append((name, value))
    return out


def _nested_set(target: dict[str, Any], parts: list[str], value: Any, remove: bool = False) -> None:
    for p in parts[:-1]:
        nxt = target.get(p)
        if not isinstance(nxt, dict):
            if remove:
                return
            nxt = target[p] = {}
        target = nxt
    if remove:
        target.pop(parts[-1], None)
    else:
        target[parts[-1]] = value


def _config(raw: memoryview, state: State) -> None:
    """A ConfigRecord: updates then removes, by key path (nested keys are a path; a flat key is one name)."""
    for num, wt, v in iter_fields(raw):
        if num in (1, 2) and wt == LEN:
            parts, value, flat = [], "", ""
            for n2, w2, v2 in iter_fields(v):  # type: ignore[arg-type]
                if n2 == 1 and w2 == LEN:
                    flat = text(v2)
                elif n2 == 2 and w2 == LEN:
                    parts.append(text(v2))
                elif n2 == 16 and w2 == LEN:
                    value = text(v2)
            parts = parts or ([flat] if flat else [])
            if parts:
                _nested_set(state.config, parts, json_value(value), remove=num == 2)


def _run_record(raw: memoryview, state: State) -> None:
    meta = state.meta
    names = {1: "run_id", 2: "entity", 3: "experiment", 6: "group", 7: "job_type", 8: "title", 9: "notes", 13: "tag:host"}
    tags = []
    for num, wt, v in iter_fields(raw):
        if wt != LEN:
            continue
        if num in names and text(v):
            meta.setdefault(names[num], text(v))  # the first file's, for a resumed run
        elif num == 10:
            tags.append(text(v))
        elif num == 4:
            _config(v, state)  # type: ignore[arg-type]
        elif num == 5:
            for name, value in _items(v, 1):  # type: ignore[arg-type]
                state.summary[name] = value
        elif num == 17:
            ts = {n2: val for n2, w2, val in iter_fields(v) if w2 == VARINT and isinstance(val, int)}  # type: ignore[arg-type]
            if state.start is None:  # (a resumed run's record repeats the run's own start)
                state.start = to_int64(ts.get(1, 0)) + ts.get(2, 0) / 1e9
        elif num == 21:
            _git(v, meta)  # type: ignore[arg-type]
    if tags:
        meta["tags"] = ", ".join(tags)


def _git(raw: memoryview, meta: dict[str, str]) -> None:
    for num, wt, v in iter_fields(raw):
        if wt == LEN and num in (1, 2) and text(v):
            meta["tag:git.remote" if num == 1 else "tag:git.commit"] = text(v)


def _environment(raw: memoryview, meta: dict[str, str]) -> None:
    args = []
    for num, wt, v in iter_fields(raw):
        if wt == LEN and num == 5:
            args.append(text(v))
        elif wt == LEN and num in ENV_FIELDS and text(v):
            meta[f"tag:{ENV_FIELDS[num]}"] = text(v)
        elif wt == LEN and num == 9:
            _git(v, meta)  # type: ignore[arg-type]
        elif wt == VARINT and num in ENV_COUNTS:
            meta[f"tag:{ENV_COUNTS[num]}"] = str(v)
    if args:
        meta["tag:source.args"] = " ".join(args)


def _exit(raw: memoryview) -> tuple[int, int]:
    code = runtime = 0
    for num, wt, v in iter_fields(raw):
        if wt == VARINT and num == 1:
            code = to_int64(v)  # type: ignore[arg-type]
        elif wt == VARINT and num == 2:
            runtime = to_int64(v)  # type: ignore[arg-type]
    return code, runtime


def _images(run: RunData, state: State, run_dir: Path, options: ReadOptions) -> None:
    """The images of ``state.media`` whose files the run folder holds (matched against a listing
    of ``files/media/images/``, never a path made from the log), real images only."""
    folder = run_dir / "files" / "media" / "images"
    try:
        listed = set(os.listdir(folder))
    except OSError:
        listed = set()
    for tag, step, wall, name in state.media:
        found = next((n for n in listed if n == name), None)
        if found is None:
            continue
        try:
            data = read_regular(folder / found, options.roots)
        except OSError as exc:
            run.problems.append(problem(folder / found, exc))
            continue
        mime = image_mime(data)
        if mime is None:
            run.problems.append(Problem(str(folder / found), None, "bad-image", "not a PNG/JPEG/GIF/WebP image; not shown"))
        elif len(data) > options.max_image_bytes:
            run.problems.append(Problem(str(folder / found), None, "too-large", f"image of {len(data)} bytes over the limit; not shown"))
        else:
            run.images.append(Image(tag, step, wall, data, mime))
    state.media.clear()


def _decode(size: int, path: str, state: State, problems: list[Problem], recs: Any) -> None:
    """The records of a file of ``size`` bytes (``recs``: its framing) into ``state``."""
    top = fast.records(recs.buf, recs.start, recs.end)
    buf = recs.buf
    bad = np.flatnonzero(top.broken)
    if len(bad):
        problems.append(Problem(path, int(recs.offset[bad[0]]), "bad-record", f"{len(bad)} record(s) not well-formed protobuf; skipped"))
    fine = ~top.broken[top.owner]
    hist = np.flatnonzero(fine & (top.number == HISTORY) & (top.wire == LEN))
    if len(hist):
        history_rows(buf, top, hist, state, path, recs.offset, problems, size)
    others = np.flatnonzero(fine & np.isin(top.number, (SUMMARY, CONFIG, RUN, EXIT, ENVIRONMENT)) & (top.wire == LEN))
    summaries = others[top.number[others] == SUMMARY]
    fold_summary(buf, top, summaries, state, size)
    for i in others[top.number[others] != SUMMARY].tolist():
        msg = memoryview(buf[top.start[i] : top.stop[i]].tobytes())
        try:
            num = int(top.number[i])
            if num == CONFIG:
                _config(msg, state)
            elif num == RUN:
                _run_record(msg, state)
            elif num == ENVIRONMENT:
                _environment(msg, state.meta)
            elif num == EXIT:
                state.exit = _exit(msg)
        except WireError as exc:
            problems.append(Problem(path, int(recs.offset[top.owner[i]]), "bad-record", f"record not well-formed ({exc}); skipped"))


def _summary_meta(obj: Any, name: str, meta: dict[str, str]) -> None:
    """A summary value as ``summary.<name>`` lines: a dict by its leaves, media and tables left out."""
    if isinstance(obj, dict):
        if "_type" not in obj:
            for k, v in obj.items():
                _summary_meta(v, f"{name}.{k}", meta)
    else:
        meta[f"summary.{name}"] = summary_text(obj)


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    """One run from its ``.wandb`` file(s) (several: a resumed run, in folder-time order)."""
    run = RunData(name=source.name, format=FORMAT)
    state = State()
    for path in source.files:
        try:
            buf = read_regular_array(path, options.roots)  # (an array: far fewer page faults than bytes)
        except OSError as exc:
            run.problems.append(problem(path, exc))
            continue
        recs = frame_records(buf, str(path), options.verify)
        run.problems += recs.problems
        if recs.open_at is not None:
            log.info("%s: offset %d: a record still being written (read once complete)", path, recs.open_at)
        run.files.append(SourceFile(path, len(buf), recs.intact))
        _decode(len(buf), str(path), state, run.problems, recs)
        _images(run, state, path.parent, options)
    _finish(run, state)
    return run


def _finish(run: RunData, state: State) -> None:
    if state.codes:
        codes = np.concatenate(state.codes)
        steps, walls, values = np.concatenate(state.steps), np.concatenate(state.walls), np.concatenate(state.values)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(state.tags) + 1))
        series = {}
        for tag, c in state.tags.items():
            sel = order[bounds[c] : bounds[c + 1]]
            if len(sel):
                series[tag] = (steps[sel], walls[sel], values[sel])
        run.scalars = grouped_table(series)
    config = {k: v for k, v in state.config.items() if k != "_wandb"}
    flat_hparams(config, "", run.hparams)
    for name, value in state.summary.items():
        if name.startswith("_"):
            continue
        _summary_meta(json_value(value), name, run.meta)
    run.meta.update(state.meta)
    run.meta.setdefault("title", state.meta.get("run_id", run.name))
    if state.start is not None:
        run.meta["start_time"] = repr(state.start)
    if state.exit is not None:
        run.meta["status"] = "FINISHED" if state.exit[0] == 0 else "FAILED"
        run.meta["exit_code"] = str(state.exit[0])
        # offline runs leave the exit record's runtime 0: the last wall time then
        walls = np.concatenate([np.zeros(0), *state.walls])
        ends = [state.start + state.exit[1]] if state.start is not None else []
        ends += [float(np.nanmax(walls))] if np.isfinite(walls).any() else []
        if ends:
            run.meta["end_time"] = repr(max(ends))
    else:
        run.meta["status"] = "RUNNING"
