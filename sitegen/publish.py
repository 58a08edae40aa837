"""The only stage that writes into the site folder.

The new site is written into a fresh sibling folder first and then swapped in, so a reader
never sees half a site and a failed build leaves the previous one untouched. Every path is
checked to stay inside the output folder; ``.gz`` twins are written beside large text files
(deterministically: gzip mtime 0) for nginx's ``gzip_static``.
"""
from __future__ import annotations

import gzip
import logging
import os
import shutil
from pathlib import Path, PurePosixPath

from .errors import SitegenError

log = logging.getLogger(__name__)
GZIP_SUFFIXES = (".html", ".js", ".css", ".json", ".svg", ".csv")
GZIP_MIN_BYTES = 1024


def safe_relpath(rel: str) -> PurePosixPath:
    p = PurePosixPath(rel)
    if p.is_absolute() or not p.parts or any(part in ("", ".", "..") for part in p.parts) or "\\" in rel or "\x00" in rel:
        raise SitegenError(f"refusing to write outside the site folder: {rel!r}")
    return p


def write_tree(files: dict[str, bytes], root: Path) -> None:
    """Write ``files`` below ``root`` (which must not exist yet), with .gz twins."""
    root.mkdir(parents=True)
    resolved = root.resolve()
    for rel in sorted(files):
        target = root / safe_relpath(rel)
        if not target.resolve().is_relative_to(resolved):
            raise SitegenError(f"refusing to write outside the site folder: {rel!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = files[rel]
        target.write_bytes(data)
        if rel.endswith(GZIP_SUFFIXES) and len(data) >= GZIP_MIN_BYTES:
            (target.parent / (target.name + ".gz")).write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def publish(files: dict[str, bytes], out: Path) -> None:
    """Replace ``out`` with a site made of ``files``, switching only once everything is written."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.new-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    try:
        write_tree(files, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.is_symlink() or out.is_file():
        out.unlink()
    elif out.exists():
        os.rename(out, old)
    os.rename(staging, out)
    shutil.rmtree(old, ignore_errors=True)
