"""MLflow file stores (``mlruns/``), read without importing mlflow.

Layout (what ``mlflow`` 1.x–3.x's ``FileStore`` writes)::

    mlruns/
      .trash/<exp_id>/...          deleted experiments (never listed)
      models/                      model registry (not runs)
      <exp_id>/meta.yaml           experiment: experiment_id, name, artifact_location, ...
      <exp_id>/tags/<key>          experiment tags (raw file contents)
      <exp_id>/{datasets,traces,models}/   not runs
      <exp_id>/<run_id>/meta.yaml  run: run_id, run_name, status, start_time, end_time, ...
      <exp_id>/<run_id>/metrics/<key>      lines "timestamp_ms value step" (keys with "/" are folders)
      <exp_id>/<run_id>/params/<key>       raw value
      <exp_id>/<run_id>/tags/<key>         raw value
      <exp_id>/<run_id>/artifacts/...      logged files

Metric lines have 3 fields; stores written before steps existed have 2 (``timestamp value``, step
0) and lines logged with a dataset have 5 (``timestamp value step dataset_name dataset_digest``).
For 5-field lines this reader keeps the written step (mlflow's own reader reports step 0 for
them). Values are whatever Python's ``float`` accepts, as in mlflow: ``nan``, ``inf``, ``-inf``,
``Infinity``...

Files are parsed in bulk with ``pyarrow.csv`` (space delimiter, strict types); a file that does
not parse that way is re-read line by line so that every bad line becomes a :class:`Problem`
naming the file and the line's byte offset while every good line is kept. A last line without
its newline is read when its field count matches the file's other lines (or is 3 or 5 when it is
the only one); otherwise it is reported as ``truncated`` and left out.

``meta.yaml`` is read with a small parser of the block-mapping subset ``yaml.safe_dump`` writes
(plain, single- and double-quoted scalars including folded continuation lines and escapes,
``null``/``~``, nested blocks such as ``tags:`` skipped), so PyYAML is not needed at runtime.
"""

from __future__ import annotations

import io
import logging
import os
import stat
from pathlib import Path, PurePosixPath

import numpy as np
import pyarrow as pa

from sitegen.errors import Problem, shown
from sitegen.fileio import OutsideRoots, check_inside, sha256_file
from sitegen.ingest.checks import scalar_problems
from sitegen.ingest.files import problem, read_or_note, read_regular
from sitegen.ingest.mlflow.metayaml import byte_offset, parse_meta_yaml
from sitegen.listing import Listing
from sitegen.model import RUN_SCALARS_SCHEMA, Artifact, ReadOptions, RunData, RunSource, SourceFile

log = logging.getLogger(__name__)

FORMAT = "mlflow"

META = "meta.yaml"
TRASH = ".trash"
#: sub-folders of an experiment folder that are not runs (mlflow's RESERVED_EXPERIMENT_FOLDERS)
RESERVED_EXPERIMENT_FOLDERS = frozenset({"tags", "datasets", "traces", "models"})
#: folders of the store root that are not experiments
RESERVED_ROOT_FOLDERS = frozenset({TRASH, "models"})
RUN_FOLDERS = ("metrics", "params", "tags", "artifacts")
STATUS_NAMES = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}
MAX_HASH_BYTES = 64 * 1024 * 1024


def claims(filename: str) -> bool:
    """MLflow runs are whole folder trees found by :func:`is_store`, never single files."""
    return False


