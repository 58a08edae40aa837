"""The whole build, readable top to bottom: scan -> read -> downsample -> charts -> render -> publish."""
from __future__ import annotations

import hashlib
import logging
import multiprocessing as mp
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path, PurePosixPath

import numpy as np
import pyarrow.compute as pc

from . import manifest, publish, render
from .config import Config
from .downsample import downsample
from .errors import Problem
from .model import ChartLine, ReadOptions, RunData, RunSource, SiteRun, merge_parts
from .read import READERS
from .scan import scan
from .store import Store, default_cache_dir

log = logging.getLogger(__name__)
PARALLEL_MIN_BYTES = 64 << 20  # below this, starting worker processes costs more than it saves


@dataclass
class BuildResult:
    out: Path
    runs: int
    files: int
    problems: list[Problem] = field(default_factory=list)


def slugify(name: str) -> str:
    """A safe, unique folder name for a run: readable ASCII part plus a hash of the exact name.

    Raw names never become paths, so ``..``, absolute paths, reserved names and collisions such
    as ``a/b`` vs ``a_b`` cannot happen.
    """
    readable = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()[:48] or "run"
    return f"{readable}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


def read_options(config: Config, *, verify: bool = True) -> ReadOptions:
    return ReadOptions(
        verify=verify, max_image_bytes=config.limits.max_image_bytes, max_text_chars=config.limits.max_text_chars
    )


def read_source(source: RunSource, options: ReadOptions, cache: Path | None) -> RunData:
    """Read one run; append-only formats go file by file through the decode cache."""
    reader = READERS[source.format]
    if not hasattr(reader, "decode_file"):
        return reader.read(source, options)
    store = Store(cache)
    parts = [store.read_file(path, options, reader.decode_file) for path in source.files]
    return merge_parts(source.name, reader.FORMAT, parts)


def _read_chunk(args: tuple[list[RunSource], ReadOptions, Path | None]) -> list[RunData]:
    sources, options, cache = args
    return [read_source(s, options, cache) for s in sources]


