"""Archives and decode caches addressed by URL (``s3://bucket/logs``, ``gs://...``, ``file://...``).

The build never reads object storage directly: :func:`mirror_archive` brings the archive into a
local folder first, downloading only objects whose size or ETag (or modification time, where a
store has no ETag) changed since the last mirror and deleting the ones that vanished; then the
build runs on the mirror, so run names, pages and the manifest are exactly those of a build from
disk. The bucket prefix is listed with **one** recursive, paginated listing (``fs.find``), never
one request per object.

A decode cache on a URL is pulled into a local folder at the start of a build
(:func:`pull_cache`) and its changed entries pushed back at the end (:func:`push_cache`), so the
next build — on this machine or another one that mirrors to the same local paths — decodes only
what is new. Cache entries are keyed by the local path and modification time of each log file;
the mirror gives every file its object's ``LastModified`` time, so a fresh mirror at the same
path hits the same entries.

Credentials come from the usual environment of each filesystem (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_PROFILE`` / ``AWS_ENDPOINT_URL`` for S3,
``GOOGLE_APPLICATION_CREDENTIALS`` for GCS, ...), never from ``sitegen.toml``.
``storage_options`` (Python callers only) go to the fsspec filesystem as keyword arguments.

One build per cache URL at a time: a push is not atomic across objects (each cache entry is
one object, so a reader sees an entry whole or not at all; a half-pushed cache only lacks some).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from sitegen.errors import UsageError
from sitegen.fileio import atomic_write
from sitegen.resources import default_cache_dir

log = logging.getLogger(__name__)

INDEX = "sitegen-sync.json"  # beside the mirror tree, or at the root of a pulled cache
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_TRANSIENT = re.compile(r"\.(tmp|old)\d+$")  # Store's temporary names (a crashed build leaves them)
#: the cache folder's lock file (``sitegen.cache.stamps.lock_file``): each machine's own, never
#: synced (a pulled copy renamed over it would split the lock in two)
CACHE_LOCK = "lock"
#: the run tables (``sitegen.cache.table``): each machine's own too, never synced: rewritten whole
#: by every build (~150 MB at 100,000 runs), they only speed up reading the summaries (synced)
CACHE_TABLES = "tables"


def is_url(s: Any) -> bool:
    """``True`` for ``scheme://...`` strings (``s3://``, ``gs://``, ``file://``, ...).

    Note ``Path("s3://b/k")`` is ``s3:/b/k``: keep URLs as strings.
    """
    return isinstance(s, str) and bool(_URL.match(s))


def file_url_path(url: str) -> Path | None:
    """The local path of a ``file://`` URL (no mirror needed), else None."""
    if url.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(url).path))
    return None


def work_dir(url: str, kind: str, base: Path | None = None) -> Path:
    """A stable local folder for ``url`` (``kind``: "mirror" or "cache"), under ``base``
    (default: ``<default cache dir>/remote``). Stable paths matter: cache entries are keyed by path."""
    if base is None:
        base = default_cache_dir() / "remote"
    return Path(base) / kind / hashlib.sha256(url.rstrip("/").encode("utf-8")).hexdigest()[:16]


@dataclass
class SyncReport:
    listed: int = 0
    downloaded: list[str] = field(default_factory=list)
    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def _fs(url: str, storage_options: dict | None):
    try:
        import fsspec
    except ImportError:  # pragma: no cover - depends on the environment
        raise UsageError(f'{url}: reading URLs needs fsspec (and s3fs/gcsfs): pip install "sitegen[dask]"') from None
    try:
        # a fresh instance: a cached one would answer listings from its own stale cache
        fs, root = fsspec.core.url_to_fs(url, skip_instance_cache=True, use_listings_cache=False, **(storage_options or {}))
    except TypeError:  # filesystems without a listings cache
        fs, root = fsspec.core.url_to_fs(url, skip_instance_cache=True, **(storage_options or {}))
    except (ImportError, ValueError) as exc:
        raise UsageError(f"{url}: {exc}") from None
    return fs, root.rstrip("/")


def _safe_rel(rel: str) -> str | None:
    """An object key below the prefix as a relative path, or None when it cannot be one."""
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") for p in parts) or "\\" in rel or "\0" in rel:
        return None
    return rel


def _listing(fs, root: str) -> dict[str, dict]:
    """Every object below ``root`` in one recursive, paginated listing: rel path -> info."""
    out: dict[str, dict] = {}
    try:
        found = fs.find(root, detail=True, withdirs=False)
    except FileNotFoundError:  # no such bucket
        return out
    prefix = root + "/" if root else ""
    for key, info in found.items():
        key = key.rstrip("/") if info.get("type") != "directory" else key
        if info.get("type") == "directory" or not key.startswith(prefix) or key.endswith("/"):
            continue
        rel = _safe_rel(key[len(prefix) :])
        if rel is None:
            log.warning("%s: object key cannot be a local path; skipped", key)
            continue
        out[rel] = info
    return out


def _exists(fs, root: str) -> bool:
    try:
        return bool(fs.exists(root))
    except (OSError, ValueError):
        return False


