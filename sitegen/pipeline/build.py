"""The build, as a list of stages over one :class:`~sitegen.pipeline.plan.Plan`:
scan and plan -> reuse unchanged runs -> read and draw changed runs -> index and comparison
pages -> report and manifest -> switch the site live."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sitegen.config import Config
from sitegen.errors import Problem
from sitegen.pages import compare
from sitegen.pages.index import index_files
from sitegen.pipeline.executors import Dask, Executor, LocalPool, Serial
from sitegen.pipeline.jobs import (
    GroupJob,
    Output,
    RunJob,
    draw_group,
    group_key,
    keep_run,
    process_run,
    reuse_run,
    run_inputs,
)
from sitegen.pipeline.plan import Plan, make_plan
from sitegen.pipeline.readahead import ReadAhead
from sitegen.publish import manifest
from sitegen.publish.live import whole
from sitegen.publish.staging import Staging, tidy
from sitegen.resources import default_cache_dir
from sitegen.tools.remote import localize

log = logging.getLogger(__name__)

#: below this many runs (or pages) to draw, or this many bytes of logs, the work stays in this
#: process: starting worker processes would cost more than it saves
MIN_PARALLEL_ITEMS = 8
MIN_PARALLEL_BYTES = 64 << 20


@dataclass
class BuildOptions:
    """How to build. ``cache``: the decode cache folder or URL (None: ``~/.cache/sitegen``);
    ``use_cache=False`` decodes everything again and keeps nothing. ``keep``: builds kept for
    rollback, the live one included. ``source_date_epoch``: the only time that may appear in the
    output. ``durable``: the build is on storage before it goes live. ``executor``: where runs are
    drawn (None: worker processes of this machine when the archive is large enough).
    ``progress(stage, step, steps)`` is told when each stage starts."""

    config: Config = field(default_factory=Config)
    verify: bool = True
    cache: Path | str | None = None
    use_cache: bool = True
    keep: int = 3
    source_date_epoch: int | None = None
    durable: bool = False
    executor: Executor | None = None
    progress: Callable[[str, int, int], None] | None = None


@dataclass
class BuildResult:
    out: Path
    runs: int
    files: int
    problems: list[Problem] = field(default_factory=list)


def build(archive: Path | str, out: Path | str, options: BuildOptions | None = None) -> BuildResult:
    """Build the site of ``archive`` (a folder, or a URL: see :mod:`sitegen.tools.remote`) into
    ``out``, which becomes a symlink switched atomically to the new build."""
    options = options or BuildOptions()
    step = options.progress or (lambda stage, i, n: None)
    local = localize(archive, options.cache, use_cache=options.use_cache)
    cache = (local.cache or default_cache_dir()) if options.use_cache else None
    step("scanning", 1, 4)
    plan = make_plan(
        local.archive, Path(out), cache, config=options.config, verify=options.verify, source_date_epoch=options.source_date_epoch
    )
    live = whole(plan.out, plan.site_key)
    if live is not None:  # the live build was made from exactly these inputs
        step("unchanged", 4, 4)
        tidy(plan.out, options.keep)
        local.push()
        return BuildResult(plan.out, live.runs, live.files, live.problems)
    with options.executor or LocalPool() as executor, Staging(plan.out, keep=options.keep, durable=options.durable) as stage:
        write_assets(plan, stage)
        reuse_runs(plan, stage)
        step(f"reading and drawing {len(plan.to_draw())} of {len(plan.jobs)} runs", 2, 4)
        draw_runs(plan, stage, executor)
        step("drawing the index and comparisons", 3, 4)
        page_keys = draw_pages(plan, stage, executor)
        step("publishing", 4, 4)
        problems = write_report_and_manifest(plan, stage, page_keys)
        stage.commit()
    local.push()
    return BuildResult(plan.out, len(plan.jobs), len(stage.hashes), problems)


def write_assets(plan: Plan, stage: Staging) -> None:
    for rel, data in plan.assets.files.items():
        stage.write(rel, data)


def reuse_runs(plan: Plan, stage: Staging) -> None:
    """Runs the live build drew from the same inputs: their files are linked from it, their
    summaries come from the cache. A run whose summary or files were lost is drawn again."""
    for i in plan.unchanged_runs():
        rels = list(stage.old_under(f"runs/{plan.slugs[i]}/"))
        got = reuse_run(plan.store, plan.keys[i])
        if got is None or not set(got[1]) <= set(rels):
            continue
        if stage.link_many(rels):
            stage.unlink(rels)
            continue
        plan.results[i] = got[0]


def draw_runs(plan: Plan, stage: Staging, executor: Executor) -> None:
    """Read and draw every run without a result, on the executor; each run's log files are
    announced to the kernel ahead of their turn."""
    todo = plan.to_draw()
    runner = _runner(executor, plan, len(todo))
    jobs = [_run_job(plan, stage, i, writes_here=isinstance(runner, Dask)) for i in todo]
    ahead = ReadAhead(lambda k: run_inputs(jobs[k], plan.store), len(jobs))
    try:
        for k, (i, result) in enumerate(zip(todo, runner.map(process_run, jobs))):
            if result.written is not None:
                stage.adopt(result.written)
            else:  # a Dask worker drew it: this process writes it
                result = keep_run(result, stage, plan.store, plan.keys[i])
            plan.results[i] = result
            ahead.done(k)
    finally:
        ahead.close()


def draw_pages(plan: Plan, stage: Staging, executor: Executor) -> dict[str, str]:
    """The comparison pages (each linked from the live build when its runs' inputs did not
    change, else drawn, on the executor) and the index, drawn here meanwhile. Returns the
    pages' input keys, for the manifest."""
    done = plan.done()
    run_keys = plan.run_keys()
    held = {r.run.slug: run_keys[r.run.slug] for r in done if r.stored}  # runs whose points are in the cache
    hp_of = {r.run.slug: r.hparams for r in done}
    groups = compare.groups([r.run for r in done])
    page_keys: dict[str, str] = {}
    jobs = []
    for g in groups:
        key = page_keys["compare/" + g.slug] = group_key(g, run_keys, plan.config)
        if plan.previous.get("compare/" + g.slug) == key and _link_page(stage, g.slug):
            continue
        jobs.append(
            GroupJob(
                g,
                [hp_of[r.slug] for r in g.runs],
                plan.config,
                plan.assets.urls,
                plan.store.root,
                {r.slug: held[r.slug] for r in g.runs if r.slug in held},
                Output(stage.root, stage.previous, stage.old_under(f"compare/{g.slug}/")),
            )
        )
    # (on this machine only: each page's worker writes it into this build's folder)
    drawn = _runner(executor if isinstance(executor, LocalPool) else Serial(), plan, len(jobs)).map(draw_group, jobs)
    for rel, data in index_files(
        [r.run for r in done], [r.hparams for r in done], groups, plan.config, plan.assets, _problems(plan)
    ).items():
        stage.write(rel, data)
    for hashes in drawn:
        stage.adopt(hashes)
    return page_keys


