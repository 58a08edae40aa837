"""The whole build, readable top to bottom: scan -> read -> downsample -> charts -> render -> publish."""
from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import logging
import marshal
import os
import re
import stat as stat_module
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterator
from pathlib import Path, PurePosixPath

import numpy as np

from sitegen.pages import compare, render
from sitegen.pipeline import executors, forks, readahead as prefetch, rescan, stamp
from sitegen.publish import manifest, staging as publish
from sitegen.cache import summary
from sitegen.config import Config
from sitegen.downsample import downsample
from sitegen.errors import Problem, scalar_problems
from sitegen.prepare.hparams import run_hparams
from sitegen.model import ChartLine, ReadOptions, RunData, RunSource, Series, SiteRun, SourceFile, merge_parts, grouped_columns
from sitegen.ingest import READERS
from sitegen.ingest.scan import scan
from sitegen.pipeline.stamp import Tree
from sitegen.cache.store import Store, default_cache_dir

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

log = logging.getLogger(__name__)
FORK_GRACE_S = 60  # a forked helper that takes this much longer than this process's share is ended
MIN_PARALLEL_RUNS = 8  # below this many runs to draw, a rebuild draws them in this process


@dataclass
class BuildResult:
    out: Path
    runs: int
    files: int
    problems: list[Problem] = field(default_factory=list)


def slugify(name: str) -> str:
    """A safe, unique folder name for a run: readable ASCII part plus a hash of the exact name.

    Raw names never become paths, so ``..``, absolute paths, reserved names and collisions such
    as ``a/b`` vs ``a_b`` cannot happen.
    """
    readable = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()[:48] or "run"
    return f"{readable}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def read_options(config: Config, *, verify: bool = True) -> ReadOptions:
    return ReadOptions(
        verify=verify, max_image_bytes=config.limits.max_image_bytes, max_text_chars=config.limits.max_text_chars,
        digest=True,
    )


def read_source(source: RunSource, options: ReadOptions, cache: Path | None) -> RunData:
    """Read one run; append-only formats go file by file through the decode cache."""
    reader = READERS[source.format]
    if not hasattr(reader, "decode_file"):
        return reader.read(source, options)
    store = Store(cache)
    parts = [store.read_file(path, options, reader.decode_file) for path in source.files]
    return merge_parts(source.name, reader.FORMAT, parts)


def _line_label(sub: RunData, parent: str, tag: str) -> str:
    """The legend label of a sub-run's line: the add_scalars key, else the sub-run's path."""
    if sub.hparams or sub.hparam_metrics:
        return "hparams"
    rel = PurePosixPath(sub.name).relative_to(parent).as_posix()
    for prefix in (tag + "/", tag.replace("/", "_") + "_"):
        if rel.startswith(prefix) and len(rel) > len(prefix):
            return rel[len(prefix) :]
    return rel


def _lines(run: RunData, label: str | None, config: Config, parent: str) -> list[ChartLine]:
    """One chart line per selected tag, thinned for the chart; the tags are split in one pass."""
    table = run.scalars
    if table.num_rows == 0:
        return []
    g, cols = grouped_columns(table)
    step, wall, value = cols["step"], cols["wall_time"], cols["value"]
    out = []
    for i, tag in enumerate(g.tags):
        a, b = g.bounds[i], g.bounds[i + 1]
        if b == a or not config.tag_selected(tag):
            continue
        series = downsample(step[a:b], wall[a:b], value[a:b], config.charts.points_per_chart)
        out.append(ChartLine(tag, label if label is not None else _line_label(run, parent, tag), series))
    return out


def assemble_one(source: RunSource, data: RunData, subs: list[RunData], config: Config) -> SiteRun:
    """A run as the site shows it: its sub-runs folded in and every chart line prepared."""
    lines = _lines(data, "", config, source.name)
    for sub in subs:
        lines += _lines(sub, None, config, source.name)
        if not data.hparams and sub.hparams:
            data.hparams = dict(sub.hparams)
        for m in sub.hparam_metrics:
            if m not in data.hparam_metrics:
                data.hparam_metrics.append(m)
    lines.sort(key=lambda ln: (ln.tag, ln.label))
    walls = [w for d in [data, *subs] if d.scalars.num_rows for w in _wall_range(d.scalars)]
    walls = [w for w in walls if np.isfinite(w)]
    last_steps = [ln.series.stats.last_step for ln in lines]
    parts = tuple(PurePosixPath(source.name).parts) if source.name != "." else (".",)
    experiment = data.meta.get("experiment")
    if experiment:
        parts = (experiment, data.meta.get("title") or parts[-1])
    return SiteRun(
        name=source.name, slug=slugify(source.name), title=data.meta.get("title") or source.name, parts=parts,
        data=data, sub_runs=subs, lines=lines,
        start_time=float(data.meta["start_time"]) if data.meta.get("start_time") else (min(walls) if walls else None),
        end_time=float(data.meta["end_time"]) if data.meta.get("end_time") else (max(walls) if walls else None),
        last_step=max(last_steps) if last_steps else None,
        directory=source.directory,  # sitegen.pages.runpage: env files, notes, artifacts
    )


