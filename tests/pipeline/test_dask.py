"""sitegen on a real Dask cluster (LocalCluster, 2 worker processes): the same bytes as one
machine, a worker killed mid-build loses nothing, transient errors are retried, a permanent one
fails the build and keeps the live site, and the chunks in flight stay within the window.

Trouble is brought by executors of :mod:`tests.support.executors`, which wrap the function the
build hands them; nothing waits for a time."""
from __future__ import annotations

import os
import shutil
import time

import pytest

from sitegen.pipeline.executors import Dask, LocalPool, Serial
from tests.support import EXAMPLE
from tests.support.eventgen import write_archive
from tests.support.executors import KillsAWorker, Wrapped, attempts, broken, flaky
from tests.support.sites import CONFIG, assert_same_site, build_site


def test_dask_build_is_byte_identical(cluster, reference_site, tmp_path):
    cl, _client = cluster
    build_site(EXAMPLE, tmp_path / "site", cache=tmp_path / "cache", executor=Dask(cl.scheduler_address))
    assert_same_site(reference_site, tmp_path / "site")
    # the workers wrote their decode results into the shared cache
    assert list((tmp_path / "cache" / "files").rglob("*.entry"))


def test_many_runs_in_chunks_keep_job_order(cluster, tmp_path, monkeypatch):
    """40 runs -> chunks of several jobs each: results must still come back in job order, and
    this process, the local process pool and Dask must give the same bytes."""
    import sitegen.pipeline.build as B

    monkeypatch.setattr(B, "MIN_PARALLEL_ITEMS", 1)  # the pool even for a small archive
    monkeypatch.setattr(B, "MIN_PARALLEL_BYTES", 0)
    cl, _client = cluster
    archive = write_archive(tmp_path / "archive", 40, steps=30)
    build_site(archive, tmp_path / "one", cache=tmp_path / "c1", executor=Serial())
    build_site(archive, tmp_path / "pool", cache=tmp_path / "c2", executor=LocalPool(2))
    build_site(archive, tmp_path / "dask", cache=tmp_path / "c3", executor=Dask(cl.scheduler_address))
    assert_same_site(tmp_path / "one", tmp_path / "pool")
    assert_same_site(tmp_path / "one", tmp_path / "dask")


def test_worker_killed_mid_build(cluster, reference_site, tmp_path):
    """os._exit on a worker that holds a run still being drawn (it waits for a gate), right
    after the first result: the scheduler runs its work again elsewhere (the nanny restarts
    the worker) and the site is the same."""
    cl, client = cluster
    executor = KillsAWorker(cl.scheduler_address, client, tmp_path / "gate")
    build_site(EXAMPLE, tmp_path / "site", cache=tmp_path / "cache", executor=executor)
    assert executor.killed, "no worker was killed"
    (addr, pid), = executor.killed.items()
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), f"worker {addr} (pid {pid}) is still alive"
    assert_same_site(reference_site, tmp_path / "site")
    client.wait_for_workers(2, timeout=60)  # the nanny brought a new worker up


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_transient_errors_are_retried(cluster, reference_site, tmp_path):
    """Every run raises on its first attempt; the executor's retries make the build succeed."""
    cl, _client = cluster
    marks = tmp_path / "marks"
    marks.mkdir()
    executor = Wrapped(cl.scheduler_address, flaky, str(marks))
    # a chunk is retried whole, and each of its runs fails once: with 2 retries, a chunk of 3
    # runs fails for good. Chunks of 2, whatever the size of the example archive (it grows).
    executor.CHUNK_MAX = 2
    build_site(EXAMPLE, tmp_path / "site", cache=tmp_path / "cache", executor=executor)
    assert_same_site(reference_site, tmp_path / "site")
    tries = attempts(marks)
    n_runs = len(list((reference_site / "runs").iterdir()))
    # every run failed once and then worked; a chunk runs whole again, so a run that worked in
    # a chunk whose next run failed ran once more (never more often than 1 try + 2 retries)
    assert len(tries) == n_runs and set(tries.values()) <= {2, 3} and 2 in set(tries.values()), tries


def test_permanent_error_fails_the_build_and_keeps_the_live_site(cluster, reference_site, tmp_path):
    from sitegen.publish.live import list_builds

    cl, _client = cluster
    marks = tmp_path / "marks"
    marks.mkdir()
    shutil.copytree(reference_site.resolve(), tmp_path / "live")
    with pytest.raises(RuntimeError, match="permanent failure"):
        build_site(EXAMPLE, tmp_path / "live", cache=tmp_path / "cache", executor=Wrapped(cl.scheduler_address, broken, str(marks)))
    tries = attempts(marks)
    assert tries and max(tries.values()) == 3, f"expected 1 try + 2 retries, got {tries}"
    assert_same_site(reference_site, tmp_path / "live")  # (an old-style folder, left as it was)
    assert list_builds(tmp_path / "live") == [] and not list(tmp_path.glob(".live.builds/.staging-*"))


def test_in_flight_window_is_bounded(cluster, tmp_path, monkeypatch):
    """Never more than workers x ``Dask.IN_FLIGHT_PER_WORKER`` chunks submitted and not yet
    taken, one item a chunk (``CHUNK_MAX = 1``): 40 runs, 40 submissions."""
    import distributed

    cl, client = cluster
    submitted: list[int] = []
    real_submit = distributed.Client.submit

    def counting_submit(self, *a, **kw):
        submitted.append(1)
        return real_submit(self, *a, **kw)

    monkeypatch.setattr(distributed.Client, "submit", counting_submit)

    class Watched(Dask):
        CHUNK_MAX = 1
        in_flight: list[int] = []

        def map(self, fn, items):
            for i, result in enumerate(super().map(fn, items)):
                self.in_flight.append(len(submitted) - (i + 1))  # chunk i is taken
                yield result

    archive = write_archive(tmp_path / "archive", 40, steps=5)
    build_site(archive, tmp_path / "site", cache=tmp_path / "cache", executor=Watched(cl.scheduler_address))
    limit = len(client.scheduler_info()["workers"]) * Dask.IN_FLIGHT_PER_WORKER
    assert len(submitted) == 40 and len(Watched.in_flight) == 40
    assert max(Watched.in_flight) == limit, f"{max(Watched.in_flight)} chunks in flight, limit {limit}"


def test_cli_builds_on_a_dask_scheduler(cluster, reference_site, tmp_path, monkeypatch):
    """``sitegen build --executor dask --scheduler ADDR``: the build gets a Dask executor on that
    scheduler, and the site is the one built here."""
    import sitegen.pipeline.build as B
    from sitegen.cli import main

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    seen = []
    real = B.build

    def spy(archive, out, options):
        seen.append(options.executor)
        options.config = CONFIG  # the reference site's title
        return real(archive, out, options)

    monkeypatch.setattr(B, "build", spy)
    cl, _client = cluster
    code = main(["build", str(EXAMPLE), "--out", str(tmp_path / "site"), "--cache", str(tmp_path / "cache"),
                 "--executor", "dask", "--scheduler", cl.scheduler_address, "--quiet"])
    assert code == 0
    (executor,) = seen
    assert isinstance(executor, Dask) and executor.scheduler == cl.scheduler_address
    assert_same_site(reference_site, tmp_path / "site")
