"""The two file operations every stage shares: a content digest and an atomic write."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_CHUNK = 1 << 20


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
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
