"""The two units of work an executor runs: drawing one run family (read, assemble, draw its page,
reduce it to a summary) and drawing one comparison page. Each is a pure function of its job plus
the decode cache, so it can run here or in any worker, once or twice."""

from __future__ import annotations

import json
import logging
import pickle
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from sitegen.cache import keys as cache_keys
from sitegen.cache import summary
from sitegen.cache.store import Store
from sitegen.config import Config
from sitegen.downsample import downsample
from sitegen.errors import Problem
from sitegen.fileio import sha256_file
from sitegen.ingest import READERS
from sitegen.ingest.checks import scalar_problems
from sitegen.model import ChartLine, HParamValue, ReadOptions, RunData, RunSource, Series, SiteRun, SourceFile, by_position, merge_parts
from sitegen.pages import compare
from sitegen.pages.assets import Assets
from sitegen.pages.comparepage import compare_files
from sitegen.pages.runpage import run_files
from sitegen.prepare.assemble import assemble
from sitegen.prepare.commits import commit_of
from sitegen.prepare.envinfo import details
from sitegen.prepare.hparams import run_hparams
from sitegen.publish.staging import Writer, gzip_twin, needs_twin

log = logging.getLogger(__name__)


@dataclass(eq=False, repr=False)
class Output:
    """Where a worker writes its files itself: the staging folder, the live build and the live
    manifest's entries for the files (those that did not change are hard-linked)."""

    root: Path
    previous: Path | None
    old: dict[str, tuple[str, int]]

    def writer(self) -> Writer:
        return Writer(self.root, self.previous, self.old, replace=True)


@dataclass(eq=False, repr=False, slots=True)
class RunJob:
    """Everything a worker needs to turn one run family into its page and its summary."""

    family: list[RunSource]
    options: ReadOptions
    config: Config
    cache: Path | None
    urls: dict[str, str]  # asset name -> path from the site root
    nested_dirs: frozenset  # other runs' folders inside this run's folder (not artifacts)
    problems_of: list[Problem]  # the scan's problems (shown on the page when they concern its files)
    key: str = ""  # the run's input key: its summary is kept under it
    out: Output | None = None  # where the worker writes the run's files (None: it returns them)
    slug: str = ""  # its folder under runs/ (the plan makes each run's distinct)


@dataclass(eq=False, repr=False, slots=True)
class RunResult:
    run: SiteRun  # light: bulk payloads dropped, lines thinned for comparison pages
    hparams: dict[str, HParamValue]
    files: dict[str, bytes]  # the run's own pages and media (empty once written)
    problems: list[Problem]
    sources: list[SourceFile]  # each with its SHA-256 where it was taken (see :func:`digest_sources`)
    written: dict[str, tuple[str, int]] | None = None  # files the worker wrote: (sha256, size)
    stored: bool = False  # the summary is in the cache (the run's points are read from there)
    summary: bytes | None = None  # the summary's document as kept, on its way to the run table

    def __reduce__(self) -> tuple:
        """Its fields in order (:func:`sitegen.model.by_position`), loaded with the hyperparameter
        names interned: a sweep's runs share them, and the build holds every run's."""
        return _loaded_result, by_position(self)[1]


def _loaded_result(run: SiteRun, hparams: dict[str, HParamValue], *rest: Any) -> RunResult:
    return RunResult(run, shared_names(hparams), *rest)


def shared_names(values: dict[str, HParamValue]) -> dict[str, HParamValue]:
    """``values`` with its names interned (see :meth:`RunResult.__reduce__`)."""
    return {sys.intern(k): v for k, v in values.items()}


def read_source(source: RunSource, options: ReadOptions, cache: Path | None) -> RunData:
    """Read one run; append-only formats go file by file through the decode cache."""
    reader = READERS[source.format]
    if not hasattr(reader, "decode_file"):
        return reader.read(source, options)
    store = Store(cache)
    parts = [store.read_file(path, options, reader.decode_file) for path in source.files]
    return merge_parts(source.name, reader.FORMAT, parts)


