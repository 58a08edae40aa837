"""What a complete run page shows beyond charts, read from the run and its folder: environment,
provenance, notes, artifacts and the full-resolution scalar table of the downloads.

Sources, in order: text summaries whose tag names the environment (``environment``, ``env``,
``system``), an ``env.json`` / ``environment.txt`` (or .yaml) file in the run folder, and MLflow
tags (``RunData.meta`` keys ``tag:...``). Every value is text from a log: templates escape it.
Files are read through :func:`sitegen.fileio.open_regular`: nothing outside the build's roots.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path, PurePosixPath

import pyarrow as pa

from sitegen.errors import Problem, shown
from sitegen.fileio import OutsideRoots, check_inside, open_regular, sha256_file
from sitegen.model import (
    Artifact,
    Environment,
    RunData,
    RunDetails,
    SiteRun,
    base_tag,
    grouped_columns,
    numeric_array,
    tag_groups,
    text_value,
)
from sitegen.prepare.hparams import parse_config

log = logging.getLogger(__name__)

ENV_TAG = re.compile(r"(^|[/_.\- ])(env|environment|system|sysinfo|platform)($|[/_.\- ])", re.I)
ENV_FILES = ("env.json", "environment.json", "env.yaml", "env.yml", "environment.yaml", "environment.yml", "environment.txt", "env.txt")
NOTE_FILES = ("README.md", "NOTES.md", "readme.md", "notes.md", "README.markdown")
PROVENANCE = re.compile(r"(data|dataset|commit|git|source|provenance|lineage|checksum|revision|dvc)", re.I)
ENV_KEY = re.compile(
    r"(python|torch|pytorch|tensorflow|jax|paddle|cuda|cudnn|nccl|gpu|device|host|node|os|platform|driver|version|cpu)", re.I
)
#: fingerprint fields: (catalog key suffix, pattern on the flattened key)
FINGERPRINT = (
    ("python", re.compile(r"^(python|python[._ ]?version|sys\.version)$", re.I)),
    ("framework", re.compile(r"^(torch|pytorch|tensorflow|tf|jax|paddle|paddlepaddle|mxnet|mindspore)([._ ]?version)?$", re.I)),
    ("cuda", re.compile(r"^(cuda|cuda[._ ]?version)$", re.I)),
    ("gpu", re.compile(r"^(gpu|gpus|gpu[._ ]?name|device|gpu[._ ]?model)$", re.I)),
    ("host", re.compile(r"^(host|hostname|node|machine)$", re.I)),
)
MAX_HASH_BYTES = 256 * 1024 * 1024
MAX_ARTIFACTS = 1000
MAX_FILE_CHARS = 200_000


def _read_text(path: Path, roots: tuple[str, ...], problems: list[Problem]) -> str | None:
    """A text file of the run folder (None: missing, too large or unreadable; outside the
    roots: None and a problem)."""
    try:
        fd, size = open_regular(path, roots)
    except OutsideRoots as exc:
        problems.append(exc.problem())
        return None
    except OSError:
        return None
    with open(fd, "rb") as f:
        try:
            if size > MAX_FILE_CHARS * 4:
                return None
            return f.read().decode("utf-8", errors="replace")[:MAX_FILE_CHARS]
        except OSError:
            return None


def _present(directory: Path, names: tuple[str, ...]) -> list[str]:
    """Those of ``names`` the folder holds, in order: one listing instead of a failed ``stat``
    per name (13 per run page). All of them when the folder cannot be listed (then each is
    tried, as before)."""
    try:
        here = set(os.listdir(directory))
    except OSError:
        return list(names)
    return [n for n in names if n in here]


def environment(
    datas: list[RunData], directory: Path | None, roots: tuple[str, ...] = (), problems: list[Problem] | None = None
) -> Environment:
    env = Environment()
    for d in datas:
        newest: dict[str, tuple[int, str]] = {}
        for tx in d.texts:
            if ENV_TAG.search(base_tag(tx.tag)) and (tx.tag not in newest or tx.step >= newest[tx.tag][0]):
                newest[tx.tag] = (tx.step, tx.text)
        for tag in sorted(newest):
            parsed = parse_config(newest[tag][1])
            if parsed:
                env.items.update({k: text_value(v) for k, v in parsed.items()})
            else:
                env.raw.append((base_tag(tag), newest[tag][1]))
    if directory is not None:
        for name in _present(directory, ENV_FILES):
            text = _read_text(directory / name, roots, [] if problems is None else problems)
            if text is None:
                continue
            parsed = parse_config(text)
            if parsed:
                env.items.update({k: text_value(v) for k, v in parsed.items()})
            else:
                env.raw.append((name, text))
    for d in datas:
        for k, v in sorted(d.meta.items()):
            if not k.startswith("tag:"):
                continue
            key = k[4:]
            if PROVENANCE.search(key):
                env.provenance[key] = v
            elif ENV_KEY.search(key):
                env.items.setdefault(key, v)
    for fname, pattern in FINGERPRINT:
        for k in sorted(env.items):
            if pattern.match(k.rsplit(".", 1)[-1]) or pattern.match(k):
                env.fingerprint.append((fname, k, env.items[k]))
                break
    for k in list(env.items):
        if PROVENANCE.search(k):
            env.provenance.setdefault(k, env.items.pop(k))
    return env


def notes(directory: Path | None, roots: tuple[str, ...] = (), problems: list[Problem] | None = None) -> str | None:
    if directory is None:
        return None
    for name in _present(directory, NOTE_FILES):
        path = directory / name
        if path.is_file():
            return _read_text(path, roots, [] if problems is None else problems)
    return None


def _resolved(path: Path) -> Path:
    """``path.resolve()``, or the path itself for a symlink loop (reported by the scan)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def artifacts(
    datas: list[RunData],
    directory: Path | None,
    sub_dirs: list[Path],
    run_dirs: frozenset = frozenset(),
    roots: tuple[str, ...] = (),
    problems: list[Problem] | None = None,
) -> list[Artifact]:
    """Files of the run folder other than logs and sub-runs (MLflow: the reader's list), listed,
    never copied. Logs are told apart by inode, not by resolved path: resolving every file of
    every run (a system call per path component) cost more than the rest of the listing; only
    symlinks are resolved, and those leading outside ``roots`` are refused."""
    problems = [] if problems is None else problems
    listed = [a for d in datas for a in d.artifacts]
    if listed or directory is None or datas[0].format == "mlflow":
        return sorted(listed, key=lambda a: a.path)
    logs = set()
    for d in datas:
        for f in d.files:
            try:
                st = os.stat(f.path)
                logs.add((st.st_dev, st.st_ino))
            except OSError:
                pass
    skip_dirs = {p.resolve() for p in sub_dirs}  # run_dirs: every run's folder, already resolved
    found: list[tuple[str, Path, int]] = []
    todo = [(str(directory.resolve()), "")]  # depth first, names in order (as os.walk does)
    while todo and len(found) < MAX_ARTIFACTS:
        folder, rel = todo.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        below = []
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    r = _resolved(Path(e.path))
                    if r not in skip_dirs and r not in run_dirs:
                        below.append((e.path, f"{rel}{e.name}/"))
                    continue
                if "tfevents" in e.name or e.name in NOTE_FILES or len(found) >= MAX_ARTIFACTS:
                    continue
                if e.is_symlink():
                    check_inside(e.path, roots)
                st = e.stat()  # (through a symlink, as is_file does)
            except OutsideRoots as exc:
                problems.append(exc.problem())
                continue
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in logs:
                found.append((rel + e.name, Path(e.path), st.st_size))
        todo.extend(reversed(below))
    out = []
    for rel, path, size in sorted(found):
        try:
            out.append(Artifact(shown(rel), size, sha256_file(path, roots=roots)[0] if size <= MAX_HASH_BYTES else ""))
        except OutsideRoots as exc:  # (the link changed since it was listed)
            problems.append(exc.problem())
        except OSError as exc:
            log.warning("%s: cannot read artifact: %s", path, exc)
    return out


