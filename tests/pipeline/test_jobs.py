"""Jobs as they cross to worker processes (sitegen.pipeline.jobs): a comparison page's job of
many runs comes back whole, and pickling it does not hold every run's pickler state at once."""

from __future__ import annotations

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
