"""The plan of a build: what the archive holds, each run's input key, what the live build already
has, and so which runs and pages are reused and which are drawn. Made once, before anything is
written; the build's stages fill in its results."""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from sitegen.cache import keys as cache_keys
from sitegen.cache.store import Store
from sitegen.config import Config
from sitegen.errors import Problem
from sitegen.fileio import real_roots
from sitegen.ingest import PLUGIN_ORIGINS
from sitegen.ingest.scan import scan
from sitegen.listing import Listing, walk
from sitegen.model import ReadOptions, RunSource, slug
from sitegen.pages.assets import Assets, assets
from sitegen.pipeline.jobs import RunJob, RunResult
from sitegen.prepare.assemble import families
from sitegen.publish.live import live_build, read_changes, read_manifest


@dataclass(eq=False, repr=False)
class Plan:
    """One build: its inputs, what to reuse and what to draw, and the results as they come."""

    archive: Path
    out: Path
    config: Config
    store: Store  # the decode cache (``store.root`` None: no cache)
    source_date_epoch: int | None
    problems: list[Problem]  # the scan's; the runs' own come with their results
    jobs: list[RunJob]  # one per run family, in name order
    keys: list[str]  # each job's input key
    slugs: list[str]  # each job's folder under runs/
    assets: Assets
    site_key: str  # everything the whole site depends on
    previous: dict[str, str]  # the live build's input keys: run slug, "compare/<slug>" or "trends/<slug>" -> key
    live_changes: dict | None = None  # the live build's changes.json: its runs' states, its feed
    results: list[RunResult | None] = field(default_factory=list)  # by job, filled by the stages

    def unchanged_runs(self) -> list[int]:
        """The jobs whose run the live build drew from the same inputs."""
        return [i for i, (s, k) in enumerate(zip(self.slugs, self.keys)) if self.previous.get(s) == k]

    def to_draw(self) -> list[int]:
        """The jobs with no result yet: changed runs, and unchanged ones that could not be reused."""
        return [i for i, r in enumerate(self.results) if r is None]

    def done(self) -> list[RunResult]:
        return [r for r in self.results if r is not None]

    @functools.cached_property
    def log_bytes(self) -> int:
        """Of every log file: a small archive is drawn in this process (asked only when there
        are enough runs to draw for worker processes to pay)."""
        return _log_bytes([s for j in self.jobs for s in j.family])

    def run_keys(self) -> dict[str, str]:
        """Input key by run slug."""
        return dict(zip(self.slugs, self.keys))


def make_plan(archive: Path, out: Path, cache: Path | None, *, config: Config, verify: bool, source_date_epoch: int | None) -> Plan:
    """Scan ``archive`` and key every run; nothing is read or drawn yet."""
    store = Store(cache)
    problems: list[Problem] = []
    roots = real_roots(archive, config.archive.follow_symlinks_into)
    listing = walk(os.fspath(Path(archive)), roots)  # the one walk of the archive: the scan's and the keys'
    sources = scan(
        archive,
        include=config.runs.include,
        exclude=config.runs.exclude,
        patterns={"tabular": config.formats.metric_files},
        problems=problems,
        roots=roots,
        listing=listing,
    )
    fams = families(sources)
    real = _realpaths([s.directory for s in sources], listing)
    names = sorted(set(real.values()))
    site_assets = assets(config.language, store.blob)
    options = ReadOptions(
        verify=verify,
        max_image_bytes=config.limits.max_image_bytes,
        max_text_chars=config.limits.max_text_chars,
        digest=True,
        roots=roots,
    )
    scan_problems = list(problems)
    jobs = [RunJob(f, options, config, cache, site_assets.urls, _nested(real[f[0].directory], names), scan_problems) for f in fams]
    _distinct_slugs(jobs, problems)
    common = cache_keys.common_key(jobs[0]) if jobs else ""
    keys = [
        cache_keys.run_key(j, common, listing, [PLUGIN_ORIGINS[f] for f in sorted({s.format for s in j.family}) if f in PLUGIN_ORIGINS])
        for j in jobs
    ]
    del listing
    return Plan(
        archive=archive,
        out=out,
        config=config,
        store=store,
        source_date_epoch=source_date_epoch,
        problems=problems,
        jobs=jobs,
        keys=keys,
        slugs=[j.slug for j in jobs],
        assets=site_assets,
        site_key=_site_key(keys, site_assets.urls, scan_problems, archive, source_date_epoch),
        previous=_previous_keys(out),
        live_changes=read_changes(out),
        results=[None] * len(jobs),
    )