def draw_run(job: RunJob) -> RunResult:
    """Read one run family, draw its page and reduce it to a summary."""
    datas = [read_source(s, job.options, job.cache) for s in job.family]
    site_run = assemble(job.family[0], datas[0], datas[1:], job.config)
    if job.slug and job.slug != site_run.slug:  # (another run had its slug)
        site_run = replace(site_run, slug=job.slug)
    problems = [p for d in datas for p in d.problems]
    for source, d in zip(job.family, datas):
        # steps that go backwards or repeat are legal (resumed runs) but worth a line in the report
        problems += scalar_problems(d.scalars, str(source.directory), wall_times=False, steps=True, repeats=d.format != "mlflow")
    hp = run_hparams([site_run.data, *site_run.sub_runs])
    info = details(site_run, job.nested_dirs, job.options.roots)
    site_run = replace(site_run, commit=commit_of(site_run.data.meta, info.environment, hp))
    scanned = {(p.path, p.kind) for p in job.problems_of}
    problems += [p for p in info.problems if (p.path, p.kind) not in scanned]  # (a log file the scan refused is listed too)
    files = run_files(site_run, info, hp, job.config, job.urls, [*job.problems_of, *problems])
    # compressed here, in the worker, so the main process only writes
    files.update({rel + ".gz": gzip_twin(data) for rel, data in list(files.items()) if needs_twin(rel, data)})
    sources = [f for d in datas for f in d.files]
    digest_sources(sources)
    return RunResult(light(site_run), hp, files, problems, sources)


def process_run(job: RunJob) -> RunResult:
    """:func:`draw_run` and keep the run's summary in the cache (in the worker); with
    ``job.out``, also write the page, else the result carries its files for the caller to write."""
    result = keep_summary(draw_run(job), Store(job.cache), job.key)
    if job.out is None:
        return result
    writer = job.out.writer()
    write_run(result, writer)
    return replace(result, files={}, written=writer.hashes)


def keep_summary(result: RunResult, store: Store, key: str) -> RunResult:
    """Keep a drawn run's summary under ``key``; when the cache has it, the result holds the run
    as :func:`summary.held` makes it (memory then does not grow with what the runs logged, and a
    cluster's worker sends less: the comparison pages read the points back one run at a time)."""
    doc = summary.to_doc(result.run, result.hparams, page_names(result.files), result.problems, result.sources)
    text = store.put_summary(key, *doc)
    if text is None:
        return result
    return replace(result, run=summary.held(result.run), stored=True, summary=text)


def write_run(result: RunResult, writer: Writer) -> None:
    """Write a drawn run's files (their ``.gz`` twins made by the worker)."""
    for rel in page_names(result.files):
        writer.write(rel, result.files[rel], twin=result.files.get(rel + ".gz"))


def reuse_run(store: Store, key: str, family: Sequence[RunSource] = (), text: bytes | None = None) -> tuple[RunResult, list[str]] | None:
    """A run whose inputs did not change, from its summary in the cache (``text``: its document,
    when the caller has it), and the names of its page's files (linked from the live build);
    None when the cache lost it. ``family``: the run's sources as this build's scan found them
    (their paths are the summary's)."""
    if text is None:
        text = store.get_summary_text(key)
    try:
        doc = None if text is None else json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        return None
    known = {str(p): p for s in family for p in (s.directory, *s.files)}
    try:
        run, hp, pages, problems, sources = summary.from_doc(doc, known)
    except (KeyError, TypeError, ValueError, AttributeError):  # JSON, but not a summary: draw the run again
        log.info("run summary %s unusable; drawing the run again", key)
        return None
    return RunResult(run, shared_names(hp), {}, problems, sources, stored=True), pages


def light(run: SiteRun) -> SiteRun:
    """What the index and comparison pages need of a run: no images, tables or raw scalars,
    lines thinned to the comparison pages' resolution (exact statistics kept)."""
    keep = RunData(
        name=run.data.name,
        format=run.data.format,
        files=run.data.files,
        hparams=run.data.hparams,
        hparam_metrics=run.data.hparam_metrics,
        meta=run.data.meta,
        artifacts=run.data.artifacts,
        problems=run.data.problems,
    )
    lines = []
    for ln in run.lines:
        s = ln.series
        if len(s.step) > compare.MAX_POINTS:
            t = downsample(s.step, s.wall_time, s.value, compare.MAX_POINTS)
            s = Series(t.step, t.wall_time, t.value, s.stats, True)
        s = replace(s, levels=compare.level_bits(s.step, s.wall_time, s.value))
        lines.append(ChartLine(ln.tag, ln.label, s))
    return replace(run, data=keep, sub_runs=[], lines=lines)


