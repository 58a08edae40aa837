"""The build, as a list of stages over one :class:`~sitegen.pipeline.plan.Plan`:
scan and plan -> reuse unchanged runs -> read and draw changed runs -> compare with the live
build -> comparison pages (on the executor) while the index, the trend pages and what's new are
drawn here -> report and manifest -> switch the site live."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from sitegen.cache import keys as cache_keys
from sitegen.cache import table
from sitegen.config import Config
from sitegen.errors import Problem, still_writing
from sitegen.pages import changes as changes_page
from sitegen.pages import compare, indexdata
from sitegen.pages.i18n import translator
from sitegen.pages.index import index_files, key_metrics, running
from sitegen.pages.trends import trend_files
from sitegen.pipeline.executors import Dask, Executor, LocalPool, Serial
from sitegen.pipeline.jobs import (
    GroupJob,
    GroupResult,
    Output,
    RunJob,
    draw_group,
    draw_run,
    group_key,
    keep_summary,
    page_names,
    process_run,
    reuse_run,
    run_inputs,
    share_paths,
    write_run,
)
from sitegen.pipeline.locks import held
from sitegen.pipeline.plan import Plan, make_plan
from sitegen.pipeline.readahead import ReadAhead
from sitegen.prepare import changes, gates, trends
from sitegen.publish import manifest
from sitegen.publish.live import PAGE_KEYS, folders, whole
from sitegen.publish.staging import Staging, tidy
from sitegen.resources import default_cache_dir
from sitegen.tools.remote import Localized, local_cache_dir, localize

log = logging.getLogger(__name__)

#: worker processes are started for a stage with at least MIN_PARALLEL_ITEMS runs (or pages) to
#: draw, and either MIN_PARALLEL_BYTES of logs or MIN_PARALLEL_RUNS items (a run costs a few
#: milliseconds to draw however small its logs): below, starting them would cost more than it saves
MIN_PARALLEL_ITEMS = 8
MIN_PARALLEL_BYTES = 64 << 20
MIN_PARALLEL_RUNS = 500


@dataclass
class BuildOptions:
    """How to build. ``cache``: the decode cache folder or URL (None: ``~/.cache/sitegen``);
    ``use_cache=False`` decodes everything again and keeps nothing. ``keep``: builds kept for
    rollback, the live one included. ``source_date_epoch``: the only time that may appear in the
    output. ``durable``: the build is on storage before it goes live. ``executor``: where runs are
    drawn (None: worker processes of this machine when the archive is large enough).
    ``progress(stage, step, steps)`` is told when each stage starts. ``wait``: seconds to wait
    for another build that holds the site or the cache (None: see :func:`~sitegen.pipeline.locks.held`)."""

    config: Config = field(default_factory=Config)
    verify: bool = True
    cache: Path | str | None = None
    use_cache: bool = True
    keep: int = 3
    source_date_epoch: int | None = None
    durable: bool = False
    executor: Executor | None = None
    progress: Callable[[str, int, int], None] | None = None
    wait: float | None = None


@dataclass
class BuildResult:
    out: Path
    runs: int
    files: int
    problems: list[Problem] = field(default_factory=list)
    news: dict | None = field(default=None, repr=False)  # changes.json of the new build, its runs' states as RunState
    folders: list[str] = field(default_factory=list, repr=False)  # the live build's folders (relative), for its seal

    @property
    def changes(self) -> dict | None:
        """``changes.json`` of the new build, as written; None: the live build was kept."""
        return None if self.news is None else {**self.news, "runs": [changes.to_json(s) for s in self.news["runs"]]}


def build(archive: Path | str, out: Path | str, options: BuildOptions | None = None) -> BuildResult:
    """Build the site of ``archive`` (a folder, or a URL: see :mod:`sitegen.tools.remote`) into
    ``out``, which becomes a symlink switched atomically to the new build."""
    options = options or BuildOptions()
    step = options.progress or (lambda stage, i, n: None)
    cache = (local_cache_dir(options.cache) or default_cache_dir()) if options.use_cache else None
    with held(Path(out), cache, options.wait):  # (before a URL cache is pulled into that folder)
        local = localize(archive, options.cache, use_cache=options.use_cache)
        return _build(local, Path(out), cache, options, step)


def _build(local: Localized, out: Path, cache: Path | None, options: BuildOptions, step: Callable[[str, int, int], None]) -> BuildResult:
    step("scanning", 1, 4)
    plan = make_plan(local.archive, out, cache, config=options.config, verify=options.verify, source_date_epoch=options.source_date_epoch)
    live = whole(plan.out, plan.site_key)
    if live is not None:  # the live build was made from exactly these inputs
        step("unchanged", 4, 4)
        tidy(plan.out, options.keep)
        local.push()
        return BuildResult(plan.out, live.runs, live.files, live.problems, folders=folders(live.doc["files"]))
    with (
        options.executor or LocalPool() as executor,
        Staging(plan.out, keep=options.keep, durable=options.durable) as stage,
        table.Writer(_table(plan)) as summaries,
    ):
        write_assets(plan, stage)
        reuse_runs(plan, stage, summaries)
        step(f"reading and drawing {len(plan.to_draw())} of {len(plan.jobs)} runs", 2, 4)
        draw_runs(plan, stage, executor, summaries)
        news = compare_with_live(plan)
        step("drawing the index and comparisons", 3, 4)
        pages = send_pages(plan, stage, executor)  # the comparison pages go to the workers,
        write_index(plan, stage, news)  # and this process meanwhile draws the index,
        trend_keys = draw_trends(plan, stage, news)  # the trend pages
        write_changes(plan, stage, news)  # and what's new
        take_pages(plan, stage, pages)
        step("publishing", 4, 4)
        problems = write_report_and_manifest(plan, stage, {**pages.keys, **trend_keys})
        stage.commit()
        summaries.commit()
    local.push()
    return BuildResult(plan.out, len(plan.jobs), len(stage.hashes), problems, news, folders(stage.hashes))


def write_assets(plan: Plan, stage: Staging) -> None:
    for rel, data in plan.assets.files.items():
        stage.write(rel, data)


def reuse_runs(plan: Plan, stage: Staging, summaries: table.Writer) -> None:
    """Runs the live build drew from the same inputs: their files are linked from it, their
    summaries come from the last build's run table (one pass), else from the cache's summary
    files. A run whose summary or files were lost is drawn again. Each summary used goes into
    this build's table (``summaries``)."""
    wanted: dict[str, list[int]] = {}
    for i in plan.unchanged_runs():
        wanted.setdefault(plan.keys[i], []).append(i)
    path = _table(plan)
    for key, text in table.read(path, wanted) if path is not None else ():
        for i in wanted.pop(key, ()):
            _reuse_run(plan, stage, i, text, summaries)
    for key, runs in wanted.items():  # (not in the table: from their summary files)
        kept = plan.store.get_summary_text(key)
        for i in runs:
            _reuse_run(plan, stage, i, kept, summaries)


