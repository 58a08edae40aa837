"""Value types and Arrow schemas shared by every stage.

Every reader, whatever the log format, returns a :class:`RunData`; scalars are always an Arrow
table with :data:`RUN_SCALARS_SCHEMA` so the later stages never care where a number came from.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import operator
import re
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np
import pyarrow as pa

from sitegen.errors import Problem

#: Scalars of one run, every record as written (file order, no dedup, NaN/inf kept).
RUN_SCALARS_SCHEMA = pa.schema(
    [
        ("tag", pa.string()),
        ("step", pa.int64()),
        ("wall_time", pa.float64()),
        ("value", pa.float64()),
    ]
)
#: Scalars of many runs, as returned by :func:`sitegen.read_scalars`.
SCALARS_SCHEMA = pa.schema([("run", pa.string()), *RUN_SCALARS_SCHEMA])

HParamValue = Union[float, str, bool]


def by_position(obj: Any) -> tuple:
    """``__reduce__`` of a slotted dataclass: its class and its fields in order. A build sends
    a record per run (and per chart line) between processes; pickle's default for slotted
    objects makes a state dict per object, about 3x the memory while pickling and 2x the time
    to load."""
    return type(obj), tuple(map(obj.__getattribute__, obj.__slots__))


def empty_table(schema: pa.Schema) -> pa.Table:
    """An empty table. Not ``schema.empty_table()`` nor ``pa.table(...)``: those import pandas
    when it is installed (0.5 s per worker process)."""
    return pa.Table.from_batches([], schema=schema)


_ARROW_OF = {
    np.dtype("<i8"): pa.int64(),
    np.dtype("<i4"): pa.int32(),
    np.dtype("<i2"): pa.int16(),
    np.dtype("<f8"): pa.float64(),
    np.dtype("<f4"): pa.float32(),
}


def numeric_array(values: np.ndarray, dtype: str | None = None) -> pa.Array:
    """A numpy column as an Arrow array of ``dtype`` (``"<i8"``, ``"<f8"``, ...; None: its own),
    sharing its memory when it already has that type. Not ``pa.array``: its first call with a
    numpy array imports ``numpy.ma`` in every process."""
    a = np.ascontiguousarray(values, dtype=dtype)
    return pa.Array.from_buffers(_ARROW_OF[a.dtype], len(a), [None, pa.py_buffer(a)])


def empty_scalars() -> pa.Table:
    """The one empty scalars table (Arrow tables are immutable, and each copy holds ~800 bytes
    of Arrow memory: a build keeps a run without points for every run of the archive)."""
    return _EMPTY_SCALARS


_EMPTY_SCALARS = empty_table(RUN_SCALARS_SCHEMA)


@dataclass(frozen=True, eq=False)
class TagGroups:
    """A scalar table's rows grouped by tag: the tags in name order, the rows of each in file
    order (``order[bounds[i]:bounds[i + 1]]`` are the rows of ``tags[i]``)."""

    tags: list[str]
    rank: np.ndarray  # per row: the index of its tag in ``tags``
    order: np.ndarray
    bounds: np.ndarray
    in_place: bool  # the rows are grouped already: ``order`` is 0, 1, 2, ...
    columns: dict = field(default_factory=dict, compare=False)  # see grouped_columns


def grouped_columns(table: pa.Table) -> tuple[TagGroups, dict[str, np.ndarray]]:
    """The grouping of a scalar table and its step, wall_time and value columns in that order
    (gathered once: the chart lines and the download table each needed them)."""
    g = tag_groups(table)
    if not g.columns:
        cols = {c: table.column(c).to_numpy() for c in ("step", "wall_time", "value")}
        g.columns.update(cols if g.in_place else {c: v[g.order] for c, v in cols.items()})
    return g, g.columns


_groups: dict[int, tuple] = {}  # by id(table): (weakref, TagGroups or (tags, codes)); an entry dies with its table


def tag_groups(table: pa.Table) -> TagGroups:
    """The rows of a scalar table grouped by tag. A run's chart lines, its download table and
    its sanity checks each need this grouping; it is made once per table (tables are immutable)
    and forgotten with it."""
    known = _groups.get(id(table))
    if known is not None and known[0]() is table:
        got = known[1]
        if isinstance(got, TagGroups):
            return got
        groups = _grouping(*got)  # codes a reader left (remember_tag_groups)
    else:
        enc = table.column("tag").combine_chunks()
        if not pa.types.is_dictionary(enc.type):
            enc = enc.dictionary_encode()
        groups = _grouping(enc.dictionary.to_pylist(), enc.indices.to_numpy(zero_copy_only=False))
    _remember(table, groups)
    return groups


def remember_tag_groups(table: pa.Table, tags: list[str], codes: np.ndarray) -> None:
    """Tell :func:`tag_groups` that the tag column of ``table`` is ``tags[codes]`` (distinct
    tags, each used): a reader that decoded the tags as codes spares the hashing of every row's
    string (and the import of ``pyarrow.compute`` it needs). Only kept: the grouping is made
    when it is first asked for (``read_scalars`` never asks)."""
    if len(codes) != table.num_rows or len(set(tags)) != len(tags):
        return
    _remember(table, (tags, codes))


def _merge_groups(merged: pa.Table, tables: list[pa.Table]) -> None:
    """The tag grouping of ``merged`` (``tables`` one after the other) from theirs, when each
    has one: a cached file plus its new tail then needs no hashing of tag strings."""
    known = [_groups.get(id(t)) for t in tables]
    if not all(k is not None and k[0]() is t for k, t in zip(known, tables)):
        return
    names: dict[str, int] = {}
    codes = []
    for k in known:
        assert k is not None
        g = k[1]
        tags, part = (g.tags, g.rank) if isinstance(g, TagGroups) else g
        ids = np.array([names.setdefault(tag, len(names)) for tag in tags], np.int64)
        codes.append(ids[part] if len(ids) else np.zeros(0, np.int64))
    remember_tag_groups(merged, list(names), np.concatenate(codes))


def _grouping(local: list[str], codes: np.ndarray) -> TagGroups:
    counts = np.bincount(codes, minlength=len(local))
    if not counts.all():  # unused tags: drop them
        used = np.flatnonzero(counts)
        remap = np.zeros(len(local), np.int64)
        remap[used] = np.arange(len(used))
        local, codes = [local[i] for i in used], remap[codes]
    by_name = sorted(range(len(local)), key=local.__getitem__)
    # 16-bit ranks where they fit: numpy sorts those by radix, several times faster
    rank_of = np.empty(len(local), dtype=np.int16 if len(local) < 2**15 else np.int64)
    rank_of[by_name] = np.arange(len(local))
    rank = rank_of[codes]
    in_place = len(rank) < 2 or bool(np.all(rank[1:] >= rank[:-1]))
    order = np.arange(len(rank)) if in_place else np.argsort(rank, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(rank, minlength=len(local)))])
    return TagGroups([local[c] for c in by_name], rank, order, bounds, in_place)


def _remember(table: pa.Table, groups: "TagGroups | tuple[list[str], np.ndarray]") -> None:
    key = id(table)

    def forget(_: object) -> None:
        _groups.pop(key, None)

    _groups[key] = (weakref.ref(table, forget), groups)


def strings_from_codes(tags: list[str], codes: np.ndarray) -> pa.Array:
    """``tags[codes]`` as a string array, built with numpy (offsets by a running sum, the bytes
    by one gather): Arrow's dictionary decoding copies one row at a time and imports
    ``pyarrow.compute``."""
    codes = np.asarray(codes)
    ends, data = TagBytes(tags).gather(codes)
    if len(data) >= 2**31:  # int32 offsets would overflow: Arrow's own way, which says so
        return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(tags, pa.string())).cast(pa.string())
    offsets = np.concatenate([[0], ends]).astype(np.int32)
    return pa.StringArray.from_buffers(len(codes), pa.py_buffer(offsets), pa.py_buffer(data))


class TagBytes:
    """Distinct tags as one UTF-8 blob, for gathering the bytes of many rows at once."""

    def __init__(self, tags: list[str]) -> None:
        self.encoded = [t.encode("utf-8", "surrogatepass") for t in tags]
        self.lens = np.array([len(b) for b in self.encoded], np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lens)[:-1]]) if len(self.lens) else self.lens
        self.blob = np.frombuffer(b"".join(self.encoded), np.uint8)

    def gather(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(end offset of each row, the rows' bytes back to back) of ``tags[codes]``."""
        row_lens = self.lens[codes] if len(self.lens) else np.zeros(len(codes), np.int64)
        ends = np.cumsum(row_lens)
        total = int(ends[-1]) if len(ends) else 0
        if not total:
            return ends, np.empty(0, np.uint8)
        return ends, self.blob[np.arange(total) - np.repeat(ends - row_lens - self.starts[codes], row_lens)]