def _wall_range(table) -> tuple[float, float]:
    """Smallest and largest wall time, NaN skipped (NaN only if all are): what Arrow's min and
    max give, without importing ``pyarrow.compute``."""
    w = table.column("wall_time").to_numpy()
    return float(np.fmin.reduce(w)), float(np.fmax.reduce(w))


def families(sources: list[RunSource]) -> list[list[RunSource]]:
    """Each top-level run followed by its sub-runs, in name order."""
    children: dict[str, list[RunSource]] = {}
    for s in sources:
        if s.parent is not None:
            children.setdefault(s.parent, []).append(s)
    return [[s, *children.get(s.name, [])] for s in sources if s.parent is None]


# The internal records below are never compared or printed: without a generated __eq__ and
# __repr__ each costs a rebuild's start less (49 dataclasses made 40 M instructions of its imports).
@dataclass(eq=False, repr=False)
class Job:
    """Everything a worker needs to turn one run family into its page and its summary."""

    family: list[RunSource]
    options: ReadOptions
    config: Config
    cache: Path | None
    urls: dict[str, str]  # asset name -> path from the site root
    nested_dirs: frozenset  # other runs' folders inside this run's folder (not artifacts)
    problems_of: list[Problem]  # scan problems (shown on the page when they concern its files)
    key: str = ""  # the run's input key: its summary is kept under it
    out: Output | None = None  # where the worker writes the run's files (None: it returns them)


@dataclass(eq=False, repr=False)
class Output:
    """Where a worker writes its run's files itself: the staging folder, the live build and the
    live manifest's entries for the run's folder (files that did not change are hard-linked).
    Writing in the workers spreads the cost of creating files over every core."""

    root: Path
    previous: Path | None
    old: dict[str, tuple[str, int]]


@dataclass(eq=False, repr=False)
class RunResult:
    run: SiteRun  # light: bulk payloads dropped, lines thinned for comparison pages
    hparams: dict
    files: dict[str, bytes]  # the run's own pages and media (empty once written)
    problems: list[Problem]
    sources: list[SourceFile]
    digests: dict[str, tuple[str, int]] = field(default_factory=dict)  # source path -> (sha256, bytes hashed)
    written: dict[str, tuple[str, int]] | None = None  # files the worker wrote: (sha256, size)
    stored: bool = False  # the summary is in the store (the run's points are read from there)
    doc: bytes = b""  # the summary as the store keeps it, in marshal's format (packed for the next build)