def _reuse_run(plan: Plan, stage: Staging, i: int, text: bytes | None, summaries: table.Writer) -> None:
    if text is None:
        return
    rels = list(stage.old_under(f"runs/{plan.slugs[i]}/"))
    got = reuse_run(plan.store, plan.keys[i], plan.jobs[i].family, text)
    if got is None or not set(got[1]) <= set(rels):
        return
    if stage.link_many(rels):
        stage.unlink(rels)
        return
    plan.results[i] = got[0]
    summaries.add(plan.keys[i], text)


def _table(plan: Plan) -> Path | None:
    """Where the cache keeps this site's run table (None: no cache)."""
    return None if plan.store.root is None else table.table_path(plan.store.root, plan.out)


def draw_runs(plan: Plan, stage: Staging, executor: Executor, summaries: table.Writer) -> None:
    """Read and draw every run without a result, on the executor; each run's log files are
    announced to the kernel ahead of their turn, and its summary goes into the run table."""
    todo = plan.to_draw()
    runner = _runner(executor, plan, len(todo))
    jobs = [_run_job(plan, stage, i, writes_here=isinstance(runner, Dask)) for i in todo]
    ahead = ReadAhead(lambda k: run_inputs(jobs[k], plan.store), len(jobs))
    try:
        for k, (i, result) in enumerate(zip(todo, runner.map(process_run, jobs))):
            if result.written is not None:
                stage.adopt(result.written)
                result.written = None  # (its entries are the stage's now)
            else:  # a Dask worker drew it (and kept its summary): this process writes it
                write_run(result, stage)
                result = replace(result, files={})
            share_paths(result, plan.jobs[i].family)
            if result.summary is not None:
                summaries.add(plan.keys[i], result.summary)
                result.summary = None
            plan.results[i] = result
            ahead.done(k)
    finally:
        ahead.close()


