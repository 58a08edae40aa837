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

import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sitegen.errors import Problem
from sitegen.ingest.files import problem, read_regular
from sitegen.ingest.media import image_mime
from sitegen.ingest.protowire import LEN, VARINT, WireError, iter_fields, to_int64
from sitegen.ingest.values import grouped_table, summary_text
from sitegen.ingest.wandb import fast
from sitegen.ingest.wandb.frames import frame_records
from sitegen.model import Image, ReadOptions, RunData, RunSource, SourceFile, flat_hparams

log = logging.getLogger(__name__)
FORMAT = "wandb"
RUN_DIR = re.compile(r"(?:offline-)?run-(\d{8}_\d{6})-([A-Za-z0-9_-]+)")
RUN_FILE = re.compile(r"run-([A-Za-z0-9_-]+)\.wandb")
SYSTEM = ("_step", "_timestamp", "_runtime")
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
    directory = Path(dirpath)
    runs = []
    if groups and "latest-run" in dirnames and os.path.islink(os.path.join(dirpath, "latest-run")):
        taken.add("latest-run")
    for rid, dirs in sorted(groups.items()):
        dirs.sort()
        first = directory / dirs[0][1]
        files = tuple(directory / d / f"run-{rid}.wandb" for _, d in dirs)
        runs.append(RunSource(first.relative_to(archive).as_posix(), FORMAT, first, files))
    own = sorted(f for f in filenames if claims(f))
    if own:
        rel = directory.relative_to(archive).as_posix()
        runs.append(RunSource("." if rel in ("", ".") else rel, FORMAT, directory, tuple(directory / f for f in own)))
        taken.update(own)
    return (runs, taken) if runs else None


@dataclass
class _State:
    """What the files of one run add up to, in record order."""

    tags: dict[str, int] = field(default_factory=dict)
    codes: list[np.ndarray] = field(default_factory=list)
    steps: list[np.ndarray] = field(default_factory=list)
    walls: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    exit: tuple[int, int] | None = None
    start: float | None = None
    media: list[tuple[str, int, float, str]] = field(default_factory=list)  # (tag, step, wall, file name) of images

    def code(self, name: str) -> int:
        return self.tags.setdefault(name, len(self.tags))


def _text(v: Any) -> str:
    return bytes(v).decode("utf-8", errors="replace") if isinstance(v, memoryview) else ""


def key_name(raw: bytes | memoryview) -> str | None:
    """The name of an item from its key fields: ``nested_key`` parts joined by ``.``, else ``key``."""
    key, nested = "", []
    for num, wt, v in iter_fields(raw):
        if num == 1 and wt == LEN:
            key = _text(v)
        elif num == 2 and wt == LEN:
            nested.append(_text(v))
    name = ".".join(nested) if nested else key
    return name or None


def _items(raw: memoryview, number: int) -> list[tuple[str, str]]:
    """(name, value_json) of the items in field ``number`` of a config or summary message."""
    out = []
    for num, wt, v in iter_fields(raw):
        if num == number and wt == LEN:
            name, value = key_name(v), ""  # type: ignore[arg-type]
            for n2, w2, v2 in iter_fields(v):  # type: ignore[arg-type]
                if n2 == 16 and w2 == LEN:
                    value = _text(v2)
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


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _config(raw: memoryview, state: _State) -> None:
    """A ConfigRecord: updates then removes, by key path (nested keys are a path; a flat key is one name)."""
    for num, wt, v in iter_fields(raw):
        if num in (1, 2) and wt == LEN:
            parts, value, flat = [], "", ""
            for n2, w2, v2 in iter_fields(v):  # type: ignore[arg-type]
                if n2 == 1 and w2 == LEN:
                    flat = _text(v2)
                elif n2 == 2 and w2 == LEN:
                    parts.append(_text(v2))
                elif n2 == 16 and w2 == LEN:
                    value = _text(v2)
            parts = parts or ([flat] if flat else [])
            if parts:
                _nested_set(state.config, parts, _json(value), remove=num == 2)


