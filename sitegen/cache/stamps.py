"""Where the cache keeps each output's stamp (see :mod:`sitegen.pipeline.stamp`): one small JSON
file per output path; and the cache's lock file. Standard library only."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sitegen.fileio import atomic_write


def lock_file(cache: Path) -> Path:
    """The lock a build holds on the cache folder from start to end."""
    return Path(cache) / "lock"


def _slot(cache: Path, out: Path) -> Path:
    name = hashlib.sha256(str(Path(out).absolute()).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return Path(cache) / "stamps" / f"{name}.json"


def get(cache: Path, out: Path) -> dict | None:
    """The stamp record of ``out``, None when there is none or it cannot be read."""
    try:
        doc = json.loads(_slot(cache, out).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def put(cache: Path, out: Path, doc: dict) -> None:
    """Replace the stamp record of ``out`` (atomically; a cache that cannot be written is skipped)."""
    path = _slot(cache, out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(doc).encode("utf-8"))
    except OSError:
        pass
