"""Reading a log file whole, refusing anything that is not a regular file."""

from __future__ import annotations

import io
import os
import stat

import numpy as np


def _open_regular(path: "str | os.PathLike[str]") -> tuple[int, int]:
    """``(fd, size)`` of a regular file, or OSError: a FIFO, device or directory named like a log
    file is refused without blocking (``O_NONBLOCK``), and a file that vanished raises like any other."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_regular(path: "str | os.PathLike[str]") -> bytes:
    """The bytes of a regular file, or OSError (see :func:`_open_regular`)."""
    fd, _ = _open_regular(path)
    try:
        # readall() sizes its buffer from fstat: one allocation, no joined copy of a large file
        return io.FileIO(fd, "rb", closefd=False).readall()
    finally:
        os.close(fd)


def read_regular_array(path: "str | os.PathLike[str]"):
    """Like :func:`read_regular`, into a numpy uint8 array.

    Why: numpy asks for huge pages on large allocations, so filling its buffer costs a fraction
    of the page faults of a ``bytes`` of the same size.
    A file that grew since ``fstat`` is read to its end, like ``readall()`` does.
    """
    fd, size = _open_regular(path)
    try:
        f = io.FileIO(fd, "rb", closefd=False)
        buf = np.empty(size, np.uint8)
        view, n = buf.data, 0  # the array's memoryview (numpy's stubs give ndarray no __buffer__ before 3.12)
        while n < size:
            got = f.readinto(view[n:])
            if not got:
                return buf[:n]  # it shrank
            n += got
        rest = f.readall()
        return np.concatenate([buf, np.frombuffer(rest, np.uint8)]) if rest else buf
    finally:
        os.close(fd)


def read_head(path: "str | os.PathLike[str]", n: int) -> bytes:
    """The first ``n`` bytes of a regular file (a format told by its first line), or OSError."""
    fd, _ = _open_regular(path)
    try:
        return os.read(fd, n)
    finally:
        os.close(fd)