def read_all(sources: list[RunSource], options: ReadOptions, *, cache: Path | None, jobs: int = 0) -> list[RunData]:
    """Read every run, in worker processes when the archive is large enough to pay for them.

    Workers are started with ``spawn``: forking after vl-convert has started hangs.
    """
    jobs = jobs or os.cpu_count() or 1
    size = sum(f.stat().st_size for s in sources for f in s.files if f.is_file())
    if jobs <= 1 or len(sources) < 2 or size < PARALLEL_MIN_BYTES:
        return [read_source(s, options, cache) for s in sources]
    # contiguous chunks, several per worker, so results come back in order and balance out
    n = min(len(sources), jobs * 4)
    chunks = [sources[i * len(sources) // n : (i + 1) * len(sources) // n] for i in range(n)]
    with ProcessPoolExecutor(max_workers=min(jobs, n), mp_context=mp.get_context("spawn")) as pool:
        return [run for part in pool.map(_read_chunk, [(c, options, cache) for c in chunks]) for run in part]


def _line_label(sub: RunData, parent: str, tag: str) -> str:
    """The legend label of a sub-run's line: the add_scalars key, else the sub-run's path."""
    if sub.hparams or sub.hparam_metrics:
        return "hparams"
    rel = PurePosixPath(sub.name).relative_to(parent).as_posix()
    for prefix in (tag + "/", tag.replace("/", "_") + "_"):
        if rel.startswith(prefix) and len(rel) > len(prefix):
            return rel[len(prefix) :]
    return rel


def _lines(run: RunData, label: str | None, config: Config, parent: str) -> list[ChartLine]:
    table = run.scalars
    if table.num_rows == 0:
        return []
    out = []
    tags = table.column("tag")
    for tag in sorted(set(tags.to_pylist()), key=str):
        if not config.tag_selected(tag):
            continue
        rows = table.filter(pc.equal(tags, tag))
        series = downsample(
            rows.column("step").to_numpy(), rows.column("wall_time").to_numpy(), rows.column("value").to_numpy(),
            config.charts.points_per_chart,
        )
        out.append(ChartLine(tag, label if label is not None else _line_label(run, parent, tag), series))
    return out


def assemble(sources: list[RunSource], datas: list[RunData], config: Config) -> list[SiteRun]:
    """Group sub-runs under their parents and prepare every chart line."""
    by_name = {d.name: d for d in datas}
    children: dict[str, list[RunData]] = {}
    for s in sources:
        if s.parent is not None:
            children.setdefault(s.parent, []).append(by_name[s.name])
    site_runs = []
    for s in sources:
        if s.parent is not None:
            continue
        data = by_name[s.name]
        subs = children.get(s.name, [])
        lines = _lines(data, "", config, s.name)
        for sub in subs:
            lines += _lines(sub, None, config, s.name)
            if not data.hparams and sub.hparams:
                data.hparams = dict(sub.hparams)
            for m in sub.hparam_metrics:
                if m not in data.hparam_metrics:
                    data.hparam_metrics.append(m)
        lines.sort(key=lambda ln: (ln.tag, ln.label))
        walls = [w for d in [data, *subs] if d.scalars.num_rows for w in (pc.min(d.scalars["wall_time"]).as_py(), pc.max(d.scalars["wall_time"]).as_py())]
        walls = [w for w in walls if w is not None and np.isfinite(w)]
        last_steps = [ln.series.stats.last_step for ln in lines]
        parts = tuple(PurePosixPath(s.name).parts) if s.name != "." else (".",)
        experiment = data.meta.get("experiment")
        if experiment:
            parts = (experiment, data.meta.get("title") or parts[-1])
        site_runs.append(
            SiteRun(
                name=s.name, slug=slugify(s.name), title=data.meta.get("title") or s.name, parts=parts,
                data=data, sub_runs=subs, lines=lines,
                start_time=float(data.meta["start_time"]) if "start_time" in data.meta else (min(walls) if walls else None),
                end_time=float(data.meta["end_time"]) if data.meta.get("end_time") else (max(walls) if walls else None),
                last_step=max(last_steps) if last_steps else None,
                directory=s.directory,  # sitegen.runpage: env files, notes, artifacts
            )
        )
    return site_runs


def build(
    archive: Path, out: Path, *, config: Config, verify: bool = True, cache: Path | None = None,
    use_cache: bool = True, jobs: int = 0, keep: int = 3, source_date_epoch: int | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> BuildResult:
    """Build the site for ``archive`` into ``out`` (replaced atomically).

    ``out`` becomes a symlink swapped atomically to the new build; ``keep`` builds are kept.
    ``source_date_epoch`` (``SOURCE_DATE_EPOCH``) is the only time that may appear in the output.
    ``progress(stage, step, steps)`` is told when each stage starts.

    ``cache``: the decode cache folder (default :func:`sitegen.store.default_cache_dir`);
    ``use_cache=False`` decodes everything again and writes no cache.
    """
    cache = (cache or default_cache_dir()) if use_cache else None
    problems: list[Problem] = []
    step = progress or (lambda stage, i, n: None)
    step("scanning", 1, 4)
    sources = scan(
        archive, include=config.runs.include, exclude=config.runs.exclude,
        patterns={"tabular": config.formats.metric_files}, problems=problems,
    )
    step(f"reading {len(sources)} runs", 2, 4)
    datas = read_all(sources, read_options(config, verify=verify), cache=cache, jobs=jobs)
    for d in datas:
        problems.extend(d.problems)
    site_runs = assemble(sources, datas, config)
    step("rendering", 3, 4)
    store = Store(cache)
    files = publish.with_gzip_twins(
        render.render_site(site_runs, config, problems, store=store), previous=publish.live_build(Path(out))
    )
    files[manifest.MANIFEST] = manifest.make(
        files, [f for d in datas for f in d.files], archive=Path(archive), source_date_epoch=source_date_epoch,
        hasher=store.sha256,
    )
    step("publishing", 4, 4)
    publish.publish(files, Path(out), keep=keep)
    return BuildResult(Path(out), len(site_runs), len(files), problems)
