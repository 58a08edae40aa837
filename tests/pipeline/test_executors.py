"""The executors (sitegen.pipeline.executors): results in item order whichever runs them, a
bounded number of chunks in flight, and the executor a command line names (the Dask executor on
a real cluster: test_dask.py)."""
from __future__ import annotations

from concurrent import futures

import pytest

from sitegen.errors import UsageError
from sitegen.pipeline.executors import Dask, LocalPool, Serial, executor_for


def test_executor_for_names_and_usage_errors():
    assert isinstance(executor_for("local", workers=1), Serial)
    pool = executor_for("local", workers=3)
    assert isinstance(pool, LocalPool) and pool.workers == 3
    assert isinstance(executor_for("local"), LocalPool)  # one worker per core
    dask = executor_for("dask", workers=2, scheduler="tcp://127.0.0.1:1")
    assert isinstance(dask, Dask) and (dask.scheduler, dask.workers) == ("tcp://127.0.0.1:1", 2)  # (not connected yet)
    with pytest.raises(UsageError, match="unknown executor"):
        executor_for("ray")
    with pytest.raises(UsageError, match="needs the dask executor"):
        executor_for("local", scheduler="tcp://127.0.0.1:1")


def test_serial_and_a_local_pool_yield_in_item_order():
    items = list(range(-50, 50))
    with Serial() as serial:
        assert list(serial.map(abs, items)) == [abs(i) for i in items]
    with LocalPool(2) as pool:  # real spawned workers (abs: importable by them)
        assert list(pool.map(abs, items)) == [abs(i) for i in items]
        assert list(pool.map(abs, [])) == []
        assert list(pool.map(abs, items[:3])) == [50, 49, 48]  # the same workers, a second map


class _CountingPool(futures.ThreadPoolExecutor):
    """Stands in for the process pool LocalPool starts: threads of this process (its
    initializer, which tunes a process of sitegen's own, is not run), each submission counted."""

    made: list["_CountingPool"] = []

    def __init__(self, workers: int, **_kw) -> None:
        super().__init__(workers)
        self.submitted = 0
        self.closed = False
        _CountingPool.made.append(self)

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)

    def shutdown(self, *args, **kwargs):
        self.closed = True
        super().shutdown(*args, **kwargs)


@pytest.fixture
def counting_pool(monkeypatch) -> list[_CountingPool]:
    monkeypatch.setattr(futures, "ProcessPoolExecutor", _CountingPool)  # (LocalPool imports it when it starts)
    _CountingPool.made.clear()
    return _CountingPool.made


def test_a_local_pool_keeps_a_bounded_window_of_chunks_in_flight(counting_pool):
    """``workers x IN_FLIGHT_PER_WORKER`` chunks are submitted at once, and one more only as a
    chunk's results are taken: a result may hold a whole run's page, so they must not pile up."""
    items = list(range(200))
    window = 2 * LocalPool.IN_FLIGHT_PER_WORKER
    with LocalPool(2) as executor:
        results = executor.map(abs, items)
        (pool,) = counting_pool
        assert pool.submitted == window  # before anything is taken
        taken = [next(results)]
        assert pool.submitted == window + 1  # the first chunk taken: one more submitted
        for k, result in enumerate(results, start=2):
            taken.append(result)
            assert pool.submitted <= window + k
        assert taken == items
        assert len(items) / LocalPool.CHUNK_MAX <= pool.submitted <= len(items)  # every chunk once, CHUNK_MAX items at most
    assert pool.closed  # the with block stopped the workers


def test_stopping_early_submits_nothing_more(counting_pool):
    with LocalPool(1) as executor:
        results = executor.map(abs, list(range(100)))
        next(results)
        results.close()  # the caller stops (e.g. the build failed)
        (pool,) = counting_pool
        assert pool.submitted == LocalPool.IN_FLIGHT_PER_WORKER + 1


def test_worker_processes_only_for_enough_work(counting_pool):
    """Workers draw a stage with many items, however small their logs (a run costs milliseconds
    to draw), or with a large archive's; a few items stay in this process; workers an earlier
    stage started take any later stage with enough items; other executors take everything."""
    from types import SimpleNamespace

    from sitegen.pipeline import build as B

    small, large = SimpleNamespace(log_bytes=1 << 20), SimpleNamespace(log_bytes=B.MIN_PARALLEL_BYTES)
    with LocalPool(2) as pool:
        assert isinstance(B._runner(pool, small, B.MIN_PARALLEL_RUNS), LocalPool)
        assert isinstance(B._runner(pool, small, B.MIN_PARALLEL_RUNS - 1), Serial)
        assert isinstance(B._runner(pool, large, B.MIN_PARALLEL_ITEMS), LocalPool)
        assert isinstance(B._runner(pool, large, B.MIN_PARALLEL_ITEMS - 1), Serial)
        assert not pool.started and not counting_pool
        assert list(pool.map(abs, [-1, 2])) == [1, 2]
        assert pool.started and len(counting_pool) == 1
        assert B._runner(pool, small, B.MIN_PARALLEL_ITEMS) is pool  # (no start-up cost left to save)
        assert isinstance(B._runner(pool, small, B.MIN_PARALLEL_ITEMS - 1), Serial)
    dask = Dask("tcp://127.0.0.1:1")
    assert B._runner(dask, small, 1) is dask
