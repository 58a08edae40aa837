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


def _folder_listing(directory: Path, skip: frozenset, limit: int = 5000, stats: dict | None = None) -> list:
    """Names, sizes and mtimes below a run folder (notes, env files, artifacts, MLflow params);
    each file's stat also goes into ``stats`` by its path. Plain strings, not Path objects: every
    build lists every run folder."""
    out: list = []
    top = os.fspath(directory)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if Path(dirpath, d).resolve() not in skip)
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            if stats is not None:
                stats[full] = st
            out.append([full[len(top) :].lstrip(os.sep).replace(os.sep, "/"), st.st_size, st.st_mtime_ns, st.st_ctime_ns])
            if len(out) >= limit:
                return out
    return out


def common_key(job: Any) -> str:
    """The part of :func:`run_key` every run of a build shares: code, config, options, assets."""
    doc = [code_fingerprint(), _page_config(job.config), _plain(asdict(job.options)), job.urls]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


def run_key(job: Any, common: str | None = None) -> str:
    """Everything a run's page depends on: code, config, options, its log files and its folder
    (``common``: :func:`common_key` of the build, computed once). Paths are absolute, so
    ``sitegen build logs`` and ``sitegen build /abs/logs`` share their unchanged pages. A log
    file's inode and ctime count too: a rewrite in place that keeps its size and mtime (rsync
    ``--inplace``, a restore) still changes its ctime, which ``os.utime`` cannot set back."""
    seen: dict[str, os.stat_result] = {}  # (the log files in the run's folder are stat-ed once, by the listing)
    listing = _folder_listing(job.family[0].directory, job.nested_dirs, stats=seen)
    fam = []
    for s in job.family:
        files = []
        for f in s.files:
            try:
                st = seen.get(os.fspath(f)) or os.stat(f)
                files.append([os.path.abspath(f), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns])
            except OSError:
                files.append([os.path.abspath(f), -1, -1])
        fam.append([s.name, s.format, os.path.abspath(s.directory), s.parent, files])
    doc = [common or common_key(job), sorted(str(d) for d in job.nested_dirs), fam, listing]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


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