def _run_record(raw: memoryview, state: _State) -> None:
    meta = state.meta
    names = {1: "run_id", 2: "entity", 3: "experiment", 6: "group", 7: "job_type", 8: "title", 9: "notes", 13: "tag:host"}
    tags = []
    for num, wt, v in iter_fields(raw):
        if wt != LEN:
            continue
        if num in names and _text(v):
            meta.setdefault(names[num], _text(v))  # the first file's, for a resumed run
        elif num == 10:
            tags.append(_text(v))
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
        if wt == LEN and num in (1, 2) and _text(v):
            meta["tag:git.remote" if num == 1 else "tag:git.commit"] = _text(v)


def _environment(raw: memoryview, meta: dict[str, str]) -> None:
    args = []
    for num, wt, v in iter_fields(raw):
        if wt == LEN and num == 5:
            args.append(_text(v))
        elif wt == LEN and num in ENV_FIELDS and _text(v):
            meta[f"tag:{ENV_FIELDS[num]}"] = _text(v)
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


def _flat_numbers(obj: Any, prefix: str, out: list[tuple[str, float]]) -> None:
    """Numeric leaves of a nested dict logged as one JSON value (wandb 0.16); media and tables
    (a ``_type`` key) are not charts."""
    if isinstance(obj, dict):
        if "_type" in obj:
            return
        for k, v in obj.items():
            _flat_numbers(v, f"{prefix}.{k}", out)
    elif isinstance(obj, float):
        out.append((prefix, obj))
    elif isinstance(obj, int) and not isinstance(obj, bool):
        out.append((prefix, float(obj) if abs(obj) < 2**1023 else math.copysign(math.inf, obj)))