def compare_with_live(plan: Plan) -> dict:
    """``changes.json`` of this build: its runs against the live build's (from the live
    ``changes.json``, else, for a live build made before it existed, from the runs' summaries),
    and the gates evaluated on the runs it brought."""
    runs = [r.run for r in plan.done()]
    metrics = key_metrics(runs, plan.config)
    tracked = sorted({*metrics, *(r.metric for r in plan.config.gates.parsed())})
    current = [changes.state_of(r, tracked) for r in runs]
    live = plan.live_changes or {}
    previous: list[changes.RunState] | None = None
    if isinstance(live.get("runs"), list) and live.get("schema") == changes.SCHEMA:
        previous = [s for s in map(changes.from_json, live["runs"]) if s is not None]
    elif plan.previous:
        found = (reuse_run(plan.store, k) for s, k in sorted(plan.previous.items()) if not s.startswith(PAGE_KEYS))
        previous = [changes.state_of(got[0].run, tracked) for got in found if got is not None]
    feed = live["feed"] if isinstance(live.get("feed"), list) else []
    news = changes.compare(previous, current, metrics)
    verdict = gates.evaluate(plan.config.gates, news.fresh(), current)
    return changes.document(news, build_time=plan.source_date_epoch, previous_feed=feed, gates=verdict)


def draw_trends(plan: Plan, stage: Staging, news: dict) -> dict[str, str]:
    """A trend page per model and project: each key metric of its runs against their start
    times and their commits, with change points and the baseline band (from the runs' states in ``news``). A page
    whose inputs (its runs' input keys, the metrics, code and config) did not change is linked from
    the live build. Returns the pages' input keys, for the manifest."""
    run_keys = plan.run_keys()
    metrics = json.dumps(news["metrics"])
    by_name: dict[str, changes.RunState] | None = None
    page_keys: dict[str, str] = {}
    for g in compare.groups([r.run for r in plan.done()]):
        if not g.key:
            continue
        # a run's state follows from its inputs (its key) and the metrics tracked
        inputs = [metrics, *(f"{r.slug} {run_keys[r.slug]}" for r in g.runs)]
        key = page_keys["trends/" + g.slug] = cache_keys.group_key("trends/" + g.slug, inputs, plan.config)
        if plan.previous.get("trends/" + g.slug) == key and _link_folder(stage, f"trends/{g.slug}/"):
            continue
        if by_name is None:
            by_name = {s.name: s for s in news["runs"]}
        members = [by_name[r.name] for r in g.runs if r.name in by_name]
        found = [t for t in (trends.trend(m, members) for m in news["metrics"]) if t.runs]
        by_commit = [trends.commit_trend(t.metric, members) for t in found]
        committed = sum(1 for m in members if m.commit)
        for rel, data in trend_files(
            g.key, len(members), found, plan.config, plan.assets, by_commit=by_commit, committed=committed
        ).items():
            stage.write(rel, data)
    return page_keys


def write_changes(plan: Plan, stage: Staging, news: dict) -> None:
    """``changes.json``, ``changes.md``, the Atom feed ``feed.xml`` and ``gates.js`` (the gates'
    results, for the run pages)."""
    stage.write_pieces("changes.json", changes_page.pieces(news, default=changes.to_json))
    stage.write("gates.js", changes_page.gates_script(news))
    md = changes_page.markdown(news, translator(plan.config.language), base_url=plan.config.base_url)
    stage.write("changes.md", md.encode("utf-8"))
    stage.write("feed.xml", changes_page.feed(news, title=plan.config.title, base_url=plan.config.base_url))


