"""The file operations every stage shares: a content digest, an atomic write, and telling a
full or failing disk from other write errors."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

_CHUNK = 1 << 20
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


def sha256_file(path: str | os.PathLike[str], limit: int | None = None) -> tuple[str, int]:
    """SHA-256 and length of the first ``limit`` bytes of ``path`` (all of it when None)."""
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
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
