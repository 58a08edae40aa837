"""sitegen on a real Dask cluster (LocalCluster, 2 worker processes): the same bytes as one
machine, a worker killed mid-build loses nothing, transient errors are retried, memory is
bounded by the in-flight window."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

import scale_helpers as H
from testpaths import EXAMPLE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site"))
from eventgen import write_archive  # noqa: E402


def test_dask_build_is_byte_identical(cluster, reference_site, tmp_path):
    cl, _client = cluster
    H.build_site(EXAMPLE, tmp_path / "site", cache=tmp_path / "cache", executor="dask", scheduler=cl.scheduler_address)
    H.assert_same_site(reference_site, tmp_path / "site")
    # the workers wrote their decode results into the shared cache
    assert list((tmp_path / "cache" / "files").rglob("*.entry"))


def test_many_runs_in_chunks_keep_job_order(cluster, tmp_path):
    """40 runs -> chunks of several jobs each: results must still come back in job order, and
    the local process pool (the other executor) must give the same bytes."""
    cl, _client = cluster
    archive = write_archive(tmp_path / "archive", 40, steps=30)
    H.build_site(archive, tmp_path / "one", cache=tmp_path / "c1")  # in this process
    H.build_site(archive, tmp_path / "pool", cache=tmp_path / "c2", executor="local", workers=2)
    H.build_site(archive, tmp_path / "dask", cache=tmp_path / "c3", executor="dask", scheduler=cl.scheduler_address, workers=2)
    H.assert_same_site(tmp_path / "one", tmp_path / "pool")
    H.assert_same_site(tmp_path / "one", tmp_path / "dask")


def test_worker_killed_mid_build(cluster, reference_site, tmp_path):
    """os._exit on the worker that holds running tasks, right after the first result: the
    scheduler runs its tasks again elsewhere (the nanny restarts it) and the site is the same."""
    from sitegen.pipeline.executors import map_jobs

    cl, client = cluster
    before = client.run(os.getpid)
    killed: dict[str, int] = {}

    def run_all(jobs, *, workers, **_kw):
        for i, result in enumerate(map_jobs(jobs, executor="dask", scheduler=cl.scheduler_address, fn=H.slow_process)):
            if i == 0:
                busy = [addr for addr, keys in client.processing().items() if keys]
                assert busy, "no worker had work in progress when the first result arrived"
                victim = busy[0]
                killed[victim] = before[victim]
                client.run(H.die, workers=[victim], wait=False)
            yield result

    with H.run_all_via(run_all):
        from sitegen.pipeline.build import BuildOptions, build

        build(EXAMPLE, tmp_path / "site", BuildOptions(config=H.CONFIG, cache=tmp_path / "cache"))
    assert killed, "no worker was killed"
    (addr, pid), = killed.items()
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), f"worker {addr} (pid {pid}) is still alive"
    H.assert_same_site(reference_site, tmp_path / "site")
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
    """Every job raises on its first attempt; retries=2 makes the build succeed anyway."""
    cl, _client = cluster
    H.build_site(EXAMPLE, tmp_path / "site", cache=tmp_path / "cache", executor="dask",
                 scheduler=cl.scheduler_address, fn=H.flaky_process)
    H.assert_same_site(reference_site, tmp_path / "site")
    attempts = [p.stat().st_size for p in Path(os.environ["SITEGEN_TEST_FLAKY_DIR"]).iterdir() if not p.suffix]
    assert attempts and min(attempts) >= 2, attempts


def test_permanent_error_fails_the_build_and_keeps_the_live_site(cluster, reference_site, tmp_path):
    import shutil

    cl, _client = cluster
    shutil.copytree(reference_site.resolve(), tmp_path / "live")
    with pytest.raises(RuntimeError, match="permanent failure"):
        H.build_site(EXAMPLE, tmp_path / "live", cache=tmp_path / "cache", executor="dask",
                     scheduler=cl.scheduler_address, fn=H.broken_process)
    tries = [p.stat().st_size for p in Path(os.environ["SITEGEN_TEST_FLAKY_DIR"]).glob("*.broken")]
    assert tries and max(tries) == 3, f"expected 1 try + 2 retries, got {tries}"
    H.assert_same_site(reference_site, tmp_path / "live")


def test_in_flight_window_is_bounded(cluster, tmp_path, monkeypatch):
    """Never more than workers x DASK_INFLIGHT_PER_WORKER chunks submitted and not yet consumed."""
    import distributed

    import sitegen.pipeline.executors as E

    cl, _client = cluster
    monkeypatch.setattr(E, "DASK_CHUNK_MAX", 1)
    submitted = []
    real_submit = distributed.Client.submit

    def counting_submit(self, *a, **kw):
        submitted.append(1)
        return real_submit(self, *a, **kw)

    monkeypatch.setattr(distributed.Client, "submit", counting_submit)
    archive = write_archive(tmp_path / "archive", 40, steps=5)
    seen = []

    def run_all(jobs, *, workers, **_kw):
        for i, result in enumerate(E.map_jobs(jobs, executor="dask", scheduler=cl.scheduler_address)):
            seen.append(len(submitted) - (i + 1))  # chunk i is consumed
            yield result

    with H.run_all_via(run_all):
        from sitegen.pipeline.build import BuildOptions, build

        build(archive, tmp_path / "site", BuildOptions(config=H.CONFIG, cache=tmp_path / "cache"))
    limit = 2 * E.DASK_INFLIGHT_PER_WORKER
    assert len(submitted) == 40 and len(seen) == 40
    assert max(seen) <= limit, f"{max(seen)} chunks in flight, limit {limit}"


def test_unknown_executor_and_stray_scheduler_are_usage_errors():
    from sitegen.errors import UsageError
    from sitegen.pipeline.executors import map_jobs

    with pytest.raises(UsageError, match="unknown executor"):
        list(map_jobs([], executor="ray"))
    with pytest.raises(UsageError, match="needs the dask executor"):
        list(map_jobs([], executor="local", scheduler="tcp://127.0.0.1:1"))
