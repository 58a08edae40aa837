"""sitegen on a real Dask cluster (LocalCluster, 2 worker processes): the same bytes as one
machine, a worker killed mid-build loses nothing, transient errors are retried, a permanent one
fails the build and keeps the live site, and the chunks in flight stay within the window.

Trouble is brought by executors of :mod:`tests.support.executors`, which wrap the function the
build hands them; nothing waits for a time."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from sitegen.cache.store import Store
from sitegen.pipeline.executors import Dask, LocalPool, Serial
from tests.support import EXAMPLE, corpus
from tests.support.eventgen import write_archive, write_run
from tests.support.executors import KillsAWorker, Wrapped, attempts, broken, flaky
from tests.support.sites import CONFIG, assert_same_site, build_site, inodes


def test_dask_build_is_byte_identical(cluster, reference_site, tmp_path, monkeypatch):
    """The example archive on the cluster: the site of the default executor and of the local
    process pool (forced for this small archive), file for file; no run page and no comparison
    page was drawn in this process (the workers do not see its patches)."""
    import sitegen.pipeline.build as B
    import sitegen.pipeline.jobs as J

    cl, _client = cluster
    here: list[str] = []
    draw_run, draw_group = J.draw_run, B.draw_group
    monkeypatch.setattr(J, "draw_run", lambda job: here.append(job.family[0].name) or draw_run(job))
    monkeypatch.setattr(B, "draw_group", lambda job: here.append(job.group.slug) or draw_group(job))
    build_site(EXAMPLE, tmp_path / "site", cache=tmp_path / "cache", executor=Dask(cl.scheduler_address))
    assert here == []
    assert_same_site(reference_site, tmp_path / "site")
    # the workers kept the runs' summaries in the shared cache; the example's log files are all
    # smaller than Store.MIN_CACHED_BYTES, so they kept no decode results (decoding is cheaper)
    assert max(p.stat().st_size for p in EXAMPLE.rglob("*") if p.is_file()) < Store.MIN_CACHED_BYTES
    assert not list((tmp_path / "cache").rglob("*.entry"))
    assert len(list((tmp_path / "cache" / "runs").rglob("*.sum"))) == len(list((reference_site / "runs").iterdir()))
    monkeypatch.setattr(B, "MIN_PARALLEL_ITEMS", 1)
    monkeypatch.setattr(B, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(B, "draw_group", draw_group)  # (a process pool's jobs are pickled by name)
    build_site(EXAMPLE, tmp_path / "pool", cache=tmp_path / "pool-cache", executor=LocalPool(2))
    assert here == []
    assert_same_site(tmp_path / "pool", tmp_path / "site")


def test_rebuilds_on_the_cluster_reuse_the_live_pieces(cluster, tmp_path, monkeypatch):
    """A generated archive built by the local pool and on the cluster, then rebuilt after a run
    was appended to the archive, then after a log grew and the live builds lost the piece
    scripts of the whole-archive page: every build the same bytes on both. The cluster's
    rebuild links the unchanged pieces from the live build (the same inodes); the lost ones,
    which its worker took as there, are drawn again here, as a local build draws them."""
    import sitegen.pipeline.build as B
    from sitegen.pages.compare import group_slug

    monkeypatch.setattr(B, "MIN_PARALLEL_ITEMS", 1)
    monkeypatch.setattr(B, "MIN_PARALLEL_BYTES", 0)
    cl, _client = cluster
    archive = write_archive(tmp_path / "archive", 40, steps=30)
    sites = {"pool": LocalPool(2), "dask": Dask(cl.scheduler_address)}

    def build_both() -> None:
        for name, executor in sites.items():
            build_site(archive, tmp_path / name, cache=tmp_path / f"cache-{name}", executor=executor)
        assert_same_site(tmp_path / "pool", tmp_path / "dask")

    def pieces(site: Path) -> dict[str, int]:
        return {rel: ino for rel, ino in inodes(site).items() if rel.startswith("compare/") and "/p-" in rel}

    build_both()
    before = pieces(tmp_path / "dask")
    assert len([rel for rel in before if rel.startswith("compare/all/") and rel.endswith(".js")]) >= 3
    write_run(archive / "project1" / "model2" / "run00040", tags=["train/loss", "eval/accuracy"], steps=30, seed=40, start=1.8e9)
    taken: list[tuple[str, list[str], list[str]]] = []  # per page a worker drew: pieces linked, pieces drawn
    take = B._take_page
    monkeypatch.setattr(B, "_take_page", lambda plan, stage, job, result: result.written is None and taken.append(
        (job.group.slug, result.linked, [rel for rel in result.files if "/p-" in rel and rel.endswith(".js")])) or take(plan, stage, job, result))
    build_both()
    after = pieces(tmp_path / "dask")
    new = sorted(rel for rel in after if rel not in before and rel.endswith(".js"))
    # the new run's pages (all, its project, its model) were drawn on the workers, which drew the
    # pieces holding it and had this process link the others from the live build
    assert sorted(slug for slug, _, _ in taken) == sorted(["all", group_slug(("project1",)), group_slug(("project1", "model2"))])
    assert sorted(rel for _, _, drawn in taken for rel in drawn) == new and 1 <= len(new) <= 3
    linked = [rel for _, rels, _ in taken for rel in rels]
    assert len(linked) >= 2 and all(after[rel] == before[rel] for rel in linked)

    here: list[str] = []  # comparison pages drawn in this process
    draw_group = B.draw_group
    monkeypatch.setattr(B, "draw_group", lambda job: here.append(job.group.slug) or draw_group(job))
    (event,) = (archive / "project0" / "model0" / "run00000").glob("*tfevents*")
    corpus.append_scalars(event, "train/loss", range(30, 40))
    lost = sorted(rel for rel in after if rel.startswith("compare/all/p-"))
    for name in sites:
        for rel in lost:
            (tmp_path / name).resolve().joinpath(rel).unlink()
    here.clear()
    build_site(archive, tmp_path / "dask", cache=tmp_path / "cache-dask", executor=sites["dask"])
    assert here == ["all"]  # the worker's page wanted pieces the live build no longer had
    monkeypatch.setattr(B, "draw_group", draw_group)
    build_site(archive, tmp_path / "pool", cache=tmp_path / "cache-pool", executor=sites["pool"])
    assert_same_site(tmp_path / "pool", tmp_path / "dask")
    build_site(archive, tmp_path / "fresh", executor=Serial(), use_cache=False)
    assert_same_site(tmp_path / "fresh", tmp_path / "dask", news=False)


def test_worker_killed_mid_build(cluster, reference_site, tmp_path):
    """os._exit on a worker that holds work still running (it waits for a gate), right after
    the first result, once while the runs are drawn and once while the comparison pages are:
    the scheduler runs its work again elsewhere (the nanny restarts the worker) and the site is
    the same."""
    cl, client = cluster
    executor = KillsAWorker(cl.scheduler_address, client, tmp_path / "gate")
    build_site(EXAMPLE, tmp_path / "site", cache=tmp_path / "cache", executor=executor)
    assert executor.calls >= 2 and len(executor.killed) == executor.calls, executor.killed
    deadline = time.monotonic() + 30
    for addr, pid in executor.killed:
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
    """Every run and every comparison page raises on its first attempt; the executor's retries
    make the build succeed."""
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
    n_pages = len(list((reference_site / "compare").iterdir()))  # (a cold build draws them all)
    assert executor.calls >= 2
    # every run and page failed once and then worked; a chunk runs whole again, so an item that
    # worked in a chunk whose next item failed ran once more (never more often than 1 try + 2 retries)
    assert sorted({i.split("-")[0] for i in tries}) == [str(c) for c in range(1, executor.calls + 1)]
    assert len([i for i in tries if i.startswith("1-")]) == n_runs and len([i for i in tries if i.startswith("2-")]) == n_pages
    assert set(tries.values()) <= {2, 3} and 2 in set(tries.values()), tries


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
    taken, one item a chunk (``CHUNK_MAX = 1``): 40 runs, 40 submissions; then the comparison
    pages (all, 4 projects and 20 models: 25), 25 submissions, within the same window."""
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
        calls: list[tuple[int, int, int]] = []  # per map call: items, submissions, most in flight

        def map(self, fn, items):
            items, before, k = list(items), len(submitted), len(self.calls)
            self.calls.append((len(items), 0, 0))
            for i, result in enumerate(super().map(fn, items)):
                most = max(self.calls[k][2], len(submitted) - before - (i + 1))  # chunk i is taken
                self.calls[k] = (len(items), len(submitted) - before, most)
                yield result

    archive = write_archive(tmp_path / "archive", 40, steps=5)
    build_site(archive, tmp_path / "site", cache=tmp_path / "cache", executor=Watched(cl.scheduler_address))
    limit = len(client.scheduler_info()["workers"]) * Dask.IN_FLIGHT_PER_WORKER
    assert [c[:2] for c in Watched.calls[:2]] == [(40, 40), (25, 25)], Watched.calls
    assert Watched.calls[0][2] == limit, f"{Watched.calls[0][2]} chunks in flight, limit {limit}"
    assert max(c[2] for c in Watched.calls) <= limit, Watched.calls


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