def write_report_and_manifest(plan: Plan, stage: Staging, page_keys: dict[str, str]) -> list[Problem]:
    """``build-report.json`` (every problem found) and ``manifest.json`` (every file's digest,
    every source log's digest and decoded range, every page's input key)."""
    problems = _problems(plan)
    stage.write("build-report.json", report(problems))
    done = plan.done()
    digests = {(p, n): d for r in done for p, d in r.digests.items() for n in [d[1]]}

    def hasher(path: Path, size: int) -> tuple[str, int]:
        return digests.get((str(path), size)) or plan.store.sha256(path, size)

    stage.write(
        manifest.MANIFEST,
        manifest.make_from_hashes(
            stage.hashes,
            [f for r in done for f in r.sources],
            archive=plan.archive,
            source_date_epoch=plan.source_date_epoch,
            hasher=hasher,
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
    """The executor for ``items`` pieces of work: a small archive or a few items are done in
    this process, where starting worker processes would cost more than it saves."""
    if isinstance(executor, LocalPool) and (items < MIN_PARALLEL_ITEMS or plan.log_bytes < MIN_PARALLEL_BYTES):
        return Serial()
    return executor


def _run_job(plan: Plan, stage: Staging, i: int, *, writes_here: bool) -> RunJob:
    """Job ``i`` as a worker gets it: with its key and, unless this process writes its files
    (a Dask worker may not see the output folder), where to write them."""
    job = plan.jobs[i]
    out = None if writes_here else Output(stage.root, stage.previous, stage.old_under(f"runs/{plan.slugs[i]}/"))
    return RunJob(job.family, job.options, job.config, job.cache, job.urls, job.nested_dirs, job.problems_of, plan.keys[i], out, job.slug)


def _link_page(stage: Staging, slug: str) -> bool:
    """Link a comparison page and its pieces from the live build; False (nothing linked) when
    the live build lacks any of them."""
    rels = list(stage.old_under(f"compare/{slug}/"))
    if f"compare/{slug}/index.html" not in rels:
        return False
    if stage.link_many(rels):
        stage.unlink(rels)
        return False
    return True