@dataclass(frozen=True)
class ReadOptions:
    """Knobs every reader honours."""

    verify: bool = True  # check every CRC (TensorBoard files)
    fast: bool = True  # use the vectorized decoders (False: the reference decoders only)
    max_image_bytes: int = 8 * 1024 * 1024
    max_text_chars: int = 200_000
    max_audio_bytes: int = 16 * 1024 * 1024
    #: also take the SHA-256 of each file read (SourceFile.sha256) while its bytes are in memory:
    #: the build's manifest needs it, and reading the file again for it cost as much as hashing
    digest: bool = False
    #: real paths of the folders files may be read from: the archive and ``[archive]
    #: follow_symlinks_into`` (see :mod:`sitegen.fileio`); empty: anywhere (a folder read by hand)
    roots: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunSource:
    """A run found by the scan: which reader reads which files of which directory."""

    name: str  # posix path relative to the archive; "." for the archive itself
    format: str  # key of sitegen.ingest.READERS
    directory: Path
    files: tuple[Path, ...]  # log files in read order
    parent: str | None = None  # name of the run this is a sub-run of (add_scalars, add_hparams)


def path_in(folder: Path | None, folder_text: str | None, text: str) -> Path:
    """``text`` as a Path, made from ``folder`` (``folder_text`` as a string) when it names a
    file right inside it, which is cheaper than parsing the whole path: a rebuild makes one for
    every log file of its runs' summaries."""
    if folder is not None and folder_text and text.startswith(folder_text) and text[len(folder_text) : len(folder_text) + 1] == "/":
        name = text[len(folder_text) + 1 :]
        if name and "/" not in name:
            return folder / name
    return Path(text)


