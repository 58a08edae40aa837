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
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

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


def pieces_from_hashes(
    hashes: dict[str, tuple[str, int]],
    sources: Iterable[SourceFile],
    *,
    archive: Path,
    source_date_epoch: int | None = None,
    hasher: Callable[[Path, int], tuple[str, int]] = sha256_file,
    runs: dict[str, str] | None = None,
    site_key: str | None = None,
) -> Iterator[bytes]:
    """The manifest from ``{path: (sha256, size)}`` of every file written, as pieces of about a
    megabyte for a writer that never holds the whole (~90 MB at 100,000 runs). A log file is
    recorded over the ``size`` bytes the reader saw (a log still being appended to, as it was
    read), by the digest its :class:`SourceFile` carries, else by ``hasher``. ``runs`` records
    each run page's input key so the next build can reuse unchanged pages, ``site_key`` the key of
    all the inputs, so the next build of the same inputs can keep this one."""
    logs: dict[str, tuple[str, int, int]] = {}
    resolved = str(Path(archive).resolve()).rstrip("/") + "/"
    for sf in sources:
        rel = _archive_rel(sf.path, archive, resolved)
        if rel in logs:
            continue
        try:
            digest, n = (sf.sha256, sf.size) if sf.sha256 else hasher(sf.path, sf.size)
        except OSError as exc:
            log.warning("%s: cannot hash for the manifest: %s", sf.path, exc.strerror or exc)
            digest, n = "", 0
        logs[rel] = (digest, n, int(sf.decoded_bytes))
    head: dict[str, Any] = {"format": FORMAT, "generator": "sitegen", "version": __version__}
    if runs:
        head["runs"] = runs
    if site_key:
        head["site"] = site_key
    if source_date_epoch is not None:
        head["source_date_epoch"] = int(source_date_epoch)
        head["built"] = dt.datetime.fromtimestamp(int(source_date_epoch), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return entry_pieces(head, hashes, logs)


def dump(doc: dict[str, Any]) -> bytearray:
    """The manifest's bytes: sorted keys, ASCII, the C encoder, and a line of its own for each
    entry of a member whose entries are objects (``files``, ``sources``) and for the member
    after such one: readable, and a diff of two builds shows their files."""
    members: dict[str, bytes | Iterator[bytes]] = {}
    for key, value in doc.items():
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            members[key] = (_quoted(k).encode("ascii") + b":" + _canonical(v) for k, v in sorted(value.items()))
        else:
            members[key] = _canonical(value)
    return bytearray().join(_pieces(members))  # (the buffer they were joined in: a copy into bytes holds it twice)


def entry_pieces(head: dict[str, Any], files: dict[str, tuple[str, int]], sources: dict[str, tuple[str, int, int]]) -> Iterator[bytes]:
    """What :func:`dump` makes of ``head`` with the members ``files`` (path: sha256, size; the
    manifest itself left out) and ``sources`` (path: sha256, size, bytes decoded), written entry
    by entry: a manifest of 100,000 runs has half a million entries, and as one object of
    objects, then its text, then that text with line breaks, it was the largest thing a build held.
    Given in pieces of about :data:`PIECE_BYTES`."""
    site = (
        f'{_quoted(rel)}:{{"sha256":{_quoted(files[rel][0])},"size":{int(files[rel][1])}}}'.encode("ascii")
        for rel in sorted(files)
        if rel != MANIFEST
    )
    logs = (
        f'{_quoted(rel)}:{{"decoded":[0,{int(k)}],"sha256":{_quoted(d)},"size":{int(n)}}}'.encode("ascii")
        for rel, (d, n, k) in sorted(sources.items())
    )
    return _pieces({**{key: _canonical(v) for key, v in head.items()}, "files": site, "sources": logs})


PIECE_BYTES = 1 << 20


def _pieces(members: dict[str, bytes | Iterator[bytes]]) -> Iterator[bytes]:
    """An object of ``members`` in key order: a member's JSON text, or its entries (``"name":value``)
    each on a line of its own; after an object, the next member on a line of its own too. Given
    as pieces of about :data:`PIECE_BYTES`."""
    out = bytearray(b"{")
    after_object = first = True
    for key in sorted(members):
        value = members[key]
        if not first:
            out += b",\n" if after_object else b","
        first = False
        out += _quoted(key).encode("ascii") + b":"
        if isinstance(value, bytes):
            out += value
            after_object = value.endswith(b"}")
            continue
        out += b"{"
        for i, entry in enumerate(value):
            if i:
                out += b",\n"
            out += entry
            if len(out) >= PIECE_BYTES:
                yield bytes(out)
                out.clear()
        out += b"}"
        after_object = True
    out += b"}\n"
    yield bytes(out)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


_quoted = json.encoder.encode_basestring_ascii  # (a str as json.dumps writes it with ensure_ascii)


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
