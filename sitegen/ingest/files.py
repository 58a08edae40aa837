"""Reading an archive's files: every reader reads through these helpers, never a bare ``open``.

They refuse what must not be read: anything that is not a regular file (a FIFO would block the
build) and anything whose real path lies outside the build's roots (a symlink in a run folder
must not publish a file of the build machine; :mod:`sitegen.fileio` draws that boundary).
``roots`` is ``ReadOptions.roots``; :func:`problem` turns a refusal into the run's problem line.
"""

from __future__ import annotations

import io
import mmap
import os
from typing import Callable

import numpy as np

from sitegen.errors import Problem
from sitegen.fileio import OutsideRoots, open_regular


def problem(path: "str | os.PathLike[str]", exc: OSError) -> Problem:
    """The one problem line for a file that could not be read."""
    if isinstance(exc, OutsideRoots):
        return exc.problem()
    return Problem(os.fspath(path), None, "unreadable", f"cannot read: {exc.strerror or exc}")


def read_regular(path: "str | os.PathLike[str]", roots: tuple[str, ...]) -> bytes:
    """The bytes of a regular file inside ``roots``, or OSError (see :func:`sitegen.fileio.open_regular`)."""
    fd, _ = open_regular(path, roots)
    try:
        # readall() sizes its buffer from fstat: one allocation, no joined copy of a large file
        return io.FileIO(fd, "rb", closefd=False).readall()
    finally:
        os.close(fd)


def read_or_note(path: "str | os.PathLike[str]", roots: tuple[str, ...], problems: list[Problem]) -> bytes | None:
    """The bytes of a regular file inside ``roots``; None, with the reason added to ``problems``,
    when it cannot be read (the caller goes on with the run's other files)."""
    try:
        return read_regular(path, roots)
    except OSError as exc:
        problems.append(problem(path, exc))
        return None


def read_regular_array(path: "str | os.PathLike[str]", roots: tuple[str, ...]):
    """Like :func:`read_regular`, into a numpy uint8 array.

    Why: numpy asks for huge pages on large allocations, so filling its buffer costs a fraction
    of the page faults of a ``bytes`` of the same size.
    A file that grew since ``fstat`` is read to its end, like ``readall()`` does.
    """
    fd, size = open_regular(path, roots)
    try:
        return _read_all(fd, size)
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> np.ndarray:
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


def read_head(path: "str | os.PathLike[str]", n: int, roots: tuple[str, ...]) -> bytes:
    """The first ``n`` bytes of a regular file (a format told by its first line), or OSError."""
    fd, _ = open_regular(path, roots)
    try:
        return os.read(fd, n)
    finally:
        os.close(fd)


#: a file larger than this is mapped, not read (see :func:`read_or_map`)
MAP_BYTES = 256 << 20

Release = Callable[[int, int], None]


def read_or_map(path: "str | os.PathLike[str]", roots: tuple[str, ...]) -> tuple[np.ndarray, Release | None]:
    """A regular file's bytes as a uint8 array (see :func:`read_regular_array`); a file over
    :data:`MAP_BYTES` is memory-mapped instead and comes with ``release(lo, hi)``, which drops
    that byte range's pages from this process once they are checked. Why: a log holding a 2 GB
    text record is then decoded in bounded memory (its pages stay in the kernel's page cache)."""
    fd, size = open_regular(path, roots)
    try:
        if size <= MAP_BYTES:
            return _read_all(fd, size), None
        m = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)

    def release(lo: int, hi: int) -> None:
        lo -= lo % mmap.PAGESIZE
        hi = min(hi, size)
        if hi > lo:
            m.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    return np.frombuffer(m, np.uint8), release