@dataclass(slots=True)
class SourceFile:
    """A log file that was read, and how far: ``decoded_bytes`` ends at the last complete record;
    ``sha256``: of its first ``size`` bytes, when the reader took it (``ReadOptions.digest``)."""

    __reduce__ = by_position

    path: Path
    size: int
    decoded_bytes: int
    sha256: str = ""


@dataclass
class Image:
    tag: str
    step: int
    wall_time: float
    data: bytes
    mime: str  # image/png, image/jpeg, image/gif, image/webp
    width: int = 0
    height: int = 0


@dataclass
class Audio:
    tag: str
    step: int
    wall_time: float
    data: bytes
    mime: str  # audio/wav
    sample_rate: float = 0.0


@dataclass
class Text:
    tag: str
    step: int
    wall_time: float
    text: str


@dataclass(eq=False)
class Histogram:
    """Buckets as rows (left, right, count), the shape TensorBoard serves."""

    tag: str
    step: int
    wall_time: float
    left: np.ndarray
    right: np.ndarray
    count: np.ndarray


@dataclass(eq=False)
class Curve:
    """A PR or ROC curve. ``columns`` holds equal-length arrays.

    pr: tp, fp, tn, fn, precision, recall (and thresholds when known); roc: tpr, fpr, thresholds.
    """

    kind: str  # "pr" or "roc"
    tag: str
    step: int
    wall_time: float
    columns: dict[str, np.ndarray]


@dataclass(eq=False)
class Embedding:
    tag: str
    step: int
    wall_time: float
    rows: int
    dims: int


@dataclass(slots=True)
class Artifact:
    path: str  # relative to the run directory
    size: int
    sha256: str = ""


