"""Reading ahead (sitegen.pipeline.readahead): files announced in job order, never more than the window
beyond the jobs done, and a build that reads ahead gives the same site."""
from __future__ import annotations

import os
import threading
import time

import pytest

from sitegen.pipeline import readahead as prefetch

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise is Linux/BSD only")


def _files(tmp_path, sizes):
    paths = []
    for i, n in enumerate(sizes):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x" * n)
        paths.append(str(p))
    return paths


def _asked_until(asked: list[int], n: int, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while len(asked) < n and time.monotonic() < end:
        time.sleep(0.005)


def test_announces_in_order_within_the_window(tmp_path):
    paths = _files(tmp_path, [1000] * 10)
    asked: list[int] = []
    lock = threading.Lock()

    def files(k: int) -> list[str]:
        with lock:
            asked.append(k)
        return [paths[k]]

    ahead = prefetch.ReadAhead(files, len(paths), window=2500)  # room for three files of 1,000 bytes
    try:
        _asked_until(asked, 3)
        time.sleep(0.1)  # it must stop there: 3,000 bytes announced, the window is full
        assert asked == [0, 1, 2]
        ahead.done(0)  # job 0 is drawn: one more fits
        _asked_until(asked, 4)
        time.sleep(0.05)
        assert asked == [0, 1, 2, 3]
        ahead.done(6)  # jobs up to 6 are drawn: 4-6 are not announced any more
        _asked_until(asked, 7)
        assert asked == [0, 1, 2, 3, 7, 8, 9]
    finally:
        ahead.close()
    assert not any(t.name == "sitegen-readahead" and t.is_alive() for t in threading.enumerate())


def test_a_large_job_is_announced_alone_and_missing_files_are_skipped(tmp_path):
    paths = _files(tmp_path, [5000, 10])
    asked: list[int] = []
    ahead = prefetch.ReadAhead(lambda k: (asked.append(k), [paths[k], str(tmp_path / "gone")])[1], 2, window=100)
    try:
        _asked_until(asked, 1)
        time.sleep(0.05)
        assert asked == [0]  # larger than the window, but the first job is always announced
        ahead.done(0)
        _asked_until(asked, 2)
        assert asked == [0, 1]
    finally:
        ahead.close()
    assert prefetch.advise(str(tmp_path / "gone")) == 0
    assert prefetch.advise(paths[0]) == 5000


def test_a_job_whose_files_cannot_be_named_is_skipped(tmp_path):
    paths = _files(tmp_path, [10, 10])
    asked: list[int] = []

    def files(k: int) -> list[str]:
        asked.append(k)
        if k == 0:
            raise RuntimeError("symlink loop")
        return [paths[k]]

    ahead = prefetch.ReadAhead(files, 2)
    _asked_until(asked, 2)
    ahead.close()
    assert asked == [0, 1]


def test_a_fifo_is_skipped_without_blocking(tmp_path):
    fifo = tmp_path / "events.out.tfevents.1.fifo"
    os.mkfifo(fifo)  # no writer: a blocking open would never return
    done = []
    t = threading.Thread(target=lambda: done.append(prefetch.advise(str(fifo))), daemon=True)
    t.start()
    t.join(5)
    assert done == [0]


def test_close_stops_a_waiting_thread(tmp_path):
    paths = _files(tmp_path, [1000] * 4)
    ahead = prefetch.ReadAhead(lambda k: [paths[k]], 4, window=10)
    t = time.monotonic()
    ahead.close()  # the thread waits for room; close must not
    assert time.monotonic() - t < 2
