"""A run as the site shows it: its sub-runs folded in, the records a resumed run wrote again
superseded (:mod:`sitegen.prepare.resume`), and each tag's line thinned for its chart."""

from __future__ import annotations

from pathlib import PurePosixPath

import numpy as np
import pyarrow as pa

from sitegen.config import Config
from sitegen.downsample import downsample
from sitegen.errors import Problem
from sitegen.model import ChartLine, RunData, RunSource, SiteRun, Superseded, grouped_columns, slug
from sitegen.prepare.resume import CONTINUES, REPEATS, newest_items, superseded


def families(sources: list[RunSource]) -> list[list[RunSource]]:
    """Each top-level run followed by its sub-runs, in name order; a sub-run of a sub-run
    (a run folder nested in one nested in another) belongs to the top-level run's family too."""
    parent = {s.name: s.parent for s in sources}

    def top(name: str) -> str:
        seen = set()
        while parent.get(name) is not None and name not in seen:
            seen.add(name)
            name = parent[name]  # type: ignore[assignment]
        return name

    children: dict[str, list[RunSource]] = {}
    for s in sources:
        if s.parent is not None:
            children.setdefault(top(s.name), []).append(s)
    return [[s, *children.get(s.name, [])] for s in sources if s.parent is None]


def assemble(source: RunSource, data: RunData, subs: list[RunData], config: Config) -> SiteRun:
    """The run of ``source`` (``data``) with its sub-runs (``subs``) and every chart line."""
    replaced: list[Superseded] = []
    for d in [data, *subs]:
        if d.format not in CONTINUES:
            for kind in ("histograms", "curves", "images", "audio", "texts"):
                setattr(d, kind, newest_items(getattr(d, kind)))
    lines = _lines(data, "", config, source.name, replaced)
    for sub in subs:
        lines += _lines(sub, None, config, source.name, replaced)
        if not data.hparams and sub.hparams:
            data.hparams = dict(sub.hparams)
        for m in sub.hparam_metrics:
            if m not in data.hparam_metrics:
                data.hparam_metrics.append(m)
    lines.sort(key=lambda ln: (ln.tag, ln.label))
    walls = [w for d in [data, *subs] if d.scalars.num_rows for w in _wall_range(d.scalars)]
    walls = [w for w in walls if np.isfinite(w)]
    last_steps = [ln.series.stats.last_step for ln in lines]
    parts = tuple(PurePosixPath(source.name).parts) if source.name != "." else (".",)
    experiment = data.meta.get("experiment")
    if experiment:
        parts = (experiment, data.meta.get("title") or parts[-1])
    return SiteRun(
        name=source.name,
        slug=slug(source.name),
        title=data.meta.get("title") or source.name,
        parts=parts,
        data=data,
        sub_runs=subs,
        lines=lines,
        start_time=float(data.meta["start_time"]) if data.meta.get("start_time") else (min(walls) if walls else None),
        end_time=float(data.meta["end_time"]) if data.meta.get("end_time") else (max(walls) if walls else None),
        last_step=max(last_steps) if last_steps else None,
        directory=source.directory,
        superseded=_total(replaced),
    )


def _line_label(sub: RunData, parent: str, tag: str) -> str:
    """The legend label of a sub-run's line: the add_scalars key, else the sub-run's path."""
    if sub.hparams or sub.hparam_metrics:
        return "hparams"
    rel = PurePosixPath(sub.name).relative_to(parent).as_posix()
    for prefix in (tag + "/", tag.replace("/", "_") + "_"):
        if rel.startswith(prefix) and len(rel) > len(prefix):
            return rel[len(prefix) :]
    return rel


def _total(parts: list[Superseded]) -> Superseded | None:
    if not parts:
        return None
    return Superseded(sum(p.count for p in parts), min(p.first_step for p in parts), max(p.last_step for p in parts))


def _lines(run: RunData, label: str | None, config: Config, parent: str, replaced: list[Superseded]) -> list[ChartLine]:
    """One chart line per selected tag of the newest records, thinned for the chart; the tags
    are split in one pass. What a resumed run superseded is added to ``replaced``."""
    table = run.scalars
    if table.num_rows == 0:
        return []
    g, cols = grouped_columns(table)
    step, wall, value = cols["step"], cols["wall_time"], cols["value"]
    rows = None if g.in_place else g.order
    drop = None if run.format in CONTINUES else superseded(step, g.bounds, rows, run.restarts, repeats=run.format in REPEATS)
    if drop is not None:
        gone = step[drop]
        replaced.append(Superseded(len(gone), int(gone.min()), int(gone.max())))
    chosen = [i for i, tag in enumerate(g.tags) if g.bounds[i + 1] > g.bounds[i] and config.tag_selected(tag)]
    limit = config.limits.max_tags_per_run
    if len(chosen) > limit:
        key = set(config.index.key_metrics)
        first = [i for i in chosen if g.tags[i] in key] + [i for i in chosen if g.tags[i] not in key]
        chosen = sorted(first[:limit])
        where = run.files[0].path if run.files else run.name
        run.problems.append(
            Problem(
                str(where),
                None,
                "too-many",
                f"{len(first):,} tags; charts of {limit:,} (limits.max_tags_per_run), the downloads keep every tag",
            )
        )
    out = []
    for i in chosen:
        tag, a, b = g.tags[i], g.bounds[i], g.bounds[i + 1]
        s, w, v = step[a:b], wall[a:b], value[a:b]
        if drop is not None and drop[a:b].any():
            keep = ~drop[a:b]
            if not keep.any():
                continue  # every record of the tag came before a restart at a smaller step
            s, w, v = s[keep], w[keep], v[keep]
        series = downsample(s, w, v, config.charts.points_per_chart)
        out.append(ChartLine(tag, label if label is not None else _line_label(run, parent, tag), series))
    return out


def _wall_range(table: pa.Table) -> tuple[float, float]:
    """Smallest and largest wall time, NaN skipped (NaN only if all are)."""
    w = table.column("wall_time").to_numpy()
    return float(np.fmin.reduce(w)), float(np.fmax.reduce(w))
