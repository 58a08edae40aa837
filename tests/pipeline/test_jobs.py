"""Jobs as they cross to worker processes (sitegen.pipeline.jobs): a comparison page's job of
many runs comes back whole, and pickling it does not hold every run's pickler state at once."""

from __future__ import annotations

import json
import pickle
import tracemalloc
from dataclasses import replace

from sitegen.cache import summary
from sitegen.cache.store import Store
from sitegen.config import Config
from sitegen.ingest.scan import scan
from sitegen.model import ReadOptions
from sitegen.pages import compare
from sitegen.pages.assets import assets
from sitegen.pipeline.jobs import RUNS_PER_BLOB, GroupJob, RunJob, draw_run
from tests.support import EXAMPLE


def _job(runs: int) -> GroupJob:
    src = next(s for s in scan(EXAMPLE) if s.format == "tfevents")
    urls = assets("en", Store(None).blob).urls
    drawn = draw_run(RunJob([src], ReadOptions(), Config(), None, urls, frozenset(), []))
    doc, _ = summary.to_doc(drawn.run, {}, [], [], [])
    many = []  # (each run with objects of its own, as runs loaded from their summaries)
    for i in range(runs):
        run = summary.from_doc(doc)[0]
        many.append(replace(run, name=f"p/m/run{i}", slug=f"p-m-run{i}", parts=("p", "m", f"run{i}")))
    hps = [{"lr": 0.1 * i, "opt": f"adam{i % 3}"} for i in range(runs)]
    keys = {r.slug: f"{i:064x}" for i, r in enumerate(many)}
    return GroupJob(compare.Group((), "all", many), hps, Config(), urls, None, keys, None, frozenset({"p-1.js"}))


def test_a_job_of_many_runs_comes_back_whole():
    job = _job(2 * RUNS_PER_BLOB + 7)  # (three batches, the last a short one)
    back = pickle.loads(pickle.dumps(job))
    assert (back.group.key, back.group.slug, back.keys, back.live, back.out, back.urls) == (
        job.group.key, job.group.slug, job.keys, job.live, job.out, job.urls
    )  # fmt: skip
    assert back.config == job.config and back.hps == job.hps
    assert [(r.name, r.slug, r.parts, r.title) for r in back.group.runs] == [(r.name, r.slug, r.parts, r.title) for r in job.group.runs]
    assert [[(ln.tag, ln.series.stats) for ln in r.lines] for r in back.group.runs] == [
        [(ln.tag, ln.series.stats) for ln in r.lines] for r in job.group.runs
    ]


def test_pickling_a_large_job_holds_about_its_own_size():
    """A pickler keeps every object it wrote until it is done: pickled whole, 3,000 runs held
    about nine times their pickle's size at the peak; in batches of 1,000, about three
    (the batches, the pickle they are copied into, one batch's pickler)."""
    job = _job(3000)
    tracemalloc.start()
    try:
        data = pickle.dumps(job, pickle.HIGHEST_PROTOCOL)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5 * len(data), (peak, len(data))


def test_a_run_keeps_its_log_files_digests_through_its_summary():
    """A drawn run's log files carry their SHA-256 (for the manifest) in the result itself, and
    a run reused from its summary gets them back, only for the bytes the file still has;
    a worker's copies of the log files' paths give way to the scan's."""
    import hashlib

    from sitegen.pipeline.jobs import share_paths

    src = next(s for s in scan(EXAMPLE) if s.format == "tfevents")
    urls = assets("en", Store(None).blob).urls
    drawn = draw_run(RunJob([src], ReadOptions(), Config(), None, urls, frozenset(), []))
    assert drawn.sources and all(f.sha256 == hashlib.sha256(f.path.read_bytes()[: f.size]).hexdigest() for f in drawn.sources)
    doc, _ = summary.to_doc(drawn.run, drawn.hparams, [], drawn.problems, drawn.sources)
    back = summary.from_doc(doc)[4]
    assert [(str(f.path), f.size, f.sha256) for f in back] == [(str(f.path), f.size, f.sha256) for f in drawn.sources]
    doc["sources"][0][1] += 1  # (the summary of a longer file: its digest is of other bytes)
    assert summary.from_doc(doc)[4][0].sha256 == ""
    copied = pickle.loads(pickle.dumps(drawn))
    assert copied.sources[0].path is not src.files[0]
    share_paths(copied, [src])
    assert copied.sources[0].path is src.files[0]


class _Pickling:
    """An executor that sends every job through pickle, as a worker process gets it."""

    workers = 1

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def map(self, fn, items):
        return (fn(pickle.loads(pickle.dumps(item, pickle.HIGHEST_PROTOCOL))) for item in items)


def test_a_large_page_crosses_as_its_runs_slugs_and_draws_the_same(tmp_path, monkeypatch):
    """A page of STORED_RUNS runs or more whose summaries are in the cache is sent as their
    slugs (a worker reads the summaries): the site is the one drawn from the runs themselves;
    a summary the cache lost meanwhile sends the page back to be drawn here, with that run read again."""
    from sitegen.pipeline import jobs
    from sitegen.pipeline.build import BuildOptions, build
    from tests.support.eventgen import write_archive
    from tests.support.sites import assert_same_site

    arch = write_archive(tmp_path / "archive", 24, steps=8, projects=2, models=2)
    sent: list[int] = []
    reduce = GroupJob.__reduce__
    monkeypatch.setattr(GroupJob, "__reduce__", lambda job: sent.append(len(reduce(job)[1])) or reduce(job))
    monkeypatch.setattr(jobs, "STORED_RUNS", 10)
    out = build(arch, tmp_path / "site", BuildOptions(cache=tmp_path / "cache", executor=_Pickling(), source_date_epoch=1)).out
    assert 5 in sent  # (the whole-archive page and the two projects' pages: as slugs)
    monkeypatch.setattr(jobs, "STORED_RUNS", 10**9)
    plain = build(arch, tmp_path / "plain", BuildOptions(cache=tmp_path / "cache2", executor=_Pickling(), source_date_epoch=1)).out
    assert_same_site(out, plain, news=False)
    # a run grows, and the cache loses a run's summary once the runs are drawn: the page that
    # needs it is drawn here with that run read again, and the pages are the ones drawn from scratch
    monkeypatch.setattr(jobs, "STORED_RUNS", 10)
    grown = next(arch.rglob("run00003"))
    (grown / "notes.md").write_text("more")

    live = json.loads((tmp_path / "site" / "manifest.json").read_text())["runs"]
    kept = next(k for s, k in sorted(live.items()) if "/" not in s and "run00003" not in s)  # (an unchanged run's key)

    class Losing(_Pickling):
        def map(self, fn, items):
            for item in items:
                if isinstance(item, GroupJob) and not lost:
                    lost.append(next((tmp_path / "cache" / "runs").rglob(f"{kept}.sum")))
                    lost[0].unlink()
                yield fn(pickle.loads(pickle.dumps(item, pickle.HIGHEST_PROTOCOL)))

    lost: list = []
    again = build(arch, tmp_path / "site", BuildOptions(cache=tmp_path / "cache", executor=Losing(), source_date_epoch=1)).out
    assert lost and lost[0].exists()  # (the run was read again, and its summary kept again)
    fresh = build(arch, tmp_path / "fresh", BuildOptions(use_cache=False, executor=_Pickling(), source_date_epoch=1)).out
    assert_same_site(again, fresh, news=False)