def _distinct_slugs(jobs: list[RunJob], problems: list[Problem]) -> None:
    """Give each run its own folder, even on a case-insensitive copy of the site: a run whose
    slug another run has (a 40-bit hash clash of names alike but for punctuation) takes a salted
    one, with a problem line saying so. Slugs are lowercase ASCII, so case and Unicode
    normalisation never make two of them one."""
    taken: set[str] = set()
    for job in jobs:
        name = job.family[0].name
        job.slug = s = slug(name)
        n = 0
        while s.lower() in taken:
            n += 1
            s = slug(name, f"clash{n}")
        if n:
            job.slug = s
            problems.append(
                Problem(
                    str(job.family[0].directory), None, "name-clash", f"run {name!r}: its page is runs/{s}/ (its first choice was taken)"
                )
            )
        taken.add(s.lower())


def _site_key(keys: list[str], urls: dict[str, str], scan_problems: list[Problem], archive: Path, source_date_epoch: int | None) -> str:
    """Everything the whole site depends on: each run's input key (code, config, options, log
    files and folder), the assets, the scan's problems, the archive and the build date."""
    doc = [keys, urls, [[p.path, p.offset, p.kind, p.message] for p in scan_problems], str(archive), source_date_epoch]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


def _previous_keys(out: Path) -> dict[str, str]:
    """``{slug or "compare/<slug>": input key}`` of the live build (from its manifest)."""
    live = live_build(out)
    if live is None:
        return {}
    try:
        runs = read_manifest(live).get("runs", {})
        return {k: v for k, v in runs.items() if isinstance(k, str) and isinstance(v, str)}
    except (OSError, ValueError, AttributeError):
        return {}


def _log_bytes(sources: list[RunSource]) -> int:
    """The bytes of the archive's log files (regular files only)."""
    size = 0
    for s in sources:
        for f in s.files:
            try:
                st = os.stat(f)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                size += st.st_size
    return size


def _realpaths(folders: list[Path], listing: Listing | None = None) -> dict[Path, str]:
    """``{folder: folder.resolve() as a string}``, each shared parent resolved once (whether a
    folder is a symlink: from the archive's ``listing`` when it has the folder)."""
    memo: dict[str, str] = {}
    listed = listing or {}

    def real(path: str) -> str:
        got = memo.get(path)
        if got is None:
            parent, name = os.path.split(path)
            folder = listed.get(path)
            if not name or parent == path or (folder.link if folder is not None else os.path.islink(path)):
                got = os.path.realpath(path)
            else:
                got = os.path.join(real(parent), name)
            memo[path] = got
        return got

    out = {}
    for f in folders:
        text = os.fspath(f)
        out[f] = os.path.realpath(text) if ".." in text.split(os.sep) else real(os.path.abspath(text))
    return out


def _nested(root: str, names: list[str]) -> frozenset:
    """The other run folders inside ``root`` (resolved), as Paths; ``names`` sorted, so they form one range."""
    prefix = root.rstrip("/") + "/"
    i = bisect.bisect_left(names, prefix)
    out = []
    while i < len(names) and names[i].startswith(prefix):
        out.append(Path(names[i]))
        i += 1
    return frozenset(out) if out else _NONE


_NONE: frozenset = frozenset()  # (most runs: one empty set, not one each)
