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
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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


def read_regular_array(path: "str | os.PathLike[str]", roots: tuple[str, ...], empty: Callable[[int, Any], np.ndarray] = np.empty):
    """Like :func:`read_regular`, into a numpy uint8 array made by ``empty(size, np.uint8)``.

    Why: numpy asks for huge pages on large allocations, so filling its buffer costs a fraction
    of the page faults of a ``bytes`` of the same size.
    A file that grew since ``fstat`` is read to its end, like ``readall()`` does.
    """
    fd, size = open_regular(path, roots)
    try:
        return _read_all(fd, size, empty)
    finally:
        os.close(fd)


def _read_all(fd: int, size: int, empty: Callable[[int, Any], np.ndarray] = np.empty) -> np.ndarray:
    f = io.FileIO(fd, "rb", closefd=False)
    buf = empty(size, np.uint8)
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


@dataclass
class ZipMembers:
    """What :func:`read_zip_members` found: every member's name, the wanted members' bytes, and
    where a damaged archive stopped making sense (None: its central directory was read)."""

    size: int
    names: list[str] = field(default_factory=list)
    data: dict[str, bytes] = field(default_factory=dict)
    damaged_at: int | None = None
    reason: str = ""
    cut_short: bool = False  # the salvage stopped inside a member, not at the central directory

    def problem(self, path: "str | os.PathLike[str]") -> Problem | None:
        """The one problem line of a damaged archive (None when it was read whole)."""
        if self.damaged_at is None:
            return None
        if self.cut_short:
            return Problem(os.fspath(path), self.damaged_at, "truncated", f"zip cut short ({self.reason}); the members before it read")
        return Problem(
            os.fspath(path), self.damaged_at, "bad-record", f"zip damaged ({self.reason}); every member read from its local header"
        )


def read_zip_members(path: "str | os.PathLike[str]", roots: tuple[str, ...], want: Callable[[str], bool], max_bytes: int) -> ZipMembers:
    """The members of a zip archive inside ``roots`` whose names ``want`` accepts (each at most
    ``max_bytes``, larger ones left out), or OSError when the file cannot be opened. An archive
    cut short or damaged (no central directory) is read member by member from its local headers:
    every member that is whole is kept, and a stored or deflated member cut short keeps its
    first bytes (a JSON-lines member then keeps its complete lines)."""
    fd, size = open_regular(path, roots)
    with open(fd, "rb") as f:
        out = ZipMembers(size)
        try:
            with zipfile.ZipFile(f) as zf:
                for info in zf.infolist():
                    out.names.append(info.filename)
                    if want(info.filename) and info.file_size <= max_bytes and not info.is_dir():
                        out.data[info.filename] = zf.read(info)
            return out
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError, zlib.error) as exc:
            out.names.clear()
            out.data.clear()
            out.damaged_at, out.reason = 0, str(exc) or type(exc).__name__
        f.seek(0)
        _salvage_zip(f.read(), want, max_bytes, out)
    return out


_LOCAL = struct.Struct("<4sHHHHHIIIHH")


def _salvage_zip(data: bytes, want: Callable[[str], bool], max_bytes: int, out: ZipMembers) -> None:
    """Members from local file headers in order, until one is cut short or not a header."""
    at = 0
    while at + _LOCAL.size <= len(data) and data[at : at + 4] == b"PK\x03\x04":
        _, _, flags, method, _, _, _, csize, usize, nlen, xlen = _LOCAL.unpack_from(data, at)
        start = at + _LOCAL.size + nlen + xlen
        name = data[at + _LOCAL.size : at + _LOCAL.size + nlen].decode("utf-8" if flags & 0x800 else "cp437", "replace")
        if start > len(data) or method not in (0, 8) or (flags & 0x8 and method == 0):
            out.cut_short = True
            break
        out.names.append(name)
        whole = not flags & 0x8 and start + csize <= len(data)
        body = data[start : start + csize] if not flags & 0x8 else data[start:]
        wanted = want(name) and usize <= max_bytes
        if method == 0 and wanted:
            out.data[name] = body
        elif method == 8 and (wanted or flags & 0x8):  # (a member with a data descriptor: its end is where deflate ends)
            d = zlib.decompressobj(-15)
            try:
                text = d.decompress(body, max_bytes) + (d.flush() if whole else b"")
            except zlib.error:
                text = b""
            if wanted:
                out.data[name] = text
            if flags & 0x8:
                whole = d.eof
                csize = len(body) - len(d.unused_data)
        if not whole:
            out.damaged_at, out.cut_short = at, True
            return
        at = start + csize + (16 if flags & 0x8 and data[start + csize : start + csize + 4] == b"PK\x07\x08" else 12 if flags & 0x8 else 0)
    out.damaged_at = at
    if data[at : at + 4] not in (b"PK\x01\x02", b"PK\x05\x06") or not 0 <= data.rfind(b"PK\x05\x06") <= len(data) - 22:
        out.cut_short = True  # (no end-of-archive record: the file ends early)
