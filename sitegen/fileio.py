"""The file operations every stage shares: the archive boundary (what may be read at all), a
content digest, an atomic write, and telling a full or failing disk from other write errors.

The boundary: a build reads only files whose real path (symlinks resolved) lies inside one of
its *roots*, the archive and the folders ``[archive] follow_symlinks_into`` names. Every read of
an archive file goes through :func:`open_regular` (or :func:`check_inside`), never a bare
``open``: otherwise a symlink in a run folder publishes any file the build can read.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from sitegen.errors import Problem

_CHUNK = 1 << 20
#: where Linux shows the real path of an open descriptor (checked after the open: no race)
_FD_LINKS = "/proc/self/fd"
#: a full disk, an exhausted quota, a file over the size limit, a failing device: faults of the
#: machine, which end a build (exit 3), unlike a cache folder that is read-only by choice
DISK_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def disk_fault(exc: OSError) -> bool:
    """Whether ``exc`` says the disk is full or failing (see :data:`DISK_FAULTS`)."""
    return exc.errno in DISK_FAULTS


def named(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """``exc`` with ``path`` as its file name when it has none (a failed ``write`` names no
    file; the one line the command line prints should)."""
    if exc.filename is not None or exc.errno is None:
        return exc
    return type(exc)(exc.errno, exc.strerror, os.fspath(path))


class OutsideRoots(OSError):
    """A file or folder whose real path lies outside the build's roots; ``target``: that path."""

    def __init__(self, path: str | os.PathLike[str], target: str) -> None:
        super().__init__(0, f"resolves to {target}, outside the archive (see [archive] follow_symlinks_into); not read", os.fspath(path))
        self.target = target

    def problem(self) -> Problem:
        """The one problem line of the refusal: the link, and where it leads."""
        return Problem(str(self.filename), None, "outside-archive", self.strerror or "outside the archive; not read")


def real_roots(archive: str | os.PathLike[str], extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The real paths of the archive and of the configured extra roots, the archive first."""
    return tuple(dict.fromkeys(os.path.realpath(p) for p in (archive, *extra)))


def outside(real: str, roots: tuple[str, ...]) -> bool:
    """Whether the real path ``real`` lies outside every root (``roots`` empty: no limit)."""
    return bool(roots) and not any(Path(real).is_relative_to(r) for r in roots)


def check_inside(path: str | os.PathLike[str], roots: tuple[str, ...], fd: int | None = None) -> None:
    """Raise :class:`OutsideRoots` when ``path`` (the file open as ``fd``, when given: what was
    opened, even if the link changed since) lies outside ``roots``."""
    if not roots:
        return
    real = None
    if fd is not None:
        try:
            real = os.readlink(f"{_FD_LINKS}/{fd}")
        except OSError:
            pass
    if real is None or not real.startswith("/"):  # no /proc (or an anonymous file): resolve the name
        real = os.path.realpath(path)
    if outside(real, roots):
        raise OutsideRoots(path, real)


def open_regular(path: str | os.PathLike[str], roots: tuple[str, ...] = ()) -> tuple[int, int]:
    """``(fd, size)`` of a regular file inside ``roots``, or OSError: a FIFO, device or
    directory is refused without blocking (``O_NONBLOCK``), a file outside the roots with
    :class:`OutsideRoots`, and a file that vanished raises like any other."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        check_inside(path, roots, fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file", os.fspath(path))
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def sha256_file(path: str | os.PathLike[str], limit: int | None = None, roots: tuple[str, ...] = ()) -> tuple[str, int]:
    """SHA-256 and length of the first ``limit`` bytes of ``path`` (all of it when None); with
    ``roots``, only of a regular file inside them (:func:`open_regular`)."""
    h = hashlib.sha256()
    n = 0
    with open(open_regular(path, roots)[0] if roots else path, "rb") as f:
        while limit is None or n < limit:
            chunk = f.read(_CHUNK if limit is None else min(_CHUNK, limit - n))
            if not chunk:
                break
            h.update(chunk)
            n += len(chunk)
    return h.hexdigest(), n


def atomic_write(path: str | os.PathLike[str], data: bytes | list[bytes]) -> None:
    """Replace ``path`` with ``data`` (or its chunks) in one rename: a reader never sees a half
    file, and a crash leaves the old one. The folder must exist."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            for chunk in [data] if isinstance(data, bytes) else data:
                f.write(chunk)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise named(exc, path) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