def _history(
    buf: np.ndarray,
    spans: fast.Fields,
    picked: np.ndarray,
    state: _State,
    path: str,
    offsets: np.ndarray,
    problems: list[Problem],
    raw: bytes | None,
) -> None:
    """The history records ``picked`` (indexes into ``spans``, the Records' top-level fields)."""
    hist = fast.walk(buf, spans.start[picked], spans.stop[picked])
    for h in np.flatnonzero(hist.broken)[:1].tolist():
        problems.append(
            Problem(
                path,
                int(offsets[spans.owner[picked[h]]]),
                "bad-record",
                "a history record is not well-formed; its items before the damage kept",
            )
        )
    n = len(picked)
    steps = np.zeros(n, np.int64)
    st = hist.pick(2)
    if len(st):
        sf = fast.walk(buf, hist.start[st], hist.stop[st])
        nums = sf.pick(1, fast.VARINT)
        steps[hist.owner[st[sf.owner[nums]]]] = sf.value[nums].astype(np.int64)
    it = hist.pick(1)
    row = hist.owner[it]  # history record of each item
    ks, ke, vs, ve, ok = _item_spans(buf, hist.start[it], hist.stop[it])
    interleaved = ok & (vs >= ks) & (vs < ke)
    codes, names = fast.key_codes(buf, ks[ok & ~interleaved], ke[ok & ~interleaved])
    tag_of = np.array([_tag_code(state, b) for b in names] + [-1], np.int64)
    code = np.full(len(it), -1, np.int64)
    code[ok & ~interleaved] = tag_of[codes]
    for i in np.flatnonzero(interleaved).tolist():  # key fields around the value: named one by one
        name = key_name(buf[hist.start[it[i]] : hist.stop[it[i]]].tobytes())  # (the value field is not a key field)
        code[i] = state.code(name) if name else -1
    skip = [c for t, c in state.tags.items() if t == "_runtime" or t.startswith("_wandb")]
    wanted = np.flatnonzero(ok & (code >= 0) & ~np.isin(code, skip))  # (not parsed: values never shown)
    values, numeric = np.full(len(it), np.nan), np.zeros(len(it), bool)
    values[wanted], numeric[wanted] = fast.numbers(buf, vs[wanted], np.maximum(ve, vs)[wanted], raw)
    walls = np.full(n, np.nan)
    for name, target in (("_step", steps), ("_timestamp", walls)):
        c = state.tags.get(name)
        if c is None:
            continue
        sel = np.flatnonzero(numeric & (code == c))
        v = values[sel]
        if name == "_step":
            good = np.isfinite(v) & (np.abs(v) < 2**63)
            target[row[sel[good]]] = v[good].astype(np.int64)
        else:
            target[row[sel]] = v
    system = np.array([state.tags.get(s, -2) for s in SYSTEM])
    keep = numeric & (code >= 0) & ~np.isin(code, system)
    keep &= ~np.isin(code, [c for t, c in state.tags.items() if t.startswith("_wandb")])
    # media and tables (wandb >= 0.2x logs them as leaf items beside a ``<key>._type``): not charts
    typed = {t[: -len("._type")] for t in state.tags if t.endswith("._type")}
    parts = {t: c for t, c in state.tags.items() if any(t.startswith(p + ".") for p in typed)}
    keep &= ~np.isin(code, list(parts.values()))
    for tag in typed:
        c = state.tags.get(tag + ".path")
        for i in np.flatnonzero(code == c).tolist() if c is not None else []:
            _media_item(
                state, tag, int(steps[row[i]]), float(walls[row[i]]), _json(buf[vs[i] : ve[i]].tobytes().decode("utf-8", "replace"))
            )
    sel = np.flatnonzero(keep)
    extra_c, extra_r, extra_v = [], [], []
    lead = buf[np.minimum(vs, len(buf) - 1)]
    for i in np.flatnonzero(ok & ~numeric & (code >= 0) & (lead == ord("{")) & (ve > vs)).tolist():
        obj = _json(buf[vs[i] : ve[i]].tobytes().decode("utf-8", errors="replace"))
        leaves: list[tuple[str, float]] = []
        name = next(t for t, c in state.tags.items() if c == code[i])
        _flat_numbers(obj, name, leaves)
        if isinstance(obj, dict) and obj.get("_type") == "image-file":  # wandb 0.16: the item is the dict
            _media_item(state, name, int(steps[row[i]]), float(walls[row[i]]), obj.get("path"))
        for leaf, number in leaves:
            extra_c.append(state.code(leaf))
            extra_r.append(int(row[i]))
            extra_v.append(number)
    rows = np.concatenate([row[sel], np.array(extra_r, np.int64)])
    state.codes.append(np.concatenate([code[sel], np.array(extra_c, np.int64)]))
    state.steps.append(steps[rows])
    state.walls.append(walls[rows])
    state.values.append(np.concatenate([values[sel], np.array(extra_v, np.float64)]))


def _item_spans(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, ...]:
    """(key start, key stop, value start, value stop, ok) of items: the common layout in one
    pass (:func:`fast.items`), the others walked field by field."""
    ks, ke, vs, ve, ok = fast.items(buf, start, stop)
    ks, ke, vs, ve = ks.copy(), ke.copy(), vs.copy(), ve.copy()
    odd = np.flatnonzero(~ok)
    if len(odd):
        m = len(odd)
        items = fast.walk(buf, start[odd], stop[odd])
        keyf = np.flatnonzero(((items.number == 1) | (items.number == 2)) & (items.wire == LEN))
        valf = items.pick(16)
        has_key = np.zeros(m, bool)
        if len(keyf):
            own = items.owner[keyf]
            firsts = np.concatenate([[True], own[1:] != own[:-1]])
            lasts = np.concatenate([own[1:] != own[:-1], [True]])
            ks[odd[own[firsts]]] = items.tag_at[keyf[firsts]]
            ke[odd[own[lasts]]] = items.stop[keyf[lasts]]
            has_key[own] = True
        got_value = np.zeros(m, bool)
        got_value[items.owner[valf]] = True
        vs[odd[items.owner[valf]]], ve[odd[items.owner[valf]]] = items.start[valf], items.stop[valf]  # the last one wins
        ok[odd] = has_key & got_value & ~items.broken
    return ks, ke, vs, ve, ok


MEDIA_NAME = re.compile(r"media/images/([A-Za-z0-9_.\-]+)")