def _read_meta(path: Path, problems: list[Problem] | None, roots: tuple[str, ...]) -> dict[str, str | None]:
    """Parse one meta.yaml; every damage becomes a Problem (when ``problems`` is given)."""

    def add(offset: int | None, kind: str, message: str) -> None:
        if problems is not None:
            problems.append(Problem(str(path), offset, kind, message))

    try:
        data = read_regular(path, roots)
    except FileNotFoundError:
        add(None, "missing-meta", "meta.yaml is missing")
        return {}
    except OSError as exc:
        if problems is not None:
            problems.append(problem(path, exc))
        return {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        add(exc.start, "bad-meta", "meta.yaml is not UTF-8; bad bytes replaced")
        text = data.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\0" in text:
        add(byte_offset(text, text.index("\0")), "bad-meta", "meta.yaml holds NUL bytes (garbage)")
        text = text.replace("\0", "")
    meta, errors = parse_meta_yaml(text)
    for off, message in errors[:5]:
        add(byte_offset(text, off), "bad-meta", f"{message}; line skipped")
    if len(errors) > 5:
        add(None, "bad-meta", f"{len(errors) - 5} more unreadable lines skipped")
    if not meta and not errors and problems is not None:
        add(None, "bad-meta", "meta.yaml is empty")
    return meta


def _peek_meta(path: Path | str) -> dict[str, str | None]:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO named meta.yaml would block the open
            return {}
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return {}
    return parse_meta_yaml(data.decode("utf-8", errors="replace"))[0]


# --------------------------------------------------------------------------------------------
# discovery
# --------------------------------------------------------------------------------------------


def _subdirs(directory: Path) -> list[Path]:
    try:
        return sorted((p for p in directory.iterdir() if p.is_dir()), key=lambda p: p.name)
    except OSError:
        return []


def _is_experiment_dir(directory: Path) -> bool:
    meta = _peek_meta(directory / META)
    if "experiment_id" in meta and "run_id" not in meta and "run_uuid" not in meta:
        return True
    if "run_id" in meta or "run_uuid" in meta or "name" in meta:
        return False  # a run, or another mlflow object (registered model, ...)
    # meta.yaml missing or garbage: an experiment all the same if it holds runs
    return any(_is_run_dir(d) for d in _subdirs(directory))


def _is_run_dir(directory: Path) -> bool:
    if directory.name in RESERVED_EXPERIMENT_FOLDERS:
        return False
    if (directory / META).is_file():
        meta = _peek_meta(directory / META)
        if "run_id" in meta or "run_uuid" in meta:
            return True
        if "experiment_id" in meta or "name" in meta:
            return False  # some other mlflow object (experiment, registered model, ...)
    # meta.yaml missing or garbage: a run all the same if it has a run's folders
    return any((directory / sub).is_dir() for sub in ("metrics", "params", "artifacts"))


def is_store(directory: Path, subdirs: list[str] | None = None, listing: Listing | None = None) -> bool:
    """A folder named ``mlruns``, or one holding an experiment folder (meta.yaml with
    ``experiment_id`` and ``artifact_location``). ``subdirs``: the names of its folders, and
    ``listing``: the archive's walk, when the caller (the archive scan) has them (then only
    the folders listed with a meta.yaml are opened)."""
    if subdirs is None and not Path(directory).is_dir():
        return False
    top = os.fspath(directory)  # plain strings: the scan asks this of every folder of the archive
    if os.path.basename(top.rstrip(os.sep)) == "mlruns":
        return True
    names = [p.name for p in _subdirs(Path(directory))] if subdirs is None else sorted(subdirs)
    for name in names:
        if name in RESERVED_ROOT_FOLDERS:
            continue
        sub = listing.get(os.path.join(top, name)) if listing is not None else None
        if sub is not None and sub.listed and META not in sub.files:
            continue
        meta = _peek_meta(os.path.join(top, name, META))
        if "experiment_id" in meta and "artifact_location" in meta:
            return True
    return False


def _files_below(root: Path, base: Path) -> list[tuple[str, Path]]:
    """Every file below ``root`` as (its path relative to ``base``, its path), sorted."""
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            path = Path(dirpath) / name
            found.append((path.relative_to(base).as_posix(), path))
    return sorted(found)


def _metric_files(run_dir: Path) -> list[Path]:
    return [p for _, p in _files_below(run_dir / "metrics", run_dir / "metrics")]


def _rel_name(path: Path, archive: Path) -> str:
    try:
        rel = path.relative_to(archive)
    except ValueError:
        rel = Path(os.path.relpath(path, archive))
    name = shown(rel.as_posix())
    return name or "."


def discover(directory: Path, archive: Path, *, include_deleted: bool = False) -> list[RunSource]:
    """One :class:`RunSource` per run of the store at ``directory``, sorted by name.

    Deleted runs (``lifecycle_stage: deleted``) and runs of deleted experiments are left out
    unless ``include_deleted``; experiments moved to ``.trash`` are never listed.
    """
    directory, archive = Path(directory), Path(archive)
    sources: list[RunSource] = []
    for exp_dir in _subdirs(directory):
        if exp_dir.name in RESERVED_ROOT_FOLDERS or exp_dir.name.startswith("."):
            continue
        if not _is_experiment_dir(exp_dir):
            continue
        if not include_deleted and _peek_meta(exp_dir / META).get("lifecycle_stage") == "deleted":
            continue
        for run_dir in _subdirs(exp_dir):
            if not _is_run_dir(run_dir):
                continue
            if not include_deleted and _peek_meta(run_dir / META).get("lifecycle_stage") == "deleted":
                continue
            sources.append(
                RunSource(
                    name=_rel_name(run_dir, archive),
                    format=FORMAT,
                    directory=run_dir,
                    files=tuple(_metric_files(run_dir)),
                    parent=None,
                )
            )
    sources.sort(key=lambda s: s.name)
    return sources


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------

_LAYOUTS = (
    ("ts", "value", "step"),
    ("ts", "value", "step", "dataset_name", "dataset_digest"),
    ("ts", "value"),
)


def _bulk(body: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """Parse newline-terminated lines that all share one layout, or None."""
    import pyarrow.csv as pacsv  # lazy: keeps a rebuild that changes nothing quick

    for names in _LAYOUTS:
        types = {"ts": pa.int64(), "value": pa.float64(), "step": pa.int64()}
        types.update({n: pa.string() for n in names if n not in types})
        try:
            table = pacsv.read_csv(
                io.BytesIO(body),
                read_options=pacsv.ReadOptions(column_names=list(names), use_threads=True),
                parse_options=pacsv.ParseOptions(
                    delimiter=" ",
                    quote_char=False,
                    double_quote=False,
                    escape_char=False,
                    newlines_in_values=False,
                    ignore_empty_lines=False,
                ),
                convert_options=pacsv.ConvertOptions(
                    column_types=types,
                    null_values=[],
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=False,
                ),
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
            continue
        if any(col.null_count for col in table.columns):
            continue
        ts = table.column("ts").to_numpy()
        value = table.column("value").to_numpy()
        step = table.column("step").to_numpy() if "step" in names else np.zeros(table.num_rows, dtype=np.int64)
        return ts, value, step, len(names)
    return None


def _parse_line(raw: bytes) -> tuple[int, float, int, int]:
    """One metric line the way mlflow reads it: ``(timestamp_ms, value, step, field count)``."""
    parts = raw.decode("utf-8").strip().split(" ")
    n = len(parts)
    if n not in (2, 3) and n < 5:
        raise ValueError(f"{n} fields, expected 3 (or 2 or 5)")
    ts = int(parts[0])
    value = float(parts[1])
    step = int(parts[2]) if n >= 3 else 0
    return ts, value, step, n


def parse_metric_bytes(data: bytes, path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, list[Problem]]:
    """Decode one metric file: ``(timestamp_ms, value, step, decoded_bytes, problems)``."""
    problems: list[Problem] = []
    cut = data.rfind(b"\n") + 1
    body, tail = data[:cut], data[cut:]
    fields = 0
    bulk = _bulk(body) if body else (np.empty(0, np.int64), np.empty(0), np.empty(0, np.int64), 0)
    if bulk is not None:
        ts, value, step, fields = bulk
        tss, values, steps = [ts], [value], [step]
    else:
        ts_l: list[int] = []
        val_l: list[float] = []
        step_l: list[int] = []
        off = 0
        for line in body.split(b"\n")[:-1]:
            try:
                t, v, s, fields = _parse_line(line)
            except (ValueError, UnicodeDecodeError) as exc:
                shown = line[:60].decode("utf-8", errors="replace")
                problems.append(Problem(path, off, "bad-record", f"bad metric line {shown!r} ({exc}); skipped"))
            else:
                ts_l.append(t)
                val_l.append(v)
                step_l.append(s)
            off += len(line) + 1
        tss = [np.array(ts_l, dtype=np.int64)]
        values = [np.array(val_l, dtype=np.float64)]
        steps = [np.array(step_l, dtype=np.int64)]
    end = len(body)
    if tail.strip():
        try:
            t, v, s, n = _parse_line(tail)
            ok = n == fields if fields else n in (3, 5)
            reason = f"has {n} fields where the file's lines have {fields or 3}"
        except (ValueError, UnicodeDecodeError) as exc:
            ok, reason = False, str(exc)
        if ok:
            tss.append(np.array([t], dtype=np.int64))
            values.append(np.array([v], dtype=np.float64))
            steps.append(np.array([s], dtype=np.int64))
            end = len(data)
        else:
            problems.append(Problem(path, len(body), "truncated", f"last line has no newline and {reason}; not read"))
    elif tail:
        end = len(data)
    return np.concatenate(tss), np.concatenate(values), np.concatenate(steps), end, problems


# --------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------


def _read_tree(root: Path, problems: list[Problem], roots: tuple[str, ...], files: list[SourceFile] | None = None) -> dict[str, str]:
    """``key -> raw file contents`` of a params/ or tags/ folder (keys with "/" are folders);
    every file read is added to ``files`` (the manifest then covers it)."""
    out: dict[str, str] = {}
    if not root.is_dir():
        return out
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            path = Path(dirpath) / name
            found.append((shown(path.relative_to(root).as_posix()), path))
    for key, path in sorted(found):
        data = read_or_note(path, roots, problems)
        if data is None:
            continue
        if files is not None:
            files.append(SourceFile(path, len(data), len(data)))
        try:
            out[key] = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(Problem(str(path), exc.start, "bad-record", "not UTF-8; bad bytes replaced"))
            out[key] = data.decode("utf-8", errors="replace")
    return out


def _artifacts(run_dir: Path, problems: list[Problem], roots: tuple[str, ...]) -> list[Artifact]:
    """The run's ``artifacts/`` folder, listed (never copied); the ``artifact_uri`` of meta.yaml
    is never followed: it names a place on the machine that logged the run."""
    out: list[Artifact] = []
    top = run_dir / "artifacts"
    try:
        if top.is_symlink():
            check_inside(top, roots)
    except OutsideRoots as exc:
        problems.append(problem(top, exc))
        return out
    for rel, path in _files_below(top, run_dir):
        try:
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                check_inside(path, roots)
                st = path.stat()
            if not stat.S_ISREG(st.st_mode):  # a FIFO or device: opening it could block the build
                problems.append(Problem(str(path), None, "not-a-file", "artifact is not a regular file; not listed"))
                continue
            size = st.st_size
            digest = ""
            if size <= MAX_HASH_BYTES:
                digest = sha256_file(path, roots=roots)[0]
        except OSError as exc:
            problems.append(problem(path, exc))
            continue
        out.append(Artifact(path=shown(rel), size=size, sha256=digest))
    return out


def _seconds(ms: str | None) -> str | None:
    if ms is None:
        return None
    try:
        return str(int(ms) / 1000)
    except ValueError:
        try:
            return str(float(ms) / 1000)
        except ValueError:
            return None


def _status(raw: str | None) -> str | None:
    if raw is None:
        return None
    try:
        return STATUS_NAMES.get(int(raw), raw)
    except ValueError:
        return raw.upper()


def _parent_name(source: RunSource, parent_id: str) -> str | None:
    """Name of the RunSource of run ``parent_id``: a sibling, else in a sibling experiment."""
    if not parent_id or "/" in parent_id or parent_id in (".", ".."):
        return None
    run_dir = source.directory
    exp_dir = run_dir.parent
    name = PurePosixPath(source.name)
    if (exp_dir / parent_id).is_dir():
        return (name.parent / parent_id).as_posix()
    for other in _subdirs(exp_dir.parent):
        if other != exp_dir and not other.name.startswith(".") and (other / parent_id).is_dir():
            return (name.parent.parent / other.name / parent_id).as_posix()
    return None


def _metric_key(path: Path, metrics_root: Path) -> str:
    try:
        return shown(path.relative_to(metrics_root).as_posix())
    except ValueError:
        return shown(path.name)


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    """Read one run folder.

    ``RunData.meta``: ``title`` (run name), ``experiment``, ``experiment_id``, ``run_id``,
    ``status`` (RUNNING/SCHEDULED/FINISHED/FAILED/KILLED), ``start_time``/``end_time`` (seconds
    as the str of a float; absent when null), ``lifecycle_stage``, ``parent_run`` (name of the
    parent's RunSource, from tag ``mlflow.parentRunId``, when that run is in the store) and one
    ``tag:<key>`` per run tag. ``RunData.hparams`` holds the params as the raw strings mlflow
    stored (never converted to numbers: "0.10" and "0.1" stay different). Scalars: metric keys
    sorted, each key's lines in file order; wall_time is the timestamp in seconds.
    ``RunData.files``: the run's meta.yaml, the experiment's meta.yaml, the tag and param files,
    then the metric files (every file the run's page was made from).
    """
    run = RunData(name=source.name, format=FORMAT)
    run_dir = Path(source.directory)
    exp_dir = run_dir.parent
    problems = run.problems

    roots = options.roots
    meta = _read_meta(run_dir / META, problems, roots)
    exp_meta = _read_meta(exp_dir / META, problems, roots)
    for path in (run_dir / META, exp_dir / META):
        try:  # listed so that problems of meta.yaml show with the run's files (not when refused: no digest of it)
            check_inside(path, roots)
            size = path.stat().st_size
            run.files.append(SourceFile(path, size, size))
        except OSError:
            pass
    tags = _read_tree(run_dir / "tags", problems, roots, run.files)
    run.hparams = dict(_read_tree(run_dir / "params", problems, roots, run.files))

    run_id = meta.get("run_id") or meta.get("run_uuid") or run_dir.name
    title = meta.get("run_name") or tags.get("mlflow.runName") or meta.get("name") or run_id
    info: dict[str, str | None] = {
        "title": title,
        "experiment": exp_meta.get("name"),
        "experiment_id": meta.get("experiment_id") or exp_meta.get("experiment_id") or exp_dir.name,
        "run_id": run_id,
        "status": _status(meta.get("status")),
        "start_time": _seconds(meta.get("start_time")),
        "end_time": _seconds(meta.get("end_time")),
        "lifecycle_stage": meta.get("lifecycle_stage"),
        "parent_run": _parent_name(source, tags.get("mlflow.parentRunId", "").strip()),
    }
    run.meta = {k: v for k, v in info.items() if v is not None}
    for key, tag_value in tags.items():
        run.meta[f"tag:{key}"] = tag_value

    metrics_root = run_dir / "metrics"
    keyed = sorted(((_metric_key(p, metrics_root), Path(p)) for p in source.files), key=lambda kp: kp[0])
    keys: list[str] = []
    counts: list[int] = []
    ts_parts, value_parts, step_parts = [], [], []
    for key, path in keyed:
        data = read_or_note(path, roots, problems)
        if data is None:
            continue
        ts, value, step, end, file_problems = parse_metric_bytes(data, str(path))
        problems.extend(file_problems)
        problems.extend(
            scalar_problems(
                pa.table(
                    {"tag": pa.array([key] * len(value), pa.string()), "step": step, "wall_time": ts.astype(np.float64), "value": value}
                ),
                str(path),
                wall_times=False,
                repeats=False,
            )
        )
        run.files.append(SourceFile(path, len(data), end))
        keys.append(key)
        counts.append(len(value))
        ts_parts.append(ts)
        value_parts.append(value)
        step_parts.append(step)
    if keys:
        ts_all = np.concatenate(ts_parts)
        run.scalars = pa.table(
            {
                "tag": pa.array(np.repeat(np.array(keys, dtype=object), counts), pa.string()),
                "step": pa.array(np.concatenate(step_parts), pa.int64()),
                "wall_time": pa.array(ts_all.astype(np.float64) / 1000.0, pa.float64()),
                "value": pa.array(np.concatenate(value_parts), pa.float64()),
            },
            schema=RUN_SCALARS_SCHEMA,
        )
    run.artifacts = _artifacts(run_dir, problems, roots)
    return run