def _tag(info: dict) -> str:
    """What changes when an object changes: its ETag, else its modification time."""
    for k in ("ETag", "etag", "md5Hash", "LastModified", "mtime", "updated", "last_modified"):
        v = info.get(k)
        if v not in (None, ""):
            return f"{k}={v}"
    return ""


def _mtime_ns(info: dict) -> int | None:
    """The object's modification time in ns (None when the store gives none)."""
    for k in ("LastModified", "mtime", "updated", "last_modified", "created"):
        v = info.get(k)
        if v is None:
            continue
        if isinstance(v, dt.datetime):
            return int(v.timestamp()) * 1_000_000_000 + v.microsecond * 1000
        if isinstance(v, (int, float)):
            return int(round(v * 1e9))
        if isinstance(v, str):
            try:
                d = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
            except ValueError:
                continue
            return int(d.timestamp()) * 1_000_000_000 + d.microsecond * 1000
    return None


def _read_index(path: Path, url: str) -> dict[str, dict]:
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("url") != url or not isinstance(doc.get("files"), dict):
        return {}
    return doc["files"]


def _write_index(path: Path, url: str, files: dict[str, dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"url": url, "files": files}, sort_keys=True, indent=0).encode("utf-8"))


def _local_sig(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _download(fs, root: str, rels: list[str], dest: Path, incoming: Path, listing: dict[str, dict], *, set_mtime: bool) -> dict[str, dict]:
    """Fetch ``rels`` (one batched, concurrent ``get``) into ``incoming``, then move each into ``dest``."""
    if not rels:
        return {}
    shutil.rmtree(incoming, ignore_errors=True)
    incoming.mkdir(parents=True)
    remote = [f"{root}/{r}" for r in rels]
    tmp = [str(incoming / f"{i:08d}") for i in range(len(rels))]
    fs.get(remote, tmp)
    entries: dict[str, dict] = {}
    for rel, t in zip(rels, tmp):
        target = dest / PurePosixPath(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            shutil.rmtree(target)
        ns = _mtime_ns(listing[rel]) if set_mtime else None
        if ns is not None:
            os.utime(t, ns=(ns, ns))
        os.replace(t, target)
        size, mtime = _local_sig(target) or (0, 0)
        entries[rel] = {"tag": _tag(listing[rel]), "size": size, "mtime_ns": mtime}
    shutil.rmtree(incoming, ignore_errors=True)
    return entries


def _prune_empty_dirs(top: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(top, topdown=False):
        if Path(dirpath) != top and not dirnames and not filenames:
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def sync_archive(url: str, local_dir: Path, *, storage_options: dict | None = None) -> tuple[Path, SyncReport]:
    """:func:`mirror_archive`, also saying what it listed, downloaded and deleted."""
    local_dir = Path(local_dir)
    tree, index_path = local_dir / "tree", local_dir / INDEX
    fs, root = _fs(url, storage_options)
    listing = _listing(fs, root)
    if not listing and not _exists(fs, root):
        raise UsageError(f"{url}: no such archive (nothing listed)")
    known = _read_index(index_path, url)
    report = SyncReport(listed=len(listing))
    keep: dict[str, dict] = {}
    fetch: list[str] = []
    for rel, info in sorted(listing.items()):
        old = known.get(rel)
        sig = _local_sig(tree / PurePosixPath(rel))
        if (
            old is not None
            and old.get("tag") == _tag(info)
            and old.get("size") == info.get("size")
            and sig == (old.get("size"), old.get("mtime_ns"))
        ):
            keep[rel] = old
        else:
            fetch.append(rel)
    # vanished objects, and anything else in the tree (left by hand or by a crash), go
    if tree.exists():
        for dirpath, _dirnames, filenames in os.walk(tree):
            for name in filenames:
                path = Path(dirpath) / name
                rel = path.relative_to(tree).as_posix()
                if rel not in listing:
                    path.unlink()
                    report.deleted.append(rel)
        _prune_empty_dirs(tree)
    tree.mkdir(parents=True, exist_ok=True)
    # the index first loses what is about to change, so a crash mid-download is caught next time
    _write_index(index_path, url, keep)
    keep.update(_download(fs, root, fetch, tree, local_dir / "incoming", listing, set_mtime=True))
    report.downloaded = fetch
    _write_index(index_path, url, keep)
    log.info("%s: %d objects, %d downloaded, %d deleted", url, len(listing), len(fetch), len(report.deleted))
    return tree, report


def mirror_archive(url: str, local_dir: Path, *, storage_options: dict | None = None) -> Path:
    """Mirror the archive at ``url`` into ``local_dir`` and return the folder to build from
    (``local_dir/tree``); only changed objects are downloaded, vanished ones are deleted.
    File modification times are the objects' ``LastModified`` times."""
    return sync_archive(url, local_dir, storage_options=storage_options)[0]


def pull_cache(url: str, local_dir: Path, *, storage_options: dict | None = None) -> SyncReport:
    """Bring the decode cache at ``url`` into ``local_dir`` (the build's ``cache=``): objects
    new or changed since the last pull/push are downloaded; local entries are kept."""
    local_dir = Path(local_dir)
    index_path = local_dir / INDEX
    fs, root = _fs(url, storage_options)
    listing = {rel: info for rel, info in _listing(fs, root).items() if rel != CACHE_LOCK and not rel.startswith(CACHE_TABLES + "/")}
    known = _read_index(index_path, url)
    report = SyncReport(listed=len(listing))
    fetch = []
    for rel, info in sorted(listing.items()):
        old = known.get(rel)
        if (
            old is None
            or old.get("tag") != _tag(info)
            or _local_sig(local_dir / PurePosixPath(rel)) != (old.get("size"), old.get("mtime_ns"))
        ):
            fetch.append(rel)
    known = {r: e for r, e in known.items() if r in listing and r not in fetch}
    _write_index(index_path, url, known)
    known.update(_download(fs, root, fetch, local_dir, local_dir.with_name(local_dir.name + ".incoming"), listing, set_mtime=False))
    _write_index(index_path, url, known)
    report.downloaded = fetch
    log.info("%s: cache pulled, %d of %d objects downloaded", url, len(fetch), len(listing))
    return report


def _local_files(local_dir: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(local_dir):
        dirnames[:] = [d for d in dirnames if not _TRANSIENT.search(d) and not (dirpath == str(local_dir) and d == CACHE_TABLES)]
        for name in filenames:
            if _TRANSIENT.search(name) or (dirpath == str(local_dir) and (name.startswith(INDEX) or name == CACHE_LOCK)):
                continue
            path = Path(dirpath) / name
            sig = _local_sig(path)
            if sig is not None:
                out[path.relative_to(local_dir).as_posix()] = sig
    return out


def push_cache(local_dir: Path, url: str, *, storage_options: dict | None = None) -> SyncReport:
    """Upload the cache entries that changed since the last pull/push, delete the remote
    objects of entries that were removed locally, then record the remote state (one listing)."""
    local_dir = Path(local_dir)
    index_path = local_dir / INDEX
    fs, root = _fs(url, storage_options)
    known = _read_index(index_path, url)
    files = _local_files(local_dir)
    report = SyncReport()
    send = sorted(r for r, sig in files.items() if (known.get(r, {}).get("size"), known.get(r, {}).get("mtime_ns")) != sig)
    gone = sorted(r for r in known if r not in files)
    if not send and not gone:
        log.info("%s: cache unchanged, nothing pushed", url)
        return report
    if send:  # one batched, concurrent put
        fs.put([str(local_dir / PurePosixPath(r)) for r in send], [f"{root}/{r}" for r in send])
    if gone:
        fs.rm([f"{root}/{r}" for r in gone])
    report.uploaded, report.deleted = send, gone
    listing = _listing(fs, root)
    report.listed = len(listing)
    _write_index(
        index_path, url, {r: {"tag": _tag(listing[r]), "size": files[r][0], "mtime_ns": files[r][1]} for r in files if r in listing}
    )
    log.info("%s: cache pushed, %d uploaded, %d deleted", url, len(send), len(gone))
    return report


@dataclass
class Localized:
    """What :func:`localize` made of a build's ``archive`` and ``cache`` arguments."""

    archive: Path  # the folder to scan (the mirror for a URL)
    cache: Path | None  # the cache folder to use (the pulled copy for a URL); None: unchanged
    cache_url: str | None = None
    storage_options: dict | None = None

    def push(self) -> SyncReport | None:
        """After a successful build: upload the cache entries that changed (URL caches only)."""
        if self.cache_url is None or self.cache is None:
            return None
        return push_cache(self.cache, self.cache_url, storage_options=self.storage_options)


def local_cache_dir(cache: str | Path | None) -> Path | None:
    """The folder :func:`localize` makes the build use for ``cache`` (for a URL, the pulled copy),
    known before anything is pulled: the build locks it first."""
    if cache is None or not is_url(cache):
        return None if cache is None else Path(cache)
    return file_url_path(str(cache)) or work_dir(str(cache), "cache")


def localize(
    archive: str | Path,
    cache: str | Path | None,
    *,
    use_cache: bool = True,
    base: Path | None = None,
    storage_options: dict | None = None,
) -> Localized:
    """The local folders a build works on: a URL archive is mirrored (``file://`` is used in
    place), a URL cache is pulled; plain paths pass through unchanged. Call ``.push()`` once
    the build has succeeded. ``base``: where mirrors and pulled caches live (default
    ``<default cache dir>/remote``; keep it stable: cache entries are keyed by path)."""
    if is_url(archive):
        url = str(archive)
        local = file_url_path(url) or mirror_archive(url, work_dir(url, "mirror", base), storage_options=storage_options)
    else:
        local = Path(archive)
    if use_cache and is_url(cache):
        url = str(cache)
        folder = file_url_path(url)
        if folder is not None:
            return Localized(local, folder)
        folder = work_dir(url, "cache", base)
        pull_cache(url, folder, storage_options=storage_options)
        return Localized(local, folder, url, storage_options)
    return Localized(local, Path(cache) if cache is not None else None)