@dataclass(eq=False)
class Pages:
    """Comparison pages on their way: the jobs sent, their results as they come, and every
    page's input key (for the manifest)."""

    keys: dict[str, str]
    jobs: list[GroupJob]
    results: Iterator[GroupResult]


def send_pages(plan: Plan, stage: Staging, executor: Executor) -> Pages:
    """Link each comparison page from the live build when its runs' inputs did not change, and
    send the others to the executor (see :func:`take_pages`)."""
    done = plan.done()
    run_keys = plan.run_keys()
    held = {r.run.slug: run_keys[r.run.slug] for r in done if r.stored}  # runs whose points are in the cache
    hp_of = {r.run.slug: r.hparams for r in done}
    remote = isinstance(executor, Dask)  # (its workers may not see this build's folder)
    page_keys: dict[str, str] = {}
    jobs = []
    for g in compare.groups([r.run for r in done]):
        key = page_keys["compare/" + g.slug] = group_key(g, run_keys, plan.config)
        if plan.previous.get("compare/" + g.slug) == key and _link_page(stage, g.slug):
            continue
        old = stage.old_under(f"compare/{g.slug}/")
        jobs.append(
            GroupJob(
                g,
                [hp_of[r.slug] for r in g.runs],
                plan.config,
                plan.assets.urls,
                plan.store.root,
                {r.slug: held[r.slug] for r in g.runs if r.slug in held},
                None if remote else Output(stage.root, stage.previous, old),
                frozenset(old) if remote else frozenset(),
            )
        )
    return Pages(page_keys, jobs, _runner(executor, plan, len(jobs)).map(draw_group, jobs))


def write_index(plan: Plan, stage: Staging, news: dict | None) -> None:
    """The index: every run, group and problem (needs them all, so it is drawn here); of its
    row shards, those whose rows did not change are linked from the live build."""
    done = plan.done()
    runs = [r.run for r in done]
    writing = {r.run.name for r in done if any(still_writing(p) for p in r.problems)}
    live = running(runs, writing, plan.source_date_epoch)
    groups = compare.groups(runs)
    reuse = _shard_reuse(plan, stage)
    for rel, data in index_files(runs, [r.hparams for r in done], groups, plan.config, plan.assets, _problems(plan), news, live, reuse):
        stage.write(rel, data)
    plan.store.put_pieces(INDEX_SHARDS, {key: [name] for key, name in reuse.made.items()})


INDEX_SHARDS = "/index"  # (the index's shards are kept beside the comparison pages' pieces; no group slug has a "/")


def _shard_reuse(plan: Plan, stage: Staging) -> indexdata.Reuse:
    """The live build's index shards by what they were made from (kept in the cache)."""

    def linked(key: str) -> str | None:
        head = plan.store.get_piece(INDEX_SHARDS, key)
        if not (isinstance(head, list) and len(head) == 1 and isinstance(head[0], str) and indexdata.SHARD_NAME.match(head[0])):
            return None
        rel = f"{indexdata.SHARD_DIR}{head[0]}.js"
        return head[0] if rel in stage.old and stage.link_previous(rel) else None

    return indexdata.Reuse(plan.run_keys(), cache_keys.group_key(INDEX_SHARDS, [], plan.config), linked)


def take_pages(plan: Plan, stage: Staging, pages: Pages) -> None:
    """The comparison pages from the executor, in order, into this build."""
    for job, result in zip(pages.jobs, pages.results):
        _take_page(plan, stage, job, result)


def _take_page(plan: Plan, stage: Staging, job: GroupJob, result: GroupResult) -> None:
    """A comparison page a worker drew: adopted when it wrote it, else written here with the
    live build's pieces it reused linked. It is drawn again here (the pieces then drawn, as a
    local build would) when the live build lost one of those pieces meanwhile, or when the
    cache lost a run's points (that run is then read again: :func:`_with_run_read_again`)."""
    if result.lost is None:
        if result.written is not None:
            stage.adopt(result.written)
            return
        if not stage.link_many(result.linked):
            for rel in page_names(result.files):
                stage.write(rel, result.files[rel], twin=result.files.get(rel + ".gz"))
            return
        stage.unlink(result.linked)
    while True:
        if result.lost is not None:
            job = _with_run_read_again(plan, job, result.lost)
        old = stage.old_under(f"compare/{job.group.slug}/")
        result = draw_group(replace(job, out=Output(stage.root, stage.previous, old), live=frozenset()))
        if result.lost is None:
            break
    stage.adopt(result.written or {})