def page_names(files: dict[str, bytes]) -> list[str]:
    """The files of a run, without the ``.gz`` twins made beside them."""
    return sorted(rel for rel in files if not (rel.endswith(".gz") and rel[:-3] in files))


def share_paths(result: RunResult, family: Sequence[RunSource]) -> None:
    """Point a result's log files at the scan's ``Path`` objects for them: a worker's result
    brings copies of its own, ~0.4 KB a run the build holds to its end."""
    known = {p: p for s in family for p in s.files}
    for f in result.sources:
        f.path = known.get(f.path, f.path)


def digest_sources(sources: list[SourceFile]) -> None:
    """Give each log file its SHA-256 over the bytes that were read, for the manifest: taken by
    the reader while it had the bytes (or kept with the decode cache's entry), else hashed here,
    in the worker that just read the file (left empty when the file no longer has those bytes)."""
    for f in sources:
        if f.sha256:
            continue
        try:
            digest, n = sha256_file(f.path, f.size)
        except OSError:
            continue
        if n == f.size:
            f.sha256 = digest


def run_inputs(job: RunJob, store: Store) -> list[str]:
    """The files drawing ``job`` reads: its log files and their decode cache entries."""
    logs = [f for s in job.family for f in s.files]
    return [str(f) for f in logs] + [e for e in map(store.entry_file, logs) if e is not None]


@dataclass(eq=False, repr=False)
class GroupJob:
    """One comparison page, drawn by a worker or by the build itself. With ``out`` the worker
    writes it into the build's folder; without (a cluster's worker, which may not see that
    folder) it returns the files and the names of the live build's pieces to link."""

    group: compare.Group  # its runs: summaries; the points of those in ``keys`` are in the cache
    hps: list[dict[str, HParamValue]]  # of group.runs
    config: Config
    urls: dict[str, str]
    cache: Path | None
    keys: dict[str, str]  # slug -> the key its summary is kept under
    out: Output | None
    live: frozenset[str] = frozenset()  # without ``out``: the live build's files in the page's folder
    stored: list[str] | None = None  # sent as its runs' slugs: the runs and hyperparameters are read from their summaries

    def __reduce__(self) -> tuple:
        """Its runs and their hyperparameters cross to a worker pickled :data:`RUNS_PER_BLOB` at a
        time, each batch into bytes of its own: a pickler keeps every object it wrote alive until
        it is done (~4 KB a run), ~400 MB at once for a whole-archive page of 100,000 runs. A page
        of :data:`STORED_RUNS` runs or more whose summaries are all in the cache crosses as their
        slugs, and the worker reads them: its pickle (~0.5 KB a run) was the largest transient
        of a large build, held with the pickler's buffer and its copy."""
        runs, hps = self.group.runs, self.hps
        rest = (self.config, self.urls, self.cache, self.keys, self.out, self.live)
        if self.cache is not None and len(runs) >= STORED_RUNS and all(r.slug in self.keys for r in runs):
            return _loaded_group_job, (self.group.key, self.group.slug, [], rest, [r.slug for r in runs])
        blobs = [
            pickle.dumps((runs[a : a + RUNS_PER_BLOB], hps[a : a + RUNS_PER_BLOB]), pickle.HIGHEST_PROTOCOL)
            for a in range(0, max(len(runs), len(hps)), RUNS_PER_BLOB)
        ]
        return _loaded_group_job, (self.group.key, self.group.slug, blobs, rest)


#: runs pickled together when a comparison page's job is sent (see :meth:`GroupJob.__reduce__`)
RUNS_PER_BLOB = 1000
#: a page of this many runs is sent as their slugs (see :meth:`GroupJob.__reduce__`)
STORED_RUNS = 20_000


def _loaded_group_job(key: tuple[str, ...], slug: str, blobs: list[bytes], rest: tuple, stored: list[str] | None = None) -> GroupJob:
    runs: list[SiteRun] = []
    hps: list[dict[str, HParamValue]] = []
    for blob in blobs:
        some_runs, some_hps = pickle.loads(blob)
        runs += some_runs
        hps += some_hps
    config, urls, cache, keys, out, live = rest
    return GroupJob(compare.Group(key, slug, runs), hps, config, urls, cache, keys, out, live, stored)


