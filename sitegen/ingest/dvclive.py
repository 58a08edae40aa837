"""dvclive folders, read without dvclive or dvc.

A run is a folder with ``plots/metrics/`` (dvclive 2-3), ``scalars/`` (1.x), or a folder named
``dvclive`` holding ``*.tsv`` files (0.x), ``metrics.json`` or ``params.yaml``. Each TSV under
those is one tag, named by its path without ``.tsv`` (``plots/metrics/train/loss.tsv`` ->
``train/loss``): ``step`` the step, ``timestamp`` (milliseconds) the wall time, the last column
the value (``nan``/``inf`` kept); the scalars are grouped by tag in name order. ``metrics.json`` (or the 1.x ``<folder>.json`` beside the
folder) -> ``meta["summary.<name>"]`` with nested names joined by ``/``; ``params.yaml`` ->
hparams. ``dvc.yaml``/``dvc.lock`` in the folder or its parent (inside the archive) -> the run's
provenance: each stage's command, its dependencies and outputs with hash and size, and its
params (``meta["tag:dvc.lock <stage> ..."]``); a ``dvc.yaml`` beside a ``dvc.lock`` is not read
(the lock records what ran).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from sitegen.errors import Problem
from sitegen.ingest import yamlish
from sitegen.ingest.csvtyped import read_wide, steps_of
from sitegen.ingest.files import read_or_note
from sitegen.ingest.values import grouped_table, pooled, summary_text
from sitegen.model import ReadOptions, RunData, RunSource, SourceFile, flat_hparams

FORMAT = "dvclive"
SUMMARY = "metrics.json"
PARAMS = "params.yaml"
PIPELINE = ("dvc.yaml", "dvc.lock")
MAX_TSV = 10_000


def claims(filename: str, patterns: Any = None) -> bool:
    return False


def _tsvs(root: str) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        out += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".tsv") and not f.startswith(".")]
        if len(out) > MAX_TSV:
            break
    return out[:MAX_TSV]


def gather(
    dirpath: str, filenames: list[str], dirnames: list[str], archive: Path, roots: tuple[str, ...]
) -> tuple[list[RunSource], set[str]] | None:
    named = os.path.basename(dirpath) == "dvclive" and "dvclive" not in dirnames  # not a repository named so
    tsv_dirs = []
    if "plots" in dirnames and os.path.isdir(os.path.join(dirpath, "plots", "metrics")):
        tsv_dirs.append(os.path.join(dirpath, "plots", "metrics"))
    if "scalars" in dirnames and (named or os.path.isfile(dirpath + ".json")):
        tsv_dirs.append(os.path.join(dirpath, "scalars"))
    direct = sorted(f for f in filenames if f.endswith(".tsv")) if named else []
    if not tsv_dirs and not direct and not (named and (SUMMARY in filenames or PARAMS in filenames)):
        return None
    directory = Path(dirpath)
    files = [directory / f for f in direct]
    for root in tsv_dirs:
        files += [Path(p) for p in _tsvs(root)]
    files += [directory / f for f in (SUMMARY, PARAMS) if f in filenames]
    inside = directory != archive and Path(dirpath).resolve() != archive.resolve()
    if inside and os.path.isfile(dirpath + ".json"):
        files.append(Path(dirpath + ".json"))
    for folder in (directory, directory.parent) if inside else (directory,):
        files += [folder / f for f in PIPELINE if os.path.isfile(folder / f)]
    rel = directory.relative_to(archive).as_posix()
    name = "." if rel in ("", ".") else rel
    return [RunSource(name, FORMAT, directory, tuple(files))], {"plots", "scalars", *direct, SUMMARY, PARAMS, *PIPELINE}


def _tag(path: Path, directory: Path) -> str:
    for root in (directory / "plots" / "metrics", directory / "scalars", directory):
        try:
            return path.relative_to(root).as_posix()[: -len(".tsv")]
        except ValueError:
            continue
    return path.stem


def _read_tsv(path: Path, run: RunData, roots: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    data = read_or_note(path, roots, run.problems)
    if data is None:
        return None
    wide = read_wide(path, data, run.problems, delimiter="\t")
    run.files.append(SourceFile(path, len(data), wide.decoded))
    header = wide.header
    value_cols = [j for j, h in enumerate(header) if h not in ("step", "timestamp") and h]
    if not value_cols or wide.nrows == 0:
        if data.strip() and not value_cols:
            run.problems.append(Problem(str(path), 0, "bad-record", "no value column; nothing read"))
        return None
    j = value_cols[-1]
    n = wide.nrows
    if "step" in header:
        s = header.index("step")
        step, ok = steps_of(wide.values[s][:n], wide.present[s][:n])
    else:
        step, ok = np.arange(n, dtype=np.int64), None
    if "timestamp" in header:
        t = header.index("timestamp")
        wall = np.divide(wide.values[t][:n], 1000.0, out=pooled(n, np.float64))
        if not wide.present[t][:n].all():
            wall[~wide.present[t][:n]] = np.nan
    else:
        wall = np.full(n, np.nan)
    keep = wide.present[j][:n] if ok is None else ok & wide.present[j][:n]
    if keep.all():  # every row (the usual file): the parsed columns as they are
        return step, wall, wide.values[j][:n]
    return step[keep], wall[keep], wide.values[j][:n][keep]


def _summary(value: Any, prefix: str, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _summary(v, f"{prefix}/{k}" if prefix else str(k), out)
    elif prefix and prefix != "step":
        out[prefix] = summary_text(value)


def _read_json(path: Path, run: RunData, roots: tuple[str, ...]) -> Any:
    data = read_or_note(path, roots, run.problems)
    if data is None:
        return None
    try:
        value = json.loads(data.decode("utf-8"))
        run.files.append(SourceFile(path, len(data), len(data)))
        return value
    except (ValueError, RecursionError) as exc:
        pos = getattr(exc, "pos", None)
        offset = len(data.decode("utf-8", errors="replace")[:pos].encode()) if isinstance(pos, int) else 0
        run.problems.append(Problem(str(path), offset, "bad-record", f"not valid JSON ({exc}); summary not read"))
        run.files.append(SourceFile(path, len(data), 0))
        return None


def _size(entry: dict[str, Any]) -> str:
    parts = []
    for key in ("md5", "etag", "checksum"):
        if key in entry:
            parts.append(f"{key} {entry[key]}")
    if "size" in entry:
        parts.append(f"{entry['size']} bytes")
    if "nfiles" in entry:
        parts.append(f"{entry['nfiles']} files")
    return " · ".join(parts)


def _provenance(path: Path, value: Any, meta: dict[str, str]) -> None:
    """Stages of a dvc.yaml/dvc.lock as ``tag:`` entries, which the run page shows as provenance."""
    stages = value.get("stages") if isinstance(value, dict) else None
    if not isinstance(stages, dict):
        return
    prefix = f"tag:{path.name}"
    for stage, body in stages.items():
        if not isinstance(body, dict):
            continue
        cmd = body.get("cmd")
        if cmd is not None:
            meta[f"{prefix} {stage} cmd"] = "\n".join(map(str, cmd)) if isinstance(cmd, list) else str(cmd)
        for kind in ("deps", "outs", "metrics", "plots"):
            for entry in body.get(kind) or []:
                if isinstance(entry, dict) and "path" in entry:
                    meta[f"{prefix} {stage} {kind} {entry['path']}"] = _size(entry)
                elif isinstance(entry, dict) and len(entry) == 1:
                    meta[f"{prefix} {stage} {kind} {next(iter(entry))}"] = ""
                elif isinstance(entry, str):
                    meta[f"{prefix} {stage} {kind} {entry}"] = ""
        params = body.get("params")
        if isinstance(params, dict):
            for file, values in params.items():
                for k, v in flat_hparams(values if isinstance(values, dict) else {}).items():
                    meta[f"{prefix} {stage} params {file}:{k}"] = summary_text(v)
        elif isinstance(params, list):
            for p in params:
                meta[f"{prefix} {stage} params {p if isinstance(p, str) else summary_text(p)}"] = ""


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    """One dvclive folder: every TSV in path order, then the summary, params and pipeline."""
    run = RunData(name=source.name, format=FORMAT)
    directory = Path(source.directory)
    series: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for path in sorted((p for p in source.files if p.suffix == ".tsv"), key=lambda p: _tag(p, directory)):
        got = _read_tsv(path, run, options.roots)
        tag = _tag(path, directory)
        if got is not None and len(got[0]):
            old = series.get(tag)  # the same name under plots/metrics/ and an older scalars/
            series[tag] = (
                got
                if old is None
                else (np.concatenate([old[0], got[0]]), np.concatenate([old[1], got[1]]), np.concatenate([old[2], got[2]]))
            )
    run.scalars = grouped_table(series)
    summary: dict[str, str] = {}
    locked = {p.parent for p in source.files if p.name == "dvc.lock"}
    for path in source.files:
        if path.suffix == ".tsv":
            continue
        if path.name == SUMMARY or (path.suffix == ".json" and path.parent != directory):
            value = _read_json(path, run, options.roots)
            if value is not None:
                _summary(value, "", summary)
        elif path.name == PARAMS and path.parent == directory:
            value = yamlish.read_file(path, run, options.roots)
            if isinstance(value, dict):
                run.hparams = flat_hparams(value)
        elif path.name in PIPELINE:
            if path.name == "dvc.yaml" and path.parent in locked:
                continue  # the lock records what ran, with hashes
            _provenance(path, yamlish.read_file(path, run, options.roots), run.meta)
    for k, v in summary.items():
        run.meta[f"summary.{k}"] = v
    return run
