"""Input keys: what a run page, a comparison page or the whole site depends on, hashed. A key
that did not change means the live build's pages can be reused as they are."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from sitegen import __version__
from sitegen.listing import Folder, Listing, Stat, stat_of, walk
from sitegen.resources import templates_dir


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """The package's code and templates: any change draws every page again."""
    h = hashlib.sha256(__version__.encode())
    for root in (Path(__file__).resolve().parent.parent, templates_dir()):
        for p in sorted(root.rglob("*")):
            if p.is_file() and p.suffix in (".py", ".html", ".js", ".css", ".json"):
                h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def _folder_listing(
    directory: Path, skip: frozenset, limit: int = 5000, listing: Listing | None = None
) -> tuple[list, dict[str, Stat | int]]:
    """Names, sizes and mtimes below a run folder (notes, env files, artifacts, MLflow params),
    symlinked folders not entered, with each file's stat by its path. From the archive's
    ``listing`` when it holds the whole folder, else from a walk of its own."""
    top = os.fspath(directory)
    folders = _folders(listing, top, skip) if listing is not None else None
    if folders is None:
        own = walk(top, follow=False)
        folders = _folders(own, top, skip) or []
    out: list = []
    stats: dict[str, Stat | int] = {}
    for dirpath, folder in folders:
        for name, st in folder.files.items():
            full = os.path.join(dirpath, name)
            stats[full] = st
            if isinstance(st, int):
                continue
            out.append([full[len(top) :].lstrip(os.sep).replace(os.sep, "/"), st.size, st.mtime_ns, st.ctime_ns])
            if len(out) >= limit:
                return out, stats
    return out, stats


def _folders(listing: Listing, top: str, skip: frozenset = frozenset()) -> list[tuple[str, Folder]] | None:
    """The folders below ``top`` in the listing, depth first in name order, symlinked ones and
    those resolving into ``skip`` left out; None when the listing lacks one of them."""
    out = []
    todo = [top]
    while todo:
        path = todo.pop()
        folder = listing.get(path)
        if folder is None or not folder.listed:
            return None
        out.append((path, folder))
        subs = [d for d in folder.dirs if d not in folder.links]
        if skip:
            subs = [d for d in subs if Path(path, d).resolve() not in skip]
        todo.extend(os.path.join(path, d) for d in reversed(subs))
    return out


def common_key(job: Any) -> str:
    """The part of :func:`run_key` every run of a build shares: code, config, options, assets."""
    doc = [code_fingerprint(), _page_config(job.config), _plain(asdict(job.options)), job.urls]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


def run_key(job: Any, common: str | None = None, archive: Listing | None = None, readers: list[str] | None = None) -> str:
    """Everything a run's page depends on: code, config, options, its log files and its folder
    (``common``: :func:`common_key` of the build, computed once). Paths are absolute, so
    ``sitegen build logs`` and ``sitegen build /abs/logs`` share their unchanged pages. A log
    file's inode and ctime count too: a rewrite in place that keeps its size and mtime (rsync
    ``--inplace``, a restore) still changes its ctime, which ``os.utime`` cannot set back.
    ``archive``: the archive's walk, when the caller has it (no folder is listed twice);
    ``readers``: the plug-in readers of the run's formats (their packages and versions)."""
    listing, seen = _folder_listing(job.family[0].directory, job.nested_dirs, listing=archive)
    fam = []
    for s in job.family:
        files = []
        for f in s.files:
            path = os.fspath(f)
            st = seen.get(path) or _listed_stat(archive, path) or stat_of(path)
            if isinstance(st, int):
                files.append([os.path.abspath(f), -1, -1])
            else:
                files.append([os.path.abspath(f), st.size, st.mtime_ns, st.ino, st.ctime_ns])
        fam.append([s.name, s.format, os.path.abspath(s.directory), s.parent, files])
    doc = [common or common_key(job), sorted(str(d) for d in job.nested_dirs), fam, listing]
    if readers:
        doc.append(readers)
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


def _listed_stat(listing: Listing | None, path: str) -> Stat | int | None:
    """A file's stat from the listing of its folder, if there is one."""
    folder = listing.get(os.path.dirname(path)) if listing is not None else None
    return folder.files.get(os.path.basename(path)) if folder is not None and folder.listed else None


def group_key(slug: str, member_keys: list[str], config: Any) -> str:
    """A comparison page depends on the code, the config and exactly its runs' inputs."""
    doc = [code_fingerprint(), _config_digest(config), slug, member_keys]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


_DIGESTS: dict[int, tuple[Any, str]] = {}


def _config_digest(config: Any) -> str:
    """:func:`_page_config` hashed, once per config object (``asdict`` deep-copies the whole
    config, and a build asks for every comparison page)."""
    got = _DIGESTS.get(id(config))
    if got is None or got[0] is not config:  # (configs are frozen dataclasses)
        if len(_DIGESTS) > 64:
            _DIGESTS.clear()
        text = json.dumps(_page_config(config), sort_keys=True, default=str)
        got = _DIGESTS[id(config)] = (config, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())
    return got[1]


def _page_config(config: Any) -> Any:
    """The config as far as pages depend on it: where the work runs (executor) does not count."""
    doc = _plain(asdict(config))
    doc.pop("executor", None)
    return doc


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v
