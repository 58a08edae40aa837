"""Where the per-run work runs: here (worker processes of this machine) or on a Dask cluster.

:func:`map_jobs` applies :func:`sitegen.pipeline.build.process` to every :class:`~sitegen.pipeline.build.Job` and
yields the results **in job order**, whatever executor ran them, so the site is byte-identical
whichever one built it. ``process`` is a pure function of its job (plus the decode cache, which
only ever speeds it up), so running a job twice — a retry, or a worker lost mid-build whose
results are recomputed — changes nothing.

* ``"local"``: in this process for small inputs, else in ``spawn``\\ ed worker processes
  (forking after vl-convert has started hangs).
* ``"dask"``: on ``dask.distributed.Client(scheduler)``, or on a ``LocalCluster`` started for the
  build when ``scheduler`` is None. Jobs go out in chunks, at most a few chunks per worker in
  flight (results are whole run pages: memory stays bounded on both sides), each with
  ``retries=2``. A worker that dies takes its running and finished-but-not-gathered chunks with
  it; the scheduler runs them again elsewhere because this client still holds their futures.
  Every worker must see the archive and the decode cache (``job.cache``) at the same paths as
  this machine (a shared file system), and have the same sitegen version installed.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import logging
import os
from typing import TYPE_CHECKING, Callable, Iterator

from sitegen.errors import UsageError

if TYPE_CHECKING:  # build imports this module: no import of build at module level
    from concurrent.futures import ProcessPoolExecutor

    from sitegen.pipeline.build import Job, RunResult

log = logging.getLogger(__name__)

EXECUTORS = ("local", "dask")
#: Log bytes below which a local build runs in one process: starting workers would cost more
PARALLEL_MIN_BYTES = 64 << 20
#: Jobs per Dask task at most: small enough that a lost worker costs little, large enough
#: that 2,000 tiny runs do not drown the scheduler in task overhead.
DASK_CHUNK_MAX = 16
#: Chunks in flight per worker: enough to keep each worker busy while results travel back.
DASK_INFLIGHT_PER_WORKER = 3
#: Local chunks: at most this many runs each, at most this many chunks in flight per worker.
LOCAL_CHUNK_MAX = 4
LOCAL_INFLIGHT_PER_WORKER = 3


def _process_many(jobs: list[Job], fn: Callable[[Job], RunResult] | None = None) -> list[RunResult]:
    if fn is None:
        from sitegen.pipeline.build import process as fn
    return [fn(j) for j in jobs]


def _chunks(jobs: list, n: int) -> list[list]:
    """``jobs`` cut into ``n`` contiguous, nearly equal chunks (order kept)."""
    n = max(1, min(n, len(jobs)))
    return [jobs[i * len(jobs) // n : (i + 1) * len(jobs) // n] for i in range(n)]


def map_jobs(
    jobs: list[Job], *, executor: str = "local", scheduler: str | None = None, workers: int = 0,
    fn: Callable[[Job], RunResult] | None = None, pool: ProcessPoolExecutor | None = None,
) -> Iterator[RunResult]:
    """``process(job)`` for every job, yielded in job order.

    ``workers``: local worker processes (0: one per core; 1: in this process), or the size of
    the ``LocalCluster`` started when ``executor="dask"`` and ``scheduler`` is None (0: one per
    core). ``scheduler``: a Dask scheduler address (``tcp://host:8786``); only with
    ``executor="dask"``. ``fn`` replaces :func:`sitegen.pipeline.build.process` (tests); it must be
    importable by the workers. ``pool``: a :func:`local_pool` to run on (else one is started).
    """
    if executor not in EXECUTORS:
        raise UsageError(f"unknown executor {executor!r}: expected one of {', '.join(EXECUTORS)}")
    if scheduler is not None and executor != "dask":
        raise UsageError("a scheduler address needs the dask executor (--executor dask)")
    if executor == "dask":
        return _map_dask(list(jobs), scheduler, workers, fn)
    return _map_local(list(jobs), workers or os.cpu_count() or 1, fn, pool)


class _NoPandas:
    """An import finder that refuses pandas (see :func:`without_pandas`)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is kept out of sitegen's own processes")
        return None


def without_pandas() -> None:
    """Keep pandas out of a process that is sitegen's alone (the CLI, local workers): pyarrow
    imports it, when installed, on its first conversion from Python objects, which costs
    0.4-0.7 s per process and is never used. Not for library callers or Dask workers."""
    import sys

    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


def no_blas_threads() -> None:
    """One OpenBLAS thread for this process and the workers it starts (they inherit the
    environment): sitegen never multiplies matrices, yet numpy's OpenBLAS starts a thread per
    core in every process, and they spin at start-up (1% of a 500-run build's CPU). Only before
    numpy is imported; a setting the user made wins."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def keep_freed_memory() -> None:
    """Let glibc keep freed memory for reuse instead of returning it to the system at once.

    A run decodes into a few fresh megabyte-sized buffers; by default each comes from a new
    ``mmap`` and goes back on free, so every run pays page faults on all of them again (on
    virtual machines, the slowest part of decoding a small file). Bounded: at most
    ``TRIM_BYTES`` of free memory is kept. Only for sitegen's own processes; a no-op off glibc."""
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    mallopt(m_mmap_threshold, MMAP_BYTES)
    mallopt(m_trim_threshold, TRIM_BYTES)


MMAP_BYTES = 32 << 20  # allocations above this still get their own mapping
TRIM_BYTES = 128 << 20


def _init_worker() -> None:
    """Import what drawing needs (a worker's first job would otherwise wait for it), not
    ``pyarrow.compute`` (~40 ms), which drawing a TensorBoard run no longer needs; then leave
    everything imported out of the garbage collector's full passes (:func:`gc.freeze`: they
    walked those objects again and again, 1.3% of a cold build's CPU time)."""
    import gc

    without_pandas()
    keep_freed_memory()
    from sitegen.pipeline import build  # noqa: F401
    from sitegen.pages import render, runpage

    render.load_templates()
    gc.freeze()


def local_pool(workers: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes (forking after vl-convert has started hangs). A build keeps
    one pool for the runs and then the comparison pages: starting a worker costs ~0.5 s."""
    import multiprocessing as mp  # here: a rebuild that draws a few runs in this process never needs it
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_init_worker)


def _map_local(jobs: list[Job], workers: int, fn: Callable | None,
               pool: ProcessPoolExecutor | None = None) -> Iterator[RunResult]:
    """Small chunks with a bounded number in flight: a result holds a run's whole page, so
    letting finished chunks pile up would make memory grow with the archive."""
    if workers <= 1 or len(jobs) < 2:
        for j in jobs:
            yield from _process_many([j], fn)
        return
    chunks = _chunks(jobs, max(workers * 8, len(jobs) // LOCAL_CHUNK_MAX + 1))
    window = workers * LOCAL_INFLIGHT_PER_WORKER
    with contextlib.nullcontext(pool) if pool is not None else local_pool(min(workers, len(chunks))) as pool:
        for part in map_calls(pool, functools.partial(_process_many, fn=fn), chunks, window=window):
            yield from part


def _warm_up() -> None:
    """Nothing: a task, so that the pool starts a worker (which runs :func:`_init_worker`)."""


def warm(pool: ProcessPoolExecutor, workers: int) -> None:
    """Start the pool's workers and their imports now, without waiting for them."""
    for _ in range(workers):
        pool.submit(_warm_up)


def map_calls(pool: ProcessPoolExecutor, fn: Callable, items: Iterator, *, window: int,
              before: Callable[[], object] | None = None) -> Iterator:
    """``fn(item)`` for every item on ``pool``, at most ``window`` in flight (each item may be
    large), results in item order; ``before()`` runs here once the first items are submitted."""
    pending: collections.deque = collections.deque()
    items = iter(items)
    for item in itertools.islice(items, window):
        pending.append(pool.submit(fn, item))
    if before is not None:
        before()
    while pending:
        result = pending.popleft().result()
        nxt = next(items, None)
        if nxt is not None:
            pending.append(pool.submit(fn, nxt))
        yield result


def _dask():
    try:
        import distributed
    except ImportError:  # pragma: no cover - depends on the environment
        raise UsageError('the dask executor needs dask.distributed: pip install "sitegen[dask]"') from None
    return distributed


def _map_dask(jobs: list[Job], scheduler: str | None, workers: int, fn: Callable | None) -> Iterator[RunResult]:
    if not jobs:
        return
    distributed = _dask()
    cluster = None
    if scheduler is None:
        n = workers or os.cpu_count() or 1
        # processes, one thread each: the decoders hold the GIL for part of their work
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        scheduler = cluster.scheduler_address
    try:
        with distributed.Client(scheduler, set_as_default=False) as client:
            yield from _gather_in_order(client, jobs, fn)
    finally:
        if cluster is not None:
            cluster.close()


def _worker_count(client) -> int:
    try:
        return max(1, len(client.scheduler_info(n_workers=-1)["workers"]))
    except TypeError:  # older distributed: no n_workers argument
        return max(1, len(client.scheduler_info()["workers"]))


def _gather_in_order(client, jobs: list[Job], fn: Callable | None) -> Iterator[RunResult]:
    """Submit chunks with at most ``workers * DASK_INFLIGHT_PER_WORKER`` outstanding, yield in order."""
    nworkers = _worker_count(client)
    size = max(1, min(DASK_CHUNK_MAX, -(-len(jobs) // (nworkers * 4))))
    chunks = [jobs[i : i + size] for i in range(0, len(jobs), size)]
    limit = max(2, nworkers * DASK_INFLIGHT_PER_WORKER)
    log.info("dask: %d jobs in %d chunks on %d workers (%d in flight)", len(jobs), len(chunks), nworkers, limit)
    pending: collections.deque = collections.deque()
    todo = iter(chunks)

    def refill() -> None:
        while len(pending) < limit:
            chunk = next(todo, None)
            if chunk is None:
                return
            # pure=False: a fresh key per submission; retries: a task that raised runs again
            # (a worker that died is handled by the scheduler itself: the task is rescheduled)
            pending.append(client.submit(_process_many, chunk, fn, pure=False, retries=2))

    refill()
    try:
        while pending:
            future = pending.popleft()
            results = future.result()
            future.release()  # the worker may forget it now: memory follows the window
            refill()
            yield from results
    finally:
        for future in pending:  # the build stopped early (error, Ctrl-C): do not leave work behind
            future.cancel()