def light(run: SiteRun) -> SiteRun:
    """What the index and comparison pages need of a run: no images, tables or raw scalars,
    lines thinned to the comparison pages' resolution (exact statistics kept)."""
    keep = RunData(
        name=run.data.name, format=run.data.format, files=run.data.files, hparams=run.data.hparams,
        hparam_metrics=run.data.hparam_metrics, meta=run.data.meta, artifacts=run.data.artifacts,
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


def process(job: Job) -> RunResult:
    """Read one run family, draw its page and reduce it to a summary (runs in a worker); with
    ``job.out``, also write the page and keep the summary in the store."""
    result = draw(job)
    if job.out is None:
        return result
    writer = publish.Writer(job.out.root, job.out.previous, job.out.old, replace=True)
    return replace(keep_run(result, writer, Store(job.cache), job.key), written=writer.hashes)


def keep_run(result: RunResult, writer: publish.Writer, store: Store, key: str) -> RunResult:
    """Write a drawn run's files and keep its summary under ``key``; the result without its
    files, and without its lines' points when the store has them (then memory does not grow
    with the archive: the comparison pages read them back one run at a time)."""
    pages = page_names(result.files)
    for rel in pages:
        writer.write(rel, result.files[rel], twin=result.files.get(rel + ".gz"))
    text = store.put_summary(key, *summary.to_doc(
        result.run, result.hparams, pages, result.problems, result.sources, result.digests))
    kept = text is not None
    # the summary as the next build reads it back (plain JSON data: lists, string keys, floats)
    return replace(result, files={}, run=summary.without_points(result.run) if kept else result.run, stored=kept,
                   doc=marshal.dumps(json.loads(text)) if kept else b"")


def page_names(files: dict[str, bytes]) -> list[str]:
    """The files of a run, without the ``.gz`` twins made beside them."""
    return sorted(rel for rel in files if not (rel.endswith(".gz") and rel[:-3] in files))


def source_digests(sources: list[SourceFile]) -> dict[str, tuple[str, int]]:
    """SHA-256 of each log file over the bytes that were read, for the manifest: taken by the
    reader while it had the bytes (or kept with the decode cache's entry), else hashed here, in
    the worker that just read the file, instead of reading the whole archive again in the main
    process."""
    out = {}
    for f in sources:
        if f.sha256:
            out[str(f.path)] = (f.sha256, f.size)
            continue
        try:
            out[str(f.path)] = manifest.sha256_file(f.path, f.size)
        except OSError:
            pass
    return out


def draw(job: Job) -> RunResult:
    """Read one run family, draw its page and reduce it to a summary."""
    datas = [read_source(s, job.options, job.cache) for s in job.family]
    site_run = assemble_one(job.family[0], datas[0], datas[1:], job.config)
    problems = [p for d in datas for p in d.problems]
    for source, d in zip(job.family, datas):
        # steps that go backwards or repeat are legal (resumed runs) but worth a line in the report
        problems += scalar_problems(d.scalars, str(source.directory), wall_times=False, steps=True, repeats=d.format != "mlflow")
    hp = run_hparams([site_run.data, *site_run.sub_runs])
    files = render.run_files(site_run, hp, job.config, job.urls, [*job.problems_of, *problems], job.nested_dirs)
    # compress here, in the worker, so the main process only writes
    files.update({rel + ".gz": publish.gzip_twin(data) for rel, data in list(files.items()) if publish.needs_twin(rel, data)})
    sources = [f for d in datas for f in d.files]
    return RunResult(light(site_run), hp, files, problems, sources, source_digests(sources))


def run_all(jobs: list[Job], *, workers: int, executor: str = "local", scheduler: str | None = None,
            pool=None) -> Iterator[RunResult]:
    """``process`` for every job, results in job order, on the chosen executor."""
    return executors.map_jobs(jobs, executor=executor, scheduler=scheduler, workers=workers, pool=pool)


@dataclass(eq=False, repr=False)
class GroupJob:
    """One comparison page, drawn and written by a worker."""

    group: compare.Group  # its runs: summaries; the points of those in ``keys`` are in the store
    hps: list[dict]  # of group.runs
    config: Config
    urls: dict[str, str]
    cache: Path | None
    keys: dict[str, str]  # slug -> the key its summary is stored under
    out: Output


def draw_group(job: GroupJob) -> dict[str, tuple[str, int]]:
    """Draw and write one comparison page (in a worker); returns what it wrote."""
    store = Store(job.cache)
    writer = publish.Writer(job.out.root, job.out.previous, job.out.old, replace=True)
    files = render.compare_files(job.group, job.hps, job.config, render.Assets({}, job.urls),
                                 stored_points(store, job.keys), kept_pieces(store, job.keys, writer))
    for rel in page_names(files):
        writer.write(rel, files[rel])
    return writer.hashes


def share(groups: list[compare.Group], workers: int, runs: int,
          cost: float = 1.6, fixed: int = 5, index: float = 0.3) -> tuple[list[compare.Group], list[compare.Group]]:
    """Comparison pages for the workers (largest first) and for this process, which also draws
    the index of ``runs`` runs: balanced by run count, a page sent to a worker costing
    ``cost`` times more (a spawned worker's: its runs' summaries are pickled and sent, 60% more
    measured on a 500-run page; a forked child has them already). ``fixed``: a page's cost
    beyond its runs, in runs (a 10-run page took 5-10 ms, a 500-run page 40-70 ms). ``index``:
    the index's cost per run.

    For the forked helper (its pages written in the child too, as this process writes its own):
    ``fixed=40, index=0.55`` fit what a 3-file appended rebuild of the 500-run benchmark measured
    (the pages' unchanged pieces linked, not drawn): 10-run pages 3-6 ms, 100-run pages 9-20 ms,
    the 500-run page 35-55 ms and the index 20-35 ms. With ``index=0.3`` the helper finished
    20 ms before this process did."""
    loads = [0.0] * workers + [index * runs]
    lanes: list[list[compare.Group]] = [[] for _ in loads]
    for g in sorted(groups, key=lambda g: -len(g.runs)):
        size = len(g.runs) + fixed
        k = min(range(len(loads)), key=lambda k: loads[k] + size * (1.0 if k == workers else cost))
        loads[k] += size * (1.0 if k == workers else cost)
        lanes[k].append(g)
    theirs = sorted((g for lane in lanes[:-1] for g in lane), key=lambda g: -len(g.runs))
    return theirs, lanes[-1]


def stored_points(store: Store, keys: dict[str, str]) -> compare.Points:
    """A run's points at a level of :data:`compare.LEVELS`: from the store for the runs in
    ``keys`` (as :class:`compare.Packed`), else the run's own chart lines (small archives, or
    no cache)."""
    def points(run: SiteRun, level: int) -> list[ChartLine] | compare.Packed:
        key = keys.get(run.slug)
        if key is None:
            return run.lines
        table = store.get_points(key, level)
        if table is None:
            raise OSError(f"the cache lost the summary of run {run.name!r} during the build")
        return summary.level_points(run.lines, table, level)
    return points


def kept_pieces(store: Store, keys: dict[str, str], writer: publish.Writer | None = None) -> compare.Kept | None:
    """The comparison pages' pieces kept by the last build, for the runs in ``keys`` (whose
    points are in the store too: see :func:`stored_points`): their heads in the store, their
    files in the live build, linked by ``writer`` into this one."""
    if store.root is None:
        return None
    have = None if writer is None else writer.old.__contains__
    link = None if writer is None else writer.link_previous
    return compare.Kept(keys, summary.code_fingerprint(), store.get_piece, store.put_pieces, have, link)


class EarlyGroups:
    """Comparison pages drawn by this process while the workers still draw runs: it is idle
    then, and each page drawn then is one fewer at the end, when the index and the largest
    pages are left (on a 500-run archive the end took 0.8 s, a seventh of the build).

    Runs arrive in job order, and a group's runs are neighbours in it (the run names sharing a
    prefix sort together): a group is drawn once the first run after it arrives. Nothing depends
    on that order being right: :meth:`drawn` answers only for a group whose runs are exactly the
    ones it was drawn with, and the caller draws any other again."""

    def __init__(self, draw: Callable[[compare.Group, list[int]], compare.Group]) -> None:
        """``draw(group, members)``: fills in the group's runs (``members``: job indices), draws
        (or links) its page and returns it."""
        self._draw = draw
        self._open: dict[tuple[str, ...], list[int]] = {}  # group key -> its runs so far (job indices)
        self._done: dict[tuple[str, ...], tuple[str, ...]] = {}  # group key -> the slugs drawn

    def add(self, index: int, run: SiteRun) -> None:
        """Run ``index`` (job order) has arrived: close the groups it does not belong to."""
        prefixes = {tuple(run.parts[:k]) for k in range(1, len(run.parts))}
        for key in [k for k in self._open if k not in prefixes]:
            self._close(key)
        for key in prefixes:
            self._open.setdefault(key, []).append(index)

    def _close(self, key: tuple[str, ...]) -> None:
        members = self._open.pop(key)
        group = self._draw(compare.Group(key, compare.group_slug(key)), members)
        self._done[key] = tuple(r.slug for r in group.runs)

    def drawn(self, group: compare.Group) -> bool:
        """Whether ``group`` (as the whole build sees it) was drawn here already."""
        return self._done.get(group.key) == tuple(r.slug for r in group.runs)


def build(
    archive: Path | str, out: Path, *, config: Config, verify: bool = True, cache: Path | str | None = None,
    use_cache: bool = True, jobs: int = 0, keep: int = 3, source_date_epoch: int | None = None,
    progress: Callable[[str, int, int], None] | None = None, executor: str = "local", scheduler: str | None = None,
    pool: ProcessPoolExecutor | None = None, durable: bool = False, tree: Tree | None = None,
) -> BuildResult:
    """Build the site for ``archive`` into ``out`` (replaced atomically).

    Each run family is read, drawn and reduced to a small summary on its own (in worker
    processes for large archives), and its files go straight to disk, so memory follows the
    largest run, not the archive. Then the index and comparison pages are drawn from the
    summaries. ``out`` becomes a symlink swapped atomically to the new build; ``keep`` builds
    are kept. ``source_date_epoch`` (``SOURCE_DATE_EPOCH``) is the only time that may appear in
    the output. ``progress(stage, step, steps)`` is told when each stage starts.

    ``cache``: the decode cache folder (default :func:`sitegen.cache.store.default_cache_dir`);
    ``use_cache=False`` decodes everything again and writes no cache.

    ``archive`` and ``cache`` may be URLs (``s3://bucket/logs``, see :mod:`sitegen.tools.remote`): the
    archive is mirrored into a local folder first; a URL cache is pulled before the build and
    its changed entries pushed after it. ``executor="dask"`` decodes on a Dask cluster
    (``scheduler``: its address; None: a local cluster of ``jobs`` workers), see
    :mod:`sitegen.pipeline.executors`. ``pool``: a :func:`sitegen.pipeline.executors.local_pool` the caller started
    ahead (and shuts down), used if the build needs worker processes. ``durable``: the build is on
    storage before it goes live (see :class:`sitegen.publish.staging.Staging`). ``tree``: what the
    command's stat walk saw below ``archive`` (:func:`sitegen.pipeline.stamp.inputs`), from which a
    rebuild of an archive that kept its shape takes the last build's scan (:mod:`sitegen.pipeline.rescan`).
    """
    given = pool
    loc = _localize(archive, cache, use_cache)
    archive, cache = loc.archive, loc.cache
    cache = (cache or default_cache_dir()) if use_cache else None
    store = Store(cache)
    problems: list[Problem] = []
    step = progress or (lambda stage, i, n: None)
    step("scanning", 1, 4)
    scan_options = {"include": config.runs.include, "exclude": config.runs.exclude, "tabular": config.formats.metric_files}
    if tree is not None and tree.root != os.fspath(Path(archive)):
        tree = None
    scan_key = rescan.scan_key(Path(archive), scan_options, summary.code_fingerprint())
    record = rescan.load(cache, Path(out), tree, scan_key)
    if record is not None:  # the archive kept its shape: the last build's scan
        sources, real = record.sources, record.real
        problems.extend(record.problems)
    else:
        sources = scan(
            archive, include=config.runs.include, exclude=config.runs.exclude,
            patterns={"tabular": config.formats.metric_files}, problems=problems,
        )
        real = _realpaths([s.directory for s in sources])
    fams = families(sources)
    dirs = sorted(set(real.values()))
    options = read_options(config, verify=verify)
    assets = render.assets(config.language, store)
    size = _log_bytes(sources)
    if executor == "local":
        workers = 1 if size < executors.PARALLEL_MIN_BYTES else (jobs or os.cpu_count() or 1)
    else:
        workers = jobs  # the size of the local cluster when no scheduler is given (0: one per core)
    scan_problems = list(problems)  # a snapshot: workers get a copy, the list grows below
    names = [str(d) for d in dirs]
    job_list = [Job(f, options, config, cache, assets.urls, _nested(real[f[0].directory], dirs, names), scan_problems) for f in fams]
    common = summary.common_key(job_list[0]) if job_list else ""
    folders = [os.fspath(j.family[0].directory) for j in job_list]
    keys = [k or summary.run_key(j, common) for j, k in zip(job_list, rescan.keys_for(record, tree, folders, common))]
    site_key = _site_key(keys, assets.urls, scan_problems, Path(archive), source_date_epoch)
    same = _unchanged(Path(out), site_key)
    if same is not None:  # the live build was made from exactly these inputs: nothing to do
        rescan.save(cache, Path(out), tree, scan_key, sources, scan_problems, real, folders, keys, common)
        step("unchanged", 4, 4)
        publish.tidy(Path(out), keep)
        loc.push()
        return same
    results: list[RunResult | None] = [None] * len(job_list)
    run_keys: dict[str, str] = {}
    stored: set[str] = set()  # runs whose line points are in the store only
    pool = None
    with contextlib.ExitStack() as stack, publish.Staging(Path(out), keep=keep, durable=durable) as stage:
        for rel, data in assets.files.items():
            stage.write(rel, data)
        previous = _previous_runs(stage.previous)
        slugs = [slugify(j.family[0].name) for j in job_list]
        drawn = [i for i, (slug, key) in enumerate(zip(slugs, keys)) if previous.get(slug) != key]
        changed = len(drawn)
        if executor == "local":  # their log files (and cache entries) are read from disk in the background meanwhile
            ahead = prefetch.ReadAhead(lambda k: _inputs(job_list[drawn[k]], store), len(drawn))
            stack.callback(ahead.close)
            place = {i: k for k, i in enumerate(drawn)}
        pool_size = 0
        if executor == "local" and workers > 1 and changed >= MIN_PARALLEL_RUNS:
            # started before the unchanged runs are reused, so the workers import meanwhile
            pool = given or stack.enter_context(executors.local_pool(workers))
            if given is None:
                executors.warm(pool, workers)
            pool_size = workers
            # this process draws the index and some comparison pages at the end: it loads their
            # templates (and imports jinja2) now, while the workers start, instead of then
            render.load_templates(config.language)
        # unchanged runs: their files linked from the live build (in the background), their
        # summaries from the store meanwhile
        same = [i for i, (slug, key) in enumerate(zip(slugs, keys)) if previous.get(slug) == key]
        own = {i: list(stage.old_under(f"runs/{slugs[i]}/")) for i in same}
        wait_links = stage.link_many([rel for i in same for rel in own[i]])
        pack = store.get_pack(stamp.slot_name(Path(out))) if same else {}
        store.read_ahead([keys[i] for i in same if keys[i] not in pack])
        reused = {i: _reuse(store, keys[i], pack.get(keys[i])) for i in same}
        # the links take as long as the rest of this stage: when every unchanged run can be
        # reused, they are checked only once the changed runs are drawn (see ``lost`` below)
        later = executor == "local" and all(got is not None and set(got[1]) <= set(own[i]) for i, got in reused.items())
        missing = set() if later else wait_links()
        for i, got in reused.items():
            if got is None or missing.intersection(own[i]) or not set(got[1]) <= set(own[i]):
                stage.unlink(own[i])  # drawn again
            else:
                results[i] = got[0]
                stored.add(got[0].run.slug)
        todo = [i for i, r in enumerate(results) if r is None]
        if same and len(todo) < MIN_PARALLEL_RUNS:
            # a rebuild that reuses nearly every run has done its bulk: the builds past --keep
            # are removed now, beside the few runs drawn here (at the end the removal shared the
            # second core with the comparison pages' forked helper, and the commit waited for it)
            stage.retire_old()
        if executor == "local" and workers > 1 and len(todo) >= MIN_PARALLEL_RUNS and pool is None:  # reuse failed
            pool = given or stack.enter_context(executors.local_pool(workers))
            pool_size = workers
        step(f"reading and drawing {len(todo)} of {len(fams)} runs", 2, 4)
        def dispatch(i: int) -> Job:
            job = replace(job_list[i], key=keys[i])
            if executor == "local":  # a Dask worker may not see this folder: it returns the files
                slug = slugify(job.family[0].name)
                job.out = Output(stage.root, stage.previous, stage.old_under(f"runs/{slug}/"))
            return job

        n_workers = workers if len(todo) >= MIN_PARALLEL_RUNS or executor != "local" else 1
        results_iter = run_all([dispatch(i) for i in todo], workers=n_workers, executor=executor, scheduler=scheduler,
                               pool=pool)
        # comparison pages drawn while the workers draw runs (see EarlyGroups)
        keys_of: dict[str, str] = {}  # slug -> input key, of the runs arrived so far
        group_keys: dict[str, str] = {}  # "compare/<slug>" -> the group's input key

        def group_key(g: compare.Group) -> str:
            key = group_keys["compare/" + g.slug] = summary.group_key(g.slug, [keys_of[r.slug] for r in g.runs], config)
            return key

        page_files: dict[str, list[str]] = {}  # slug -> the files of its page drawn here

        def unchanged_page(g: compare.Group, key: str) -> list[str] | None:
            """The live build's files of the group's page (its page and pieces, with their
            twins) when its inputs did not change, else None; any copy of it drawn in this build
            is taken back first (drawn early with other runs, or a group met twice)."""
            stage.unlink(page_files.pop(g.slug, []))
            old = stage.old_under(f"compare/{g.slug}/")
            if previous.get("compare/" + g.slug) != key or f"compare/{g.slug}/index.html" not in old:
                return None
            return list(old)

        def reused(g: compare.Group, key: str) -> bool:
            """Whether the group's page is linked from the live build, here and now."""
            rels = unchanged_page(g, key)
            if rels is None:
                return False
            done: list[str] = []
            for rel in rels:
                if not rel.endswith(".gz") or rel[:-3] not in rels:  # (a twin comes with its file)
                    if not stage.link_previous(rel):
                        stage.unlink(done)
                        return False
                    done.append(rel)
            return True

        def draw_here(g: compare.Group, hps: list[dict], held: dict[str, str]) -> list[str]:
            """Draw the group's page in this process and write it (its unchanged pieces linked
            from the live build); the names of the files written."""
            files = render.compare_files(g, hps, config, assets, stored_points(store, held), kept_pieces(store, held, stage))
            names = page_names(files)
            for rel in names:
                stage.write(rel, files[rel])
            return names

        def draw_now(g: compare.Group, members: list[int]) -> compare.Group:
            """One comparison page, here and now (its runs: ``members``), or linked from the live
            build when its inputs did not change."""
            g.runs = [results[j].run for j in members]
            if reused(g, group_key(g)):
                return g
            held = {r.slug: keys_of[r.slug] for r in g.runs if r.slug in stored}
            names = draw_here(g, [results[j].hparams for j in members], held)
            # with its pieces linked from the live build (their heads: what kept_pieces put)
            page_files[g.slug] = names + [rel for rel in stage.old_under(f"compare/{g.slug}/")
                                          if rel in stage.hashes and rel not in names and not rel.endswith(".gz")]
            return g

        early = EarlyGroups(draw_now) if pool is not None else None
        frontier = 0  # every run before it has arrived
        for i, result in zip(todo, results_iter):
            if result.written is not None:
                stage.adopt(result.written)
            else:  # a Dask worker drew it: this process writes it
                result = keep_run(result, stage, store, keys[i])
            results[i] = result
            if executor == "local" and i in place:
                ahead.done(place[i])
            if result.stored:
                stored.add(result.run.slug)
            while early is not None and frontier < len(results) and results[frontier] is not None:
                keys_of[results[frontier].run.slug] = keys[frontier]
                early.add(frontier, results[frontier].run)
                frontier += 1
        if later:  # reused runs whose files could not be linked (the live build lost them, or a
            # power cut left them empty): drawn again now (their keys, and pages, are the same)
            missing = wait_links()
            lost = [i for i in same if missing.intersection(own[i])]
            for i in lost:
                stage.unlink(own[i])
                stored.discard(results[i].run.slug)
            for i, result in zip(lost, run_all([dispatch(i) for i in lost], workers=1)):
                stage.adopt(result.written)
                results[i] = result
                if result.stored:
                    stored.add(result.run.slug)

        if executor == "local":  # every run is drawn: its read-ahead thread ends now (not later, by
            ahead.close()  # chance: the comparison pages' forked helper needs this thread alone)
        done = [r for r in results if r is not None]
        for r, key in zip(done, keys):
            run_keys[r.run.slug] = key
            problems.extend(r.problems)
        step("drawing the index and comparisons", 3, 4)
        stage.flush_early()
        stage.retire_old()
        skip = set()
        groups = compare.groups([r.run for r in done])
        linked: dict[str, tuple[compare.Group, list[str]]] = {}  # pages linked from the live build
        for g in groups:
            key = run_keys["compare/" + g.slug] = summary.group_key(g.slug, [run_keys[r.slug] for r in g.runs], config)
            if early is not None and early.drawn(g) and group_keys.get("compare/" + g.slug) == key:
                skip.add(g.slug)  # drawn (or linked) while the runs were drawn
            elif (rels := unchanged_page(g, key)) is not None:
                skip.add(g.slug)
                linked[g.slug] = (g, rels)
        # by ``cp -l`` in the background while the pages that changed are drawn (a page is a
        # dozen files with its pieces: one by one, the links of 49 unchanged pages took 30 ms)
        wait_pages = stage.link_many([rel for _, rels in linked.values() for rel in rels])
        held = {slug: run_keys[slug] for slug in stored}
        runs, hps = [r.run for r in done], [r.hparams for r in done]
        hp_of = {id(r): hp for r, hp in zip(runs, hps)}

        def group_job(g: compare.Group) -> GroupJob:
            return GroupJob(g, [hp_of[id(r)] for r in g.runs], config, assets.urls, cache,
                            {r.slug: held[r.slug] for r in g.runs if r.slug in held},
                            Output(stage.root, stage.previous, stage.old_under(f"compare/{g.slug}/")))

        pages = [g for g in groups if g.slug not in skip]
        if pool is None:  # few runs drawn: sending pages to spawned workers would cost more than it saves
            # a forked child draws part of the pages while this process draws the rest and the
            # index (see sitegen.pipeline.forks; where it cannot fork, or the child fails, this process
            # draws them all)
            theirs = share(pages, 1, len(runs), cost=1.0, fixed=40, index=0.55)[0] if executor == "local" and len(pages) > 1 \
                else []
            if theirs:  # the templates both processes draw with, loaded once, before the fork
                render.load_templates(config.language)
            helper = forks.Child(lambda: [draw_group(group_job(g)) for g in theirs]) if theirs else None
            if helper is not None and helper.pid:
                stack.callback(helper.stop)
            else:
                theirs = []
            started = time.monotonic()
            render.cross_files(runs, hps, config, assets, problems, skip=frozenset(skip) | {g.slug for g in theirs},
                               points=stored_points(store, held), kept=kept_pieces(store, held, stage), write=stage.write)
            if theirs:  # (its share is about this process's: far longer means it hangs)
                got = helper.result(timeout=FORK_GRACE_S + 20 * (time.monotonic() - started))
                for hashes in got if got is not None else map(draw_group, map(group_job, theirs)):
                    stage.adopt(hashes)
        else:  # the comparison pages shared between the workers and this process, which also draws the index
            theirs, mine = share(pages, pool_size, len(runs))

            def here() -> None:
                for rel, data in render.index_files(runs, hps, groups, config, assets, problems).items():
                    stage.write(rel, data)
                for g in mine:
                    stage.adopt(draw_group(group_job(g)))

            # all sent at once (a result is only a list of hashes): with a small window the workers
            # sat idle while this process drew its own share before taking their results
            for hashes in executors.map_calls(pool, draw_group, map(group_job, theirs), window=max(1, len(theirs)), before=here):
                stage.adopt(hashes)
            # the workers wind down while the manifest is written, and are joined before the
            # build returns (shutdown(wait=False) would leave them to the interpreter's exit,
            # where multiprocessing's clean-up raced with the executor's own thread)
            winding = threading.Thread(target=pool.shutdown, daemon=True)
            winding.start()
            stack.callback(winding.join)
        lost = wait_pages()
        for g, rels in linked.values():
            if lost.intersection(rels):  # the live build lost some of its files: drawn after all
                stage.unlink([rel for rel in rels if not rel.endswith(".gz")])
                draw_here(g, [hp_of[id(r)] for r in g.runs], {r.slug: held[r.slug] for r in g.runs if r.slug in held})
        stage.write("build-report.json", report(problems))
        step("publishing", 4, 4)
        digests = {(p, n): d for r in done for p, d in r.digests.items() for n in [d[1]]}

        def hasher(path: Path, size: int) -> tuple[str, int]:
            return digests.get((str(path), size)) or store.sha256(path, size)

        stage.write(manifest.MANIFEST, manifest.make_from_hashes(
            stage.hashes, [f for r in done for f in r.sources], archive=Path(archive),
            source_date_epoch=source_date_epoch, hasher=hasher, runs=run_keys, site_key=site_key,
        ))
        stage.commit()
    store.put_pack(stamp.slot_name(Path(out)), {key: r.doc for r, key in zip(done, keys) if r.doc})
    rescan.save(cache, Path(out), tree, scan_key, sources, scan_problems, real, folders, keys, common)
    loc.push()
    if HOLD is not None:
        HOLD.append(locals())
    return BuildResult(Path(out), len(done), len(stage.hashes), problems)


#: Set to a list by the ``sitegen`` command, which leaves with ``os._exit`` once the build is
#: done: each build's objects are handed to it instead of being freed one by one as
#: :func:`build` returns (every run's summary and the comparison pages' data: 6-9 ms of a
#: 0.45 s rebuild). None for callers in Python.
HOLD: list | None = None


class _Local:
    """A local archive and cache: nothing to mirror, pull or push."""

    def __init__(self, archive: Path | str, cache: Path | str | None) -> None:
        self.archive, self.cache = Path(archive), None if cache is None else Path(cache)

    def push(self) -> None:
        pass


def _localize(archive: Path | str, cache: Path | str | None, use_cache: bool):
    """The local folders of the build (:func:`sitegen.tools.remote.localize`); :mod:`sitegen.tools.remote`
    (5 ms of imports) only for a URL."""
    if not any(isinstance(s, str) and "://" in s for s in (archive, cache)):
        return _Local(archive, cache)
    from sitegen.tools import remote

    return remote.localize(archive, cache, use_cache=use_cache)


def _site_key(keys: list[str], urls: dict[str, str], scan_problems: list[Problem], archive: Path,
              source_date_epoch: int | None) -> str:
    """Everything the whole site depends on: each run's input key (code, config, options, log
    files and folder), the assets, the scan's problems, the archive and the build date."""
    doc = [keys, urls, [[p.path, p.offset, p.kind, p.message] for p in scan_problems], str(archive), source_date_epoch]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


def _unchanged(out: Path, site_key: str) -> BuildResult | None:
    """The live build, when it was made from the same inputs (its manifest's site key) and is
    still whole (every file of its manifest present, with its size): a nightly rebuild of an
    unchanged archive then costs a scan and a few stats instead of a new build."""
    live = stamp.whole(out, site_key)
    return None if live is None else BuildResult(out, live.runs, live.files, live.problems)


def _log_bytes(sources: list[RunSource]) -> int:
    """The bytes of the archive's log files (regular files only: one ``stat`` each)."""
    size = 0
    for s in sources:
        for f in s.files:
            try:
                st = os.stat(f)
            except OSError:
                continue
            if stat_module.S_ISREG(st.st_mode):
                size += st.st_size
    return size


def _realpaths(folders: list[Path]) -> dict[Path, Path]:
    """``{folder: folder.resolve()}``, resolving each parent once: run folders share their
    parents, and resolving 500 of them one by one took 0.1 s of a rebuild that changes nothing."""
    memo: dict[str, str] = {}

    def real(path: str) -> str:
        got = memo.get(path)
        if got is None:
            parent, name = os.path.split(path)
            if not name or parent == path or os.path.islink(path):
                got = os.path.realpath(path)
            else:
                got = os.path.join(real(parent), name)
            memo[path] = got
        return got

    return {f: Path(real(os.path.abspath(f)) if ".." not in f.parts else os.path.realpath(f)) for f in folders}


def _nested(root: Path, dirs: list[Path], names: list[str]) -> frozenset:
    """The other run folders inside ``root`` (resolved); ``dirs`` sorted (``names``: as
    strings), so they form one range."""
    prefix = str(root).rstrip("/") + "/"
    i = bisect.bisect_left(names, prefix)
    out = []
    while i < len(names) and names[i].startswith(prefix):
        out.append(dirs[i])
        i += 1
    return frozenset(out)


def _previous_runs(previous: Path | None) -> dict[str, str]:
    """``{slug: input key}`` of the runs of the live build (from its manifest)."""
    if previous is None:
        return {}
    try:
        runs = manifest.read_live(previous).get("runs", {})
        return {k: v for k, v in runs.items() if isinstance(k, str) and isinstance(v, str)}
    except (OSError, ValueError, AttributeError):
        return {}


def _inputs(job: Job, store: Store) -> list[str]:
    """The files drawing ``job`` reads: its log files and their decode cache entries."""
    logs = [f for s in job.family for f in s.files]
    return [str(f) for f in logs] + [e for e in map(store.entry_file, logs) if e is not None]


def _reuse(store: Store, key: str, packed: bytes | None = None) -> tuple[RunResult, list[str]] | None:
    """A run whose inputs did not change, from its summary (``packed`` by the last build, in
    marshal's format, else from the store), and the names of its pages (linked from the live
    build); None when the store lost it."""
    doc = None
    if packed is not None:
        try:
            doc = marshal.loads(packed)
        except (ValueError, EOFError, TypeError):
            packed = None
    if doc is None:
        doc = store.get_summary(key)
        packed = None
    if doc is None:
        return None
    try:
        run, hp, pages, problems, sources = summary.from_doc(doc)
        digests = {p: (d, n) for p, (d, n) in doc.get("digests", {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError):  # JSON, but not a summary: draw the run again
        log.info("run summary %s unusable; drawing the run again", key)
        return None
    return RunResult(run, hp, {}, problems, sources, digests, stored=True, doc=packed or marshal.dumps(doc)), pages


def report(problems: list[Problem]) -> bytes:
    """``build-report.json``: every problem found while reading, for CI and audits."""
    items = [{"path": p.path, "offset": p.offset, "kind": p.kind, "message": p.message} for p in problems]
    kinds: dict[str, int] = {}
    for p in problems:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    files = sorted({p.path for p in problems})
    doc = {"problems": len(items), "kinds": dict(sorted(kinds.items())), "damaged_files": files, "items": items}
    return (json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