def _read_stored(job: GroupJob, store: Store) -> GroupJob | str:
    """``job`` with its runs and hyperparameters read from their summaries (see
    :attr:`GroupJob.stored`); the slug of a run whose summary the cache lost."""
    runs: list[SiteRun] = []
    hps: list[dict[str, HParamValue]] = []
    for slug in job.stored or ():
        got = reuse_run(store, job.keys[slug])
        if got is None:
            return slug
        runs.append(got[0].run)
        hps.append(got[0].hparams)
    return replace(job, group=replace(job.group, runs=runs), hps=hps, stored=None)


@dataclass(eq=False, repr=False)
class GroupResult:
    written: dict[str, tuple[str, int]] | None = None  # with ``out``: what the worker wrote (sha256, size)
    files: dict[str, bytes] = field(default_factory=dict)  # else: the page's new files and their twins
    linked: list[str] = field(default_factory=list)  # ... and the pieces to link from the live build
    lost: str | None = None  # the page was not drawn: the cache lost this run's points (its slug)


class LostPoints(OSError):
    """A reused run's points are missing or damaged in the cache: the run is drawn again."""

    def __init__(self, run: SiteRun) -> None:
        super().__init__(f"the cache lost the points of run {run.name!r}")
        self.slug = run.slug


def draw_group(job: GroupJob) -> GroupResult:
    """Draw one comparison page, reusing the pieces of the live build's page whose runs did
    not change: written and linked here with ``job.out``, else returned to the caller. When the
    cache lost a run's points, nothing is drawn: the result names the run (see ``lost``)."""
    try:
        return _draw_group(job)
    except LostPoints as exc:
        return GroupResult(lost=exc.slug)


def _draw_group(job: GroupJob) -> GroupResult:
    store = Store(job.cache)
    if job.stored is not None:
        got = _read_stored(job, store)
        if isinstance(got, str):
            return GroupResult(lost=got)
        job = got
    if job.out is None:
        linked: list[str] = []

        def link(rel: str) -> bool:  # (the caller links it; if that fails it draws the page itself)
            linked.append(rel)
            return True

        files = compare_files(
            job.group,
            job.hps,
            job.config,
            Assets({}, job.urls),
            stored_points(store, job.keys),
            kept_pieces(store, job.keys, job.live.__contains__, link),
        )
        files.update({rel + ".gz": gzip_twin(data) for rel, data in list(files.items()) if needs_twin(rel, data)})
        return GroupResult(files=files, linked=linked)
    writer = job.out.writer()
    kept = kept_pieces(store, job.keys, writer.old.__contains__, writer.link_previous)
    files = compare_files(job.group, job.hps, job.config, Assets({}, job.urls), stored_points(store, job.keys), kept)
    for rel in page_names(files):
        writer.write(rel, files[rel])
    return GroupResult(written=writer.hashes)


def group_key(group: compare.Group, run_keys: dict[str, str], config: Config) -> str:
    return cache_keys.group_key(group.slug, [run_keys[r.slug] for r in group.runs], config)


def stored_points(store: Store, keys: dict[str, str]) -> compare.Points:
    """A run's points at a level of :data:`compare.LEVELS`: from the cache for the runs in
    ``keys``, else the run's own chart lines (small archives, or no cache)."""

    def points(run: SiteRun, level: int) -> list[ChartLine] | compare.Packed:
        key = keys.get(run.slug)
        if key is None:
            return run.lines
        table = store.get_points(key, level)
        if table is None:
            raise LostPoints(run)
        return summary.level_points(run.lines, table, level)

    return points


def kept_pieces(store: Store, keys: dict[str, str], have: Callable[[str], bool], link: Callable[[str], bool]) -> compare.Kept | None:
    """The pieces of comparison pages the last build kept, for the runs in ``keys`` (whose
    points are in the cache too): their heads in the cache, their files in the live build
    (``have(rel)``), linked into this one by ``link(rel)``."""
    if store.root is None:
        return None
    return compare.Kept(
        keys, cache_keys.code_fingerprint(), store.get_piece, store.put_pieces, have, link, store.get_gathered, store.put_gathered
    )
