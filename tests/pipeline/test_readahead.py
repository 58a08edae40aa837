"""Reading ahead (sitegen.pipeline.readahead): files announced in job order, never more than the
window beyond the jobs done, jobs already drawn skipped, and nothing that can block the build.

No sleeps: the tests wait until the read-ahead thread itself waits for room in its window (its
condition's ``wait``), then look at what it announced."""
from __future__ import annotations

import os
import threading
import types

import pytest

from sitegen.pipeline import readahead

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise is Linux/BSD only")

LIMIT = 30  # seconds to wait for the thread before the test fails (it never hangs the suite)


class _Watched(threading.Condition):
    """A condition that sets :attr:`waiting` each time a thread starts to wait on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, timeout=None):
        self.waiting.set()
        return super().wait(timeout)


@pytest.fixture
def watched(monkeypatch) -> list[_Watched]:
    """Every condition the read-ahead makes, watched (its module's ``threading`` only)."""
    made: list[_Watched] = []

    def condition() -> _Watched:
        made.append(_Watched())
        return made[-1]

    monkeypatch.setattr(readahead, "threading", types.SimpleNamespace(Condition=condition, Thread=threading.Thread))
    return made


class Asked:
    """The jobs whose files the thread asked for, in order; :meth:`until` waits for the n-th."""

    def __init__(self, paths: list[str], fail: int | None = None) -> None:
        self.paths, self.fail, self.jobs = paths, fail, []
        self._cond = threading.Condition()

    def __call__(self, k: int) -> list[str]:
        with self._cond:
            self.jobs.append(k)
            self._cond.notify_all()
        if k == self.fail:
            raise RuntimeError("symlink loop")
        return [self.paths[k]]

    def until(self, n: int) -> list[int]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.jobs) >= n, LIMIT), f"only {self.jobs} were asked for"
            return list(self.jobs)


def _files(tmp_path, sizes):
    paths = []
    for i, n in enumerate(sizes):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x" * n)
        paths.append(str(p))
    return paths


def _when_waiting(cond: _Watched, change=None) -> None:
    """Return once the thread waits for room (the first time it does: ``change`` None), or
    make ``change`` (a call under test) and return once it waits again."""
    if change is not None:
        cond.waiting.clear()  # (it is waiting now: only this call can wake it)
        change()
    assert cond.waiting.wait(LIMIT), "the read-ahead thread never waited for room"


def _finished(ahead: readahead.ReadAhead) -> None:
    """Close ``ahead`` from another thread; fail unless that returns."""
    closer = threading.Thread(target=ahead.close, daemon=True)
    closer.start()
    closer.join(LIMIT)
    assert not closer.is_alive(), "close() did not return"
    assert not any(t.name == "sitegen-readahead" and t.is_alive() for t in threading.enumerate())


def test_announces_in_order_within_the_window(tmp_path, watched):
    asked = Asked(_files(tmp_path, [1000] * 10))
    ahead = readahead.ReadAhead(asked, 10, window=2500)  # room for three files of 1,000 bytes
    (cond,) = watched
    try:
        _when_waiting(cond)
        assert asked.jobs == [0, 1, 2]  # 3,000 bytes announced: the window is full
        _when_waiting(cond, lambda: ahead.done(0))  # job 0 is drawn: one more fits
        assert asked.jobs == [0, 1, 2, 3]
        ahead.done(6)  # jobs up to 6 are drawn: 4-6 are not announced any more
        assert asked.until(7) == [0, 1, 2, 3, 7, 8, 9]
    finally:
        _finished(ahead)
    assert asked.jobs == [0, 1, 2, 3, 7, 8, 9]


def test_a_large_job_is_announced_alone_and_missing_files_are_skipped(tmp_path, watched):
    paths = _files(tmp_path, [5000, 10])
    asked = Asked([[p, str(tmp_path / "gone")] for p in paths])
    ahead = readahead.ReadAhead(lambda k: asked(k)[0], 2, window=100)
    (cond,) = watched
    try:
        _when_waiting(cond)
        assert asked.jobs == [0]  # larger than the window, but the first job is always announced
        ahead.done(0)
        assert asked.until(2) == [0, 1]
    finally:
        _finished(ahead)
    assert readahead.advise(str(tmp_path / "gone")) == 0
    assert readahead.advise(paths[0]) == 5000


def test_a_job_whose_files_cannot_be_named_is_skipped(tmp_path):
    asked = Asked(_files(tmp_path, [10, 10]), fail=0)
    ahead = readahead.ReadAhead(asked, 2)
    try:
        assert asked.until(2) == [0, 1]
    finally:
        _finished(ahead)


def test_a_fifo_is_skipped_without_blocking(tmp_path):
    fifo = tmp_path / "events.out.tfevents.1.fifo"
    os.mkfifo(fifo)  # no writer: a blocking open would never return
    done = []
    t = threading.Thread(target=lambda: done.append(readahead.advise(str(fifo))), daemon=True)
    t.start()
    t.join(LIMIT)
    assert done == [0]


def test_close_stops_a_waiting_thread(tmp_path, watched):
    asked = Asked(_files(tmp_path, [1000] * 4))
    ahead = readahead.ReadAhead(asked, 4, window=10)
    (cond,) = watched
    _when_waiting(cond)  # the thread waits for room
    _finished(ahead)  # close must wake it and end it
    assert asked.jobs == [0]


def test_nothing_to_read_starts_no_thread():
    ahead = readahead.ReadAhead(lambda k: [], 0)
    assert not any(t.name == "sitegen-readahead" for t in threading.enumerate())
    ahead.close()