def scalar_table(run_name: str, datas: list[RunData], labels: list[str]) -> pa.Table:
    """Every scalar record of the run and its sub-runs, full resolution, grouped by series and
    tag (in write order within each); ``series`` and ``tag`` are dictionary columns. Sorted and
    written through the tags' dictionary codes: sorting and hashing the strings themselves cost
    more than decoding the run."""
    import numpy as np

    names: list[str] = []
    code_of: dict[str, int] = {}
    series, tags, parts = [], [], []
    items = sorted(((label, d) for d, label in zip(datas, labels) if d.scalars.num_rows), key=lambda x: x[0])
    for k, (_label, d) in enumerate(items):
        g = tag_groups(d.scalars)
        t = d.scalars.select(["step", "wall_time", "value"])
        if not g.in_place:  # numpy's gather (Arrow's take imports pyarrow.compute), shared with the chart lines
            cols = grouped_columns(d.scalars)[1]
            t = pa.table({c: numeric_array(cols[c], dt) for c, dt in zip(t.column_names, ("<i8", "<f8", "<f8"))}, schema=t.schema)
        glob = np.array([code_of.setdefault(name, len(code_of)) for name in g.tags], dtype=np.int32)
        tags.append(np.repeat(glob, np.diff(g.bounds)))
        series.append(np.full(t.num_rows, k, dtype=np.int32))
        parts.append(t)
    names = list(code_of)
    if not parts:
        return pa.table(
            {
                "series": pa.array([], pa.string()),
                "tag": pa.array([], pa.string()),
                "step": pa.array([], pa.int64()),
                "wall_time": pa.array([], pa.float64()),
                "value": pa.array([], pa.float64()),
            }
        )
    nums = pa.concat_tables(parts)
    return pa.table(
        {
            "series": pa.DictionaryArray.from_arrays(
                numeric_array(np.concatenate(series), "<i4"), pa.array([lb for lb, _ in items], pa.string())
            ),
            "tag": pa.DictionaryArray.from_arrays(numeric_array(np.concatenate(tags), "<i4"), pa.array(names, pa.string())),
            "step": nums.column("step"),
            "wall_time": nums.column("wall_time"),
            "value": nums.column("value"),
        }
    )


def details(run: SiteRun, other_dirs: frozenset = frozenset(), roots: tuple[str, ...] = ()) -> RunDetails:
    """Everything :func:`sitegen.pages.runpage.run_page` shows beyond the run's own data;
    ``other_dirs``: folders of the site's other runs, never listed as this run's artifacts;
    ``roots``: where files may be read from (``ReadOptions.roots``)."""
    data = [run.data, *run.sub_runs]
    sub_dirs = sorted({f.path.parent for s in run.sub_runs for f in s.files})
    problems: list[Problem] = []
    out = RunDetails(
        environment=environment(data, run.directory, roots, problems),
        notes=notes(run.directory, roots, problems) or run.data.meta.get("notes"),  # (W&B: the run's notes)
        artifacts=artifacts(data, run.directory, sub_dirs, other_dirs, roots, problems),
        scalars=scalar_table(run.name, data, [""] + [_sub_label(run, s) for s in run.sub_runs]),
    )
    out.problems = list(dict.fromkeys(problems))  # an env file is also an artifact: one line per link
    return out


def _sub_label(run: SiteRun, sub) -> str:
    try:
        return PurePosixPath(sub.name).relative_to(run.name).as_posix()
    except ValueError:
        return sub.name
