"""The whole build, readable top to bottom: scan -> read -> downsample -> charts -> render -> publish."""
from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np
import pyarrow.compute as pc

from . import publish, render
from .config import Config
from .downsample import downsample
from .errors import Problem
from .model import ChartLine, ReadOptions, RunData, RunSource, SiteRun
from .read import READERS
from .scan import scan

log = logging.getLogger(__name__)


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


def read_all(sources: list[RunSource], options: ReadOptions) -> list[RunData]:
    return [READERS[s.format].read(s, options) for s in sources]


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
            )
        )
    return site_runs


def build(archive: Path, out: Path, *, config: Config, verify: bool = True) -> BuildResult:
    """Build the site for ``archive`` into ``out`` (replaced atomically)."""
    problems: list[Problem] = []
    sources = scan(archive, include=config.runs.include, exclude=config.runs.exclude, problems=problems)
    datas = read_all(sources, read_options(config, verify=verify))
    for d in datas:
        problems.extend(d.problems)
    site_runs = assemble(sources, datas, config)
    files = render.render_site(site_runs, config, problems)
    publish.publish(files, Path(out))
    return BuildResult(Path(out), len(site_runs), len(files), problems)
