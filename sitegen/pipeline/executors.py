"""Where per-run work runs: here (:class:`Serial`), in worker processes of this machine
(:class:`LocalPool`) or on a Dask cluster (:class:`Dask`).

An executor is handed the function to run and knows nothing of the build. ``map(fn, items)``
yields ``fn(item)`` for every item **in item order**, whichever executor runs it, so the site is
byte-identical whichever one built it. The functions the build passes are pure functions of
their items (plus the decode cache, which only ever speeds them up), so running one twice — a
retry, or a lost worker's item recomputed — changes nothing. An executor is a context manager:
the workers it started are stopped when the ``with`` block ends (the build enters it).
"""

from __future__ import annotations

import collections
import functools
import gc
import logging
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, TypeVar, Union

from sitegen.errors import UsageError

if TYPE_CHECKING:
    from concurrent import futures

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class Serial:
    """Everything in this process, one item after another."""

    workers = 1

    def __enter__(self) -> Serial:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        return map(fn, items)


class LocalPool:
    """``workers`` spawned processes of this machine (0: one per core), started on the first
    :meth:`map` and kept for the build's next ones. Items go out in small chunks, a bounded
    number in flight: a result may hold a whole run's page, so finished results must not pile up."""

    CHUNK_MAX = 4  # items per chunk at most
    IN_FLIGHT_PER_WORKER = 3  # chunks in flight per worker

    def __init__(self, workers: int = 0) -> None:
        self.workers = workers or os.cpu_count() or 1
        self._pool: futures.Executor | None = None

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    @property
    def started(self) -> bool:
        """Its workers are running (a later stage may use them at no start-up cost)."""
        return self._pool is not None

    def _started(self) -> futures.Executor:
        if self._pool is None:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            # spawn, not fork: forking after vl-convert has started hangs
            self._pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"), initializer=tune_process)
        return self._pool

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """Submits the first chunks at once (so the caller can work meanwhile), yields in order."""
        items = list(items)
        if not items:
            return iter(())
        n = max(self.workers * 8, len(items) // self.CHUNK_MAX + 1)
        chunks = _chunks(items, n)
        return _in_order(self._started(), functools.partial(_apply_all, fn), chunks, self.workers * self.IN_FLIGHT_PER_WORKER)


class Dask:
    """A Dask cluster: ``Client(scheduler)``, or a ``LocalCluster`` of ``workers`` processes
    (0: one per core) started for the build when ``scheduler`` is None. Every worker must see the
    archive and the decode cache at the same paths as this machine and have the same sitegen
    installed. Chunks are retried twice; a worker that dies has its chunks run elsewhere."""

    CHUNK_MAX = 16  # small enough that a lost worker costs little, large enough for tiny runs
    IN_FLIGHT_PER_WORKER = 3

    def __init__(self, scheduler: str | None = None, workers: int = 0) -> None:
        self.scheduler, self.workers = scheduler, workers
        self._client: Any = None
        self._cluster: Any = None

    def __enter__(self) -> Dask:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._client = self._cluster = None

    def _started(self) -> Any:
        if self._client is None:
            try:
                import distributed
            except ImportError:  # pragma: no cover - depends on the environment
                raise UsageError('the dask executor needs dask.distributed: pip install "sitegen[dask]"') from None
            address = self.scheduler
            if address is None:
                # processes, one thread each: the decoders hold the GIL for part of their work
                self._cluster = distributed.LocalCluster(
                    n_workers=self.workers or os.cpu_count() or 1, threads_per_worker=1, processes=True, dashboard_address=None
                )
                address = self._cluster.scheduler_address
            self._client = distributed.Client(address, set_as_default=False)
        return self._client

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        items = list(items)
        if not items:
            return iter(())
        client = self._started()
        try:
            nworkers = max(1, len(client.scheduler_info(n_workers=-1)["workers"]))
        except TypeError:  # older distributed: no n_workers argument
            nworkers = max(1, len(client.scheduler_info()["workers"]))
        # eight chunks a worker at least, as LocalPool: a few heavy items (pages) spread evenly
        size = max(1, min(self.CHUNK_MAX, -(-len(items) // (nworkers * 8))))
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        log.info("dask: %d items in %d chunks on %d workers", len(items), len(chunks), nworkers)

        def submit(chunk: list) -> Any:
            # pure=False: a fresh key per submission; retries: a task that raised runs again
            return client.submit(_apply_all, fn, chunk, pure=False, retries=2)

        return _in_order_futures(submit, chunks, max(2, nworkers * self.IN_FLIGHT_PER_WORKER))


Executor = Union[Serial, LocalPool, Dask]


def _apply_all(fn: Callable[[T], R], items: list[T]) -> list[R]:
    return [fn(item) for item in items]


def _chunks(items: list, n: int) -> list[list]:
    """``items`` cut into ``n`` contiguous, nearly equal chunks (order kept)."""
    n = max(1, min(n, len(items)))
    return [items[i * len(items) // n : (i + 1) * len(items) // n] for i in range(n)]


def _in_order(pool: futures.Executor, fn: Callable, chunks: list[list], window: int) -> Iterator:
    return _in_order_futures(lambda chunk: pool.submit(fn, chunk), chunks, window)


def _in_order_futures(submit: Callable[[list], Any], chunks: list[list], window: int) -> Iterator:
    """Submits ``window`` chunks now and one more as each result is taken; yields every item's
    result in order. Stopping early cancels what is still pending."""
    pending: collections.deque = collections.deque(submit(c) for c in chunks[:window])
    rest = iter(chunks[window:])

    def results() -> Iterator:
        try:
            while pending:
                future = pending.popleft()
                got = future.result()
                if hasattr(future, "release"):
                    future.release()  # (dask: the worker may forget it now)
                nxt = next(rest, None)
                if nxt is not None:
                    pending.append(submit(nxt))
                yield from got
        finally:
            for future in pending:
                future.cancel()

    return results()


def executor_for(kind: str, *, workers: int = 0, scheduler: str | None = None) -> Executor:
    """The executor a command line or config names: ``"local"`` or ``"dask"``."""
    if kind == "dask":
        return Dask(scheduler, workers)
    if kind != "local":
        raise UsageError(f"unknown executor {kind!r}: expected local or dask")
    if scheduler is not None:
        raise UsageError("a scheduler address needs the dask executor (--executor dask)")
    return Serial() if workers == 1 else LocalPool(workers)


class _NoPandas:
    """An import finder that refuses pandas (see :func:`tune_process`)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is kept out of sitegen's own processes")
        return None


def tune_process() -> None:
    """Settings for a process that is sitegen's alone (the ``sitegen`` command, its workers),
    never for a library caller's: pandas refused (pyarrow imports it, when installed, on its
    first conversion from Python objects, 0.5 s per process, never used), one OpenBLAS thread
    (sitegen multiplies no matrices; only effective before numpy loads) and fewer garbage
    collections (a build makes many objects that live to its end, and next to no cycles)."""
    if not any(isinstance(f, _NoPandas) for f in sys.meta_path) and "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    gc.set_threshold(100_000, 50, 50)
