"""Executors that bring trouble to the work they are handed, for the tests of running a build
on a Dask cluster: each wraps the function the build passes (``functools.partial`` of a
module-level function here, so the workers can import it) and numbers the items, so a wrapper
can tell them apart without knowing what they are.

The build hands the executor its per-run function (``sitegen.pipeline.jobs.process_run``) and
then its comparison-page function (``draw_group``); an item is numbered ``"<map call>-<index>"``,
so the items of the two calls are told apart too. These executors change nothing else."""
from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from sitegen.pipeline.executors import Dask


def _attempt(marks: str, i: str) -> int:
    """Count one more attempt at item ``i`` (a file of one byte per attempt in ``marks``); the
    attempts so far."""
    path = Path(marks) / f"item{i}"
    with path.open("a") as f:
        f.write("x")
    return path.stat().st_size


def attempts(marks: Path) -> dict[str, int]:
    """``{"<map call>-<index>": attempts}`` as counted by :func:`flaky` and :func:`broken`."""
    return {p.name[4:]: p.stat().st_size for p in Path(marks).glob("item*")}


def flaky(fn: Callable, marks: str, numbered: tuple[str, Any]) -> Any:
    """``fn(item)``, except that the first attempt at each item raises (a transient error)."""
    i, item = numbered
    if _attempt(marks, i) == 1:
        raise RuntimeError(f"transient failure of item {i}")
    return fn(item)


def broken(fn: Callable, marks: str, numbered: tuple[str, Any]) -> Any:
    """Always raises (a permanent error): the build must fail after the retries, not hang."""
    i, _item = numbered
    _attempt(marks, i)
    raise RuntimeError(f"permanent failure of item {i}")


def gated(fn: Callable, gate: str, numbered: tuple[str, Any]) -> Any:
    """``fn(item)`` at once for item 0; every other item first waits until the file ``gate``
    exists, so it is certainly still running on its worker when item 0's result is in."""
    i, item = numbered
    while not i.endswith("-0") and not os.path.exists(gate):
        time.sleep(0.01)
    return fn(item)


class Wrapped(Dask):
    """A Dask executor that runs ``wrapper(fn, *args, (i, item))`` in place of ``fn(item)``."""

    def __init__(self, scheduler: str, wrapper: Callable, *args: Any) -> None:
        super().__init__(scheduler)
        self.wrapper, self.args = wrapper, args
        self.calls = 0

    def map(self, fn: Callable, items: Iterable) -> Iterator:
        self.calls += 1
        return super().map(functools.partial(self.wrapper, fn, *self.args), _numbered(self.calls, items))


def _numbered(call: int, items: Iterable) -> list[tuple[str, Any]]:
    return [(f"{call}-{i}", item) for i, item in enumerate(items)]


class KillsAWorker(Dask):
    """One item a chunk; every item but the first waits for a gate (:func:`gated`). Once the
    first result is in, a worker that holds work is ended (``os._exit``) and the gate opened:
    the work it held is lost and must run again elsewhere. So in every :meth:`map` call (of two
    items or more: one gate each). :attr:`killed`: ``[(address, pid)]``, :attr:`calls`: the calls."""

    CHUNK_MAX = 1

    def __init__(self, scheduler: str, client: Any, gate: Path) -> None:
        super().__init__(scheduler)
        self.client, self.gate = client, gate  # (a client of the test's own, on the same scheduler)
        self.killed: list[tuple[str, int]] = []
        self.calls = 0

    def map(self, fn: Callable, items: Iterable) -> Iterator:
        self.calls += 1
        gate = Path(f"{self.gate}-{self.calls}")
        results = super().map(functools.partial(gated, fn, str(gate)), _numbered(self.calls, items))
        return self._kill_after_first(results, gate)

    def _kill_after_first(self, results: Iterator, gate: Path) -> Iterator:
        for i, result in enumerate(results):
            if i == 0:
                client = self.client
                client.wait_for_workers(2, timeout=60)  # (the worker killed in the last call is back)
                pids = client.run(os.getpid)
                busy = sorted(addr for addr, keys in client.processing().items() if keys)
                assert busy, "no worker had work in progress when the first result arrived"
                self.killed.append((busy[0], pids[busy[0]]))
                client.run(die, workers=[busy[0]], wait=False)
                gate.touch()
            yield result


async def die() -> None:
    """Run on a worker with ``client.run(die, wait=False)``: the process ends at once."""
    os._exit(1)
