"""Reading ahead: the kernel is told which log files the build will read next.

A nightly build reads an archive that has left the page cache since the night before; read one
file after another, a cloud disk answers at the pace of its latency. Announced ahead with
``posix_fadvise(WILLNEED)``, the disk serves many requests at once (measured in
``docs/performance.md``). At most ``window`` bytes are announced beyond the runs already drawn,
so a large archive does not push its own first files out of memory before they are read.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import deque
from typing import Callable

#: bytes announced beyond the runs already drawn (a few seconds of decoding)
WINDOW_BYTES = 256 << 20


def advise(path: str) -> int:
    """Ask the kernel to start reading ``path`` (whole); its size, 0 if it cannot be opened or
    is not a regular file (opened without blocking: a log file swapped for a FIFO since the
    scan must not hang the build)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return 0
        os.posix_fadvise(fd, 0, st.st_size, os.POSIX_FADV_WILLNEED)
        return st.st_size
    except OSError:
        return 0
    finally:
        os.close(fd)


class ReadAhead:
    """Announces the files of jobs ``0..n-1`` in order from a background thread; :meth:`done`
    says job ``i`` is drawn (its bytes leave the window). A no-op where ``posix_fadvise`` is
    missing (macOS, Windows)."""

    def __init__(self, files: Callable[[int], list[str]], n: int, window: int = WINDOW_BYTES) -> None:
        self._files, self._n, self._window = files, n, window
        self._cond = threading.Condition()
        self._sizes: deque[tuple[int, int]] = deque()  # (job, bytes announced), in job order
        self._ahead = 0  # bytes announced for jobs not yet done
        self._next = 0  # the first job not yet done
        self._stop = False
        self._thread = None
        if n and hasattr(os, "posix_fadvise"):
            self._thread = threading.Thread(target=self._run, name="sitegen-readahead", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        for i in range(self._n):
            with self._cond:
                # at least one job is always announced, however large
                while not self._stop and i >= self._next and self._ahead >= self._window:
                    self._cond.wait()
                if self._stop:
                    return
                if i < self._next:  # drawn already: nothing left to read ahead for it
                    continue
            try:
                size = sum(advise(p) for p in self._files(i))
            except (OSError, RuntimeError, ValueError):  # e.g. a symlink loop: the read will report it
                size = 0
            with self._cond:
                if i >= self._next:
                    self._sizes.append((i, size))
                    self._ahead += size

    def done(self, i: int) -> None:
        """Job ``i`` and those before it are drawn."""
        with self._cond:
            self._next = max(self._next, i + 1)
            # jobs are announced in order, so the done ones are at the front: no scan of them all
            while self._sizes and self._sizes[0][0] <= i:
                self._ahead -= self._sizes.popleft()[1]
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