def _with_run_read_again(plan: Plan, job: GroupJob, slug: str) -> GroupJob:
    """``job`` with run ``slug`` read and drawn again (its summary's points were damaged or
    lost in the cache, which gets them back): the page takes its points from the run itself."""
    i = plan.slugs.index(slug)
    fresh = draw_run(plan.jobs[i])
    keep_summary(fresh, plan.store, plan.keys[i])
    runs = [fresh.run if r.slug == slug else r for r in job.group.runs]
    log.warning("the cache lost the points of run %s; it was read again", fresh.run.name)
    return replace(job, group=replace(job.group, runs=runs), keys={s: k for s, k in job.keys.items() if s != slug})


def write_report_and_manifest(plan: Plan, stage: Staging, page_keys: dict[str, str]) -> list[Problem]:
    """``build-report.json`` (every problem found) and ``manifest.json`` (every file's digest,
    every source log's digest and decoded range, every page's input key)."""
    problems = _problems(plan)
    stage.write("build-report.json", report(problems))
    done = plan.done()
    stage.write_pieces(
        manifest.MANIFEST,
        manifest.pieces_from_hashes(
            stage.hashes,
            [f for r in done for f in r.sources],
            archive=plan.archive,
            source_date_epoch=plan.source_date_epoch,
            hasher=plan.store.sha256,
            runs={**plan.run_keys(), **page_keys},
            site_key=plan.site_key,
        ),
    )
    return problems


def report(problems: list[Problem]) -> bytes:
    """``build-report.json``: every problem found while reading, for CI and audits."""
    items = [{"path": p.path, "offset": p.offset, "kind": p.kind, "message": p.message} for p in problems]
    kinds: dict[str, int] = {}
    for p in problems:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    files = sorted({p.path for p in problems})
    doc = {"problems": len(items), "kinds": dict(sorted(kinds.items())), "damaged_files": files, "items": items}
    return (json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def _problems(plan: Plan) -> list[Problem]:
    return [*plan.problems, *(p for r in plan.done() for p in r.problems)]


def _runner(executor: Executor, plan: Plan, items: int) -> Executor:
    """The executor for ``items`` pieces of work: a few items, or a small archive with not many
    items, are done in this process, where starting worker processes would cost more than it
    saves (workers a previous stage started are used once there are enough items)."""
    if not isinstance(executor, LocalPool):
        return executor
    if items >= MIN_PARALLEL_ITEMS and (executor.started or items >= MIN_PARALLEL_RUNS or plan.log_bytes >= MIN_PARALLEL_BYTES):
        return executor
    return Serial()


def _run_job(plan: Plan, stage: Staging, i: int, *, writes_here: bool) -> RunJob:
    """Job ``i`` as a worker gets it: with its key and, unless this process writes its files
    (a Dask worker may not see the output folder), where to write them."""
    job = plan.jobs[i]
    out = None if writes_here else Output(stage.root, stage.previous, stage.old_under(f"runs/{plan.slugs[i]}/"))
    return RunJob(job.family, job.options, job.config, job.cache, job.urls, job.nested_dirs, job.problems_of, plan.keys[i], out, job.slug)


def _link_page(stage: Staging, slug: str) -> bool:
    """Link a comparison page and its pieces from the live build (see :func:`_link_folder`)."""
    return _link_folder(stage, f"compare/{slug}/")


def _link_folder(stage: Staging, folder: str) -> bool:
    """Link a page's folder from the live build; False (nothing linked) when the live build
    lacks its ``index.html`` or any of its files."""
    rels = list(stage.old_under(folder))
    if folder + "index.html" not in rels:
        return False
    if stage.link_many(rels):
        stage.unlink(rels)
        return False
    return True
