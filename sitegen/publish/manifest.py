"""``SITE/manifest.json``: what a site is made of, and ``sitegen verify`` checking it.

The manifest lists every file of the site (pages, data scripts, downloads, media, assets and their ``.gz``
twins) with its SHA-256 and size, and every source log file that was read with its size, SHA-256
and the byte range that was decoded (``[0, decoded_bytes]``; a tail past it was not yet complete).
It is deterministic: sorted keys, no timestamp unless ``SOURCE_DATE_EPOCH`` is given, so two
builds of the same archive are byte-identical.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterable

from sitegen import __version__
from sitegen.errors import SitegenError
from sitegen.fileio import sha256_file
from sitegen.model import SourceFile
from sitegen.publish.live import read_manifest

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
FORMAT = 1
_CHUNK = 1 << 20


def _archive_rel(path: Path, archive: Path, resolved: str | None = None) -> str:
    """``path`` relative to the archive; ``resolved``: the archive's resolved path plus "/"
    (paths below it need no system call)."""
    text = os.path.abspath(path)  # (no system call: a relative path from an earlier build's summary)
    if resolved is not None and text.startswith(resolved):
        return text[len(resolved) :]  # (abspath's text is normalized: this is its relative path)
    try:
        return Path(path).relative_to(archive).as_posix()
    except ValueError:
        return Path(os.path.relpath(Path(path).resolve(), Path(archive).resolve())).as_posix()


def make(
    files: dict[str, bytes],
    sources: Iterable[SourceFile],
    *,
    archive: Path,
    source_date_epoch: int | None = None,
    hasher: Callable[[Path, int], tuple[str, int]] = sha256_file,
) -> bytes:
    """The manifest of a site made of ``files`` (with their .gz twins) read from ``sources``.

    Source files are hashed over the ``size`` bytes the reader saw, so a log that is still being
    appended to is recorded as it was read.
    """
    return make_from_hashes(
        {rel: (hashlib.sha256(data).hexdigest(), len(data)) for rel, data in files.items()},
        sources,
        archive=archive,
        source_date_epoch=source_date_epoch,
        hasher=hasher,
    )


def make_from_hashes(
    hashes: dict[str, tuple[str, int]],
    sources: Iterable[SourceFile],
    *,
    archive: Path,
    source_date_epoch: int | None = None,
    hasher: Callable[[Path, int], tuple[str, int]] = sha256_file,
    runs: dict[str, str] | None = None,
    site_key: str | None = None,
) -> bytes:
    """The manifest from ``{path: (sha256, size)}`` of every file written; ``runs`` records each
    run page's input key so the next build can reuse unchanged pages, ``site_key`` the key of all
    the inputs, so the next build of the same inputs can keep this one."""
    site = {rel: {"sha256": digest, "size": size} for rel, (digest, size) in hashes.items() if rel != MANIFEST}
    logs: dict[str, Any] = {}
    resolved = str(Path(archive).resolve()).rstrip("/") + "/"
    for sf in sources:
        rel = _archive_rel(sf.path, archive, resolved)
        if rel in logs:
            continue
        try:
            digest, n = hasher(sf.path, sf.size)
        except OSError as exc:
            log.warning("%s: cannot hash for the manifest: %s", sf.path, exc.strerror or exc)
            digest, n = "", 0
        logs[rel] = {"sha256": digest, "size": n, "decoded": [0, int(sf.decoded_bytes)]}
    doc: dict[str, Any] = {"format": FORMAT, "generator": "sitegen", "version": __version__, "files": site, "sources": logs}
    if runs:
        doc["runs"] = dict(sorted(runs.items()))
    if site_key:
        doc["site"] = site_key
    if source_date_epoch is not None:
        doc["source_date_epoch"] = int(source_date_epoch)
        doc["built"] = dt.datetime.fromtimestamp(int(source_date_epoch), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return dump(doc)


def dump(doc: dict[str, Any]) -> bytes:
    """The manifest's bytes: sorted keys, ASCII, and each file on a line of its own (readable,
    and a diff of two builds shows their files). The C encoder and a line break after every
    object that ends a member (``},"`` never occurs inside a JSON string, whose quotes are
    escaped): ``indent`` would run the pure-Python encoder."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return (text.replace('},"', '},\n"') + "\n").encode("ascii")


def read_live(build: Path) -> dict[str, Any]:
    """A build's manifest as parsed JSON (once per process, see :func:`sitegen.publish.live.read_manifest`).
    Raises OSError/ValueError."""
    return read_manifest(build)


def load(site: Path) -> dict[str, Any]:
    path = Path(site) / MANIFEST
    try:
        doc = json.loads(path.read_bytes())
    except OSError as exc:
        raise SitegenError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SitegenError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict) or doc.get("format") != FORMAT:
        raise SitegenError(f"{path}: not a sitegen manifest (format {FORMAT})")
    return doc


def _site_files(root: Path) -> set[str]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath).relative_to(root)
        for name in filenames:
            found.add((base / name).as_posix())
    return found


def verify(site: Path, *, archive: Path | None = None) -> list[str]:
    """Re-check a site (and optionally its archive) against its manifest; one line per bad file."""
    site = Path(site)
    doc = load(site)
    root = site.resolve()
    bad: list[str] = []
    expected: dict[str, dict] = doc["files"]
    present = _site_files(root)
    for rel in sorted(expected):
        entry = expected[rel]
        path = root / rel
        if rel not in present:
            bad.append(f"missing: {rel}")
            continue
        digest, n = sha256_file(path)
        if n != entry.get("size"):
            bad.append(f"modified: {rel} (size {n}, manifest says {entry.get('size')})")
        elif digest != entry.get("sha256"):
            bad.append(f"modified: {rel} (sha256 differs)")
    for rel in sorted(present - set(expected) - {MANIFEST, MANIFEST + ".gz"}):
        bad.append(f"unexpected: {rel}")
    if MANIFEST + ".gz" in present:
        try:
            same = gzip.decompress((root / (MANIFEST + ".gz")).read_bytes()) == (root / MANIFEST).read_bytes()
        except (OSError, EOFError, gzip.BadGzipFile):
            same = False
        if not same:
            bad.append(f"modified: {MANIFEST}.gz (differs from {MANIFEST})")
    if archive is not None:
        archive = Path(archive)
        if not archive.is_dir():
            raise SitegenError(f"{archive}: not a directory")
        for rel, entry in sorted(doc.get("sources", {}).items()):
            path = archive / rel
            try:
                size = path.stat().st_size
                digest, _ = sha256_file(path, entry.get("size"))
            except OSError:
                bad.append(f"source missing: {rel}")
                continue
            if size != entry.get("size"):
                bad.append(f"source modified: {rel} (size {size}, manifest says {entry.get('size')})")
            elif digest != entry.get("sha256"):
                bad.append(f"source modified: {rel} (sha256 differs)")
    return bad