def _media_item(state: _State, tag: str, step: int, wall: float, path: Any) -> None:
    """An image a history row names (its file under ``files/media/images/``): only the file
    name is kept, and only when it is a plain name; the file is found by listing that folder."""
    m = MEDIA_NAME.fullmatch(path) if isinstance(path, str) else None
    if m and not m.group(1).startswith("."):
        state.media.append((tag, step, wall, m.group(1)))


def _images(run: RunData, state: _State, run_dir: Path, options: ReadOptions) -> None:
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


def _tag_code(state: _State, raw: bytes) -> int:
    try:
        name = key_name(raw)
    except WireError:
        return -1
    return state.code(name) if name else -1


def _decode(raw: bytes, path: str, state: _State, problems: list[Problem], recs: Any) -> None:
    top = fast.records(recs.buf, recs.start, recs.end)
    buf = recs.buf
    bad = np.flatnonzero(top.broken)
    if len(bad):
        problems.append(Problem(path, int(recs.offset[bad[0]]), "bad-record", f"{len(bad)} record(s) not well-formed protobuf; skipped"))
    fine = ~top.broken[top.owner]
    hist = np.flatnonzero(fine & (top.number == HISTORY) & (top.wire == LEN))
    if len(hist):
        _history(buf, top, hist, state, path, recs.offset, problems, raw if len(raw) == len(buf) else None)
    others = np.flatnonzero(fine & np.isin(top.number, (SUMMARY, CONFIG, RUN, EXIT, ENVIRONMENT)) & (top.wire == LEN))
    summaries = others[top.number[others] == SUMMARY]
    _summary(buf, top, summaries, state)
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


def _summary(buf: np.ndarray, top: fast.Fields, picked: np.ndarray, state: _State) -> None:
    """Summary records folded in order: per key, the last update or remove wins."""
    if not len(picked):
        return
    msgs = fast.walk(buf, top.start[picked], top.stop[picked])
    ops = np.flatnonzero(((msgs.number == 1) | (msgs.number == 2)) & (msgs.wire == LEN))
    ks, ke, vs, ve, ok = _item_spans(buf, msgs.start[ops], msgs.stop[ops])
    removes = msgs.number[ops] == 2  # an item of key fields only: its bytes are its key
    ks[removes], ke[removes], ok[removes] = msgs.start[ops[removes]], msgs.stop[ops[removes]], True
    idx = np.flatnonzero(ok)
    if not len(idx):
        return
    codes, names = fast.key_codes(buf, ks[idx], ke[idx])
    label = []  # a key's name: ``key`` and a one-part ``nested_key`` name the same key
    ids: dict[str, int] = {}
    for raw_key in names:
        try:
            name = key_name(raw_key) or ""
        except WireError:
            name = ""
        label.append(ids.setdefault(name, len(ids)))
    by_name = np.array(label, np.int64)[codes]
    found, from_end = np.unique(by_name[::-1], return_index=True)
    named = list(ids)
    for k, j in zip(found.tolist(), (len(by_name) - 1 - from_end).tolist()):  # per key, its last operation
        op = int(idx[j])
        name = named[k]
        if not name:
            continue
        if msgs.number[ops[op]] == 2:
            state.summary.pop(name, None)
            continue
        value = buf[vs[op] : ve[op]].tobytes().decode("utf-8", errors="replace")
        state.summary[name] = value


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
    state = _State()
    for path in source.files:
        try:
            raw = read_regular(path, options.roots)
        except OSError as exc:
            run.problems.append(problem(path, exc))
            continue
        buf = np.frombuffer(raw, np.uint8)
        recs = frame_records(buf, str(path), options.verify, raw)
        run.problems += recs.problems
        if recs.open_at is not None:
            log.info("%s: offset %d: a record still being written (read once complete)", path, recs.open_at)
        run.files.append(SourceFile(path, len(buf), recs.intact))
        _decode(raw, str(path), state, run.problems, recs)
        _images(run, state, path.parent, options)
    _finish(run, state)
    return run


def _finish(run: RunData, state: _State) -> None:
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
        _summary_meta(_json(value), name, run.meta)
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