@dataclass(slots=True)
class RunData:
    """Everything one run holds, in the order it was written."""

    name: str
    format: str
    files: list[SourceFile] = field(default_factory=list)
    scalars: pa.Table = field(default_factory=empty_scalars)
    images: list[Image] = field(default_factory=list)
    audio: list[Audio] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    histograms: list[Histogram] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    embeddings: list[Embedding] = field(default_factory=list)
    hparams: dict[str, HParamValue] = field(default_factory=dict)
    hparam_metrics: list[str] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)  # title, status, start/end time, tags
    artifacts: list[Artifact] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: restarts the logs announce (TensorBoard's SessionLog START): (scalar rows written before
    #: it, its step); the records before it from that step on are superseded in the charts
    restarts: list[tuple[int, int]] = field(default_factory=list)

    def __getstate__(self) -> tuple:
        """An empty scalars table crosses a process boundary as None and comes back as the
        shared one (:func:`empty_scalars`): a worker sends a run without points for every run."""
        return tuple(None if v is _EMPTY_SCALARS else v for v in map(self.__getattribute__, self.__slots__))

    def __setstate__(self, state: tuple) -> None:
        for name, v in zip(self.__slots__, state):
            object.__setattr__(self, name, _EMPTY_SCALARS if v is None and name == "scalars" else v)


def held_data(name: str, format: str, meta: dict[str, str]) -> RunData:
    """The data a build holds of a run once its summary is kept: name, format and meta, and its
    item lists one shared empty tuple (nothing adds to a held run's data; twelve empty lists a
    run were 0.6 KB of every run a large build holds)."""
    none: Any = ()
    return RunData(
        name, format, files=none, images=none, audio=none, texts=none, histograms=none, curves=none,
        embeddings=none, hparam_metrics=none, meta=meta, artifacts=none, problems=none, restarts=none,
    )  # fmt: skip


def merge_parts(name: str, fmt: str, parts: list[RunData]) -> RunData:
    """One run from parts read separately (files of a run, or a cached file plus its new tail)."""
    out = RunData(name=name, format=fmt)
    tables = [p.scalars for p in parts if p.scalars.num_rows]
    if tables:
        out.scalars = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        if len(tables) > 1:
            _merge_groups(out.scalars, tables)
    rows = 0
    for p in parts:
        out.restarts += [(rows + r, s) for r, s in p.restarts]
        rows += p.scalars.num_rows
        out.files += p.files
        out.images += p.images
        out.audio += p.audio
        out.texts += p.texts
        out.histograms += p.histograms
        out.curves += p.curves
        out.embeddings += p.embeddings
        for k, v in p.hparams.items():
            out.hparams.setdefault(k, v)
        out.hparam_metrics += [m for m in p.hparam_metrics if m not in out.hparam_metrics]
        for k, v in p.meta.items():
            out.meta.setdefault(k, v)
        out.artifacts += p.artifacts
        out.problems += p.problems
    return out


@dataclass(slots=True)
class Stats:
    """Exact statistics of a whole series (before thinning). Not frozen: a rebuild makes one per
    line of every reused run, and a frozen dataclass is much slower to make."""

    __reduce__ = by_position

    count: int
    nan: int
    posinf: int
    neginf: int
    first_step: int
    first_value: float
    last_step: int
    last_value: float
    min_step: int | None
    min_value: float | None
    max_step: int | None
    max_value: float | None

    def values(self) -> tuple:
        """The fields in order (a run summary keeps a line's statistics as this list)."""
        return _STATS_FIELDS(self)


_STATS_FIELDS = operator.attrgetter(*Stats.__slots__)


@dataclass(eq=False, slots=True)
class Series:
    """A chart-ready series: the chosen points (sorted by step) and the exact stats."""

    step: np.ndarray
    wall_time: np.ndarray
    value: np.ndarray
    stats: Stats
    thinned: bool  # fewer points are drawn than the series has (after dedup)
    #: for comparison lines: bit k set when the point is drawn at ``compare.LEVELS[k]`` points
    #: (chosen once, when the run is drawn)
    levels: np.ndarray | None = None

    def __reduce__(self) -> tuple:
        """Its fields in order; loaded, a series without points shares :data:`NO_STEPS` and
        :data:`NO_VALUES` (a kept run's lines have statistics only: one line per tag of every run)."""
        return _loaded_series, by_position(self)[1]


#: the points of a series that has none (shared: never written to)
NO_STEPS = np.zeros(0, np.int64)
NO_VALUES = np.zeros(0, np.float64)


def _loaded_series(step: np.ndarray, wall_time: np.ndarray, value: np.ndarray, *rest: Any) -> Series:
    if not len(step) and step.dtype == NO_STEPS.dtype and wall_time.dtype == value.dtype == NO_VALUES.dtype:
        step, wall_time, value = NO_STEPS, NO_VALUES, NO_VALUES
    return Series(step, wall_time, value, *rest)


@dataclass
class Environment:
    items: dict[str, str] = field(default_factory=dict)
    raw: list[tuple[str, str]] = field(default_factory=list)  # (source, text) that was not a map
    fingerprint: list[tuple[str, str, str]] = field(default_factory=list)  # (field, key, value)
    provenance: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Commit:
    """The commit a run was trained from, as its logs record it (a tracker's git fields, its
    environment, a hyperparameter): a lower-case hex hash, its git tag and branch when known."""

    hash: str
    tag: str | None = None
    branch: str | None = None
    source: str = ""  # the key it was read from (``git.commit``, ``GITHUB_SHA``, ...)


@dataclass(eq=False, repr=False)
class RunDetails:
    """What a run page shows beyond the run's data, read from its folder (environment, notes,
    artifacts) and the full-resolution scalar table of its downloads."""

    environment: Environment
    notes: str | None
    artifacts: list[Artifact]
    scalars: pa.Table
    problems: list[Problem] = field(default_factory=list)  # files of the folder refused (outside the archive)


@dataclass(eq=False, repr=False)
class Packed:
    """A run's chart lines at one level of thinning (from the cache) as flat columns: line j is ``[bounds[j]:bounds[j + 1]]``."""

    bounds: list[int]
    step: np.ndarray
    wall: np.ndarray
    value: np.ndarray
    thinned: list[bool]


@dataclass(eq=False, slots=True)
class ChartLine:
    """One drawn line of a scalar chart: a tag of the run or of one of its sub-runs."""

    tag: str  # the chart this line belongs to
    label: str  # "" for the run's own series, else the sub-run's key (add_scalars)
    series: "Series"

    def __reduce__(self) -> tuple:
        """Loaded with its tag and label interned: thousands of runs share a few tags, and a
        build holds a line per tag of every run."""
        return chart_line, (self.tag, self.label, self.series)


def chart_line(tag: str, label: str, series: Series) -> ChartLine:
    """A chart line whose tag and label are the interned strings (see :meth:`ChartLine.__reduce__`)."""
    return ChartLine(sys.intern(tag), sys.intern(label), series)


@dataclass(frozen=True)
class Superseded:
    """Scalar records a resumed run wrote again: the charts and statistics show the newer ones,
    the downloads keep both. ``count`` records at steps ``first_step``..``last_step``."""

    count: int
    first_step: int
    last_step: int


@dataclass(eq=False, slots=True)
class SiteRun:
    """A run as the site shows it: its own data plus its sub-runs, and chart-ready series."""

    __reduce__ = by_position

    name: str
    slug: str  # output folder under runs/, derived from the name, never the raw name
    title: str
    parts: tuple[str, ...]  # hierarchy shown in the index (project, model, ...)
    data: RunData
    sub_runs: list[RunData] = field(default_factory=list)
    lines: list[ChartLine] = field(default_factory=list)
    start_time: float | None = None
    end_time: float | None = None
    last_step: int | None = None
    directory: Path | None = None  # the run's folder (environment/notes files, artifacts)
    superseded: Superseded | None = None  # records replaced by a resumed run (not charted)
    commit: Commit | None = None  # what the run records of its commit (see sitegen.prepare.commits)


def slug(name: str, kind: str = "") -> str:
    """A safe, unique folder name for a run (``kind=""``) or a comparison group
    (``kind="group"``): a readable ASCII part and a hash of the exact name. Raw names never
    become paths, so ``..``, absolute paths, reserved names and collisions such as ``a/b`` vs
    ``a_b`` cannot happen."""
    readable = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()[:48] or (kind or "run")
    salted = f"{kind}:{name}" if kind else name
    return f"{readable}-{hashlib.sha256(salted.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


# Tag names and hyperparameter values: how every stage reads and shows them.
CONFIG_TAG = re.compile(
    r"(^|[/_.\- ])(hparams?|hyper_?params?|hyperparameters?|config|configuration|params|args|arguments|flags)($|[/_.\- ])", re.I
)
LOWER_IS_BETTER = re.compile(r"loss|error|perplexity|(?<![a-z])(err|ppl|wer|cer|mse|mae|rmse)(?![a-z])|损失|误差|错误|困惑度")


def base_tag(tag: str) -> str:
    return tag[: -len("/text_summary")] if tag.endswith("/text_summary") else tag


def is_config_tag(tag: str) -> bool:
    return bool(CONFIG_TAG.search(base_tag(tag)))


@functools.lru_cache(maxsize=4096)
def lower_is_better(tag: str) -> bool:
    """(Remembered: a comparison page asks it for every line of every run, of a few tags.)"""
    return bool(LOWER_IS_BETTER.search(tag.lower()))


def text_value(v: HParamValue | None) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+inf" if v > 0 else "-inf"
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}"
    return str(v)


MAX_HPARAMS = 500


def hparam_value(v: Any) -> HParamValue:
    """A config value as the site keeps it: numbers as floats (exact big ints as text), lists and
    nulls as their JSON text."""
    if isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return float(v) if abs(v) < 2**53 else str(v)
    if isinstance(v, float):
        return v
    return json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)


def flat_hparams(obj: Any, prefix: str = "", out: dict[str, HParamValue] | None = None) -> dict[str, HParamValue]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1.0}`` (at most MAX_HPARAMS keys); shared by the readers
    of trackers' configs and the config texts of TensorBoard runs."""
    out = {} if out is None else out
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                flat_hparams(v, key, out)
            elif len(out) < MAX_HPARAMS:
                out[key] = hparam_value(v)
    elif prefix and len(out) < MAX_HPARAMS:
        out[prefix] = hparam_value(obj)
    return out
