"""A second process for a rebuild's few pieces of work, made by ``fork``.

A nightly rebuild after a few logs grew draws a handful of runs and comparison pages in this
process: too few to start spawned workers (each imports numpy, pyarrow and jinja2 again, ~0.3 s),
so one core sat idle. A forked child has everything this process imported and computed, at the
cost of a fork (a few ms): it takes part of the work, writes its files itself and sends back a
small result.

Forking is safe only while no other thread can hold a lock the child would need: it is refused
when any thread but this one runs, save the allocator's own background threads (jemalloc's,
started by pyarrow; they handle a fork themselves), and once vl-convert is loaded (forking after
it has started hangs). Where it is refused, or the child fails, the caller does the work itself:
a fork only ever makes a build faster, never different.
"""
from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import sys
import threading
import time
import warnings
from typing import Callable


#: OS threads that survive a fork safely (their library re-arms them in the child)
SAFE_THREADS = ("jemalloc_bg_thd",)


def can_fork() -> bool:
    """Whether this process may fork now (see the module's docstring). Only on Linux, where
    ``/proc`` tells which threads run; ``SITEGEN_NO_FORK=1`` turns it off."""
    if not hasattr(os, "fork") or not sys.platform.startswith("linux") or "vl_convert" in sys.modules:
        return False
    if threading.active_count() != 1 or os.environ.get("SITEGEN_NO_FORK"):
        return False
    names = _thread_names()
    return names is not None and sum(n not in SAFE_THREADS for n in names) == 1


def _thread_names() -> list[str] | None:
    """The names of this process's OS threads (None: unknown)."""
    try:
        names = []
        for t in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{t}/comm") as f:
                names.append(f.read().strip())
        return names
    except OSError:
        return None


class Child:
    """A forked child running ``work()``; :meth:`result` is what it returned (pickled),
    or None when it failed, died or could not be started."""

    def __init__(self, work: Callable[[], object]) -> None:
        self.pid = 0
        self._read = -1
        if not can_fork():
            return
        read, write = os.pipe()
        with warnings.catch_warnings():  # (3.12+ warns of the allocator's threads: see above)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's code
            code = 1
            try:
                # no collections in the child: a full one would touch (and so copy) every page it
                # shares with the parent; it lives for a few pages' work
                gc.disable()
                os.close(read)
                data = pickle.dumps(work(), pickle.HIGHEST_PROTOCOL)
                view = memoryview(data)
                while view:
                    view = view[os.write(write, view):]
                code = 0
            except BaseException as exc:  # noqa: BLE001 - the parent does the work itself
                try:  # one line: the build goes on and is whole
                    os.write(2, f"sitegen: warning: a forked helper failed ({type(exc).__name__}: {exc}); "
                                "its part is drawn by the main process\n".encode("utf-8", "replace"))
                except BaseException:  # noqa: BLE001
                    pass
            finally:
                os._exit(code)
        os.close(write)
        self.pid, self._read = pid, read

    def result(self, timeout: float | None = None) -> object | None:
        """Wait for the child; its result, or None (then the caller does its work itself).
        ``timeout``: seconds to wait at most, after which the child is ended (a child that
        hangs must not hang the build)."""
        if not self.pid:
            return None
        chunks = []
        end = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                if end is not None and not select.select([self._read], [], [], max(0.0, end - time.monotonic()))[0]:
                    os.kill(self.pid, signal.SIGKILL)
                    sys.stderr.write(f"sitegen: warning: a forked helper took over {timeout:.0f} s; "
                                     "its part is drawn by the main process\n")
                    break  # (killed: its status says it failed)
                got = os.read(self._read, 1 << 20)
                if not got:
                    break
                chunks.append(got)
        finally:
            os.close(self._read)
            _, status = os.waitpid(self.pid, 0)
            self.pid = 0
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            return None
        try:
            return pickle.loads(b"".join(chunks))
        except Exception:  # noqa: BLE001 - a result cut short: the caller does the work
            return None

    def stop(self) -> None:
        """End a child whose result is no longer wanted (the build failed)."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self.result()
