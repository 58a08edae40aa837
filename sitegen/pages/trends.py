"""A trend page per model and project (``trends/<group>/index.html``): for each key metric, every
run's last and best value against its start time, the change points and the baseline band
(computed by :mod:`sitegen.prepare.trends`; drawn here)."""

from __future__ import annotations

import statistics
from typing import Any

from sitegen.config import Config
from sitegen.pages.assets import Assets
from sitegen.pages.charts import json_text
from sitegen.pages.compare import group_slug
from sitegen.pages.environment import common_context, page_context, render_page


def rows(tr: Any) -> dict[str, list]:
    """The chart's rows as columns: ``k`` says what a row is (final, best, change, band)."""
    cols: dict[str, list] = {c: [] for c in ("x", "x2", "y", "y2", "s", "u", "k")}

    def add(
        x: float, k: str, y: float | None = None, *, s: str = "", u: str = "", x2: float | None = None, y2: float | None = None
    ) -> None:
        for c, v in (("x", x * 1000), ("x2", None if x2 is None else x2 * 1000), ("y", y), ("y2", y2), ("s", s), ("u", u), ("k", k)):
            cols[c].append(v)

    for run, value, best in zip(tr.runs, tr.values, tr.best):
        link = f"../../runs/{run.slug}/index.html"
        add(run.start_time, "final", value, s=run.name, u=link)
        if best is not None and best != value:
            add(run.start_time, "best", best, s=run.name, u=link)
    for i in tr.changes:
        add(tr.runs[i].start_time, "change")
    if tr.band is not None and tr.runs:
        add(tr.band[0], "band", tr.band[1], x2=max(tr.runs[-1].start_time, tr.band[0]), y2=tr.band[2])
    return cols


def steps(tr: Any) -> list[tuple[Any, float, float]]:
    """Each change point: the first run of the new level, the level before and after (means)."""
    bounds = [0, *tr.changes, len(tr.values)]
    means = [statistics.fmean(tr.values[a:b]) for a, b in zip(bounds, bounds[1:])]
    return [(tr.runs[i], means[j], means[j + 1]) for j, i in enumerate(tr.changes)]


def trend_files(key: tuple[str, ...], runs: int, trends: list[Any], config: Config, assets: Assets) -> dict[str, bytes]:
    """The trend page of the group ``key`` (``runs`` of them; ``trends``: one per key metric
    with values)."""
    env, _ = page_context(config.language)
    slug = group_slug(key)
    data = {"kind": "trends", "charts": [{"kind": "trend", "rows": rows(tr)} for tr in trends]}
    crumbs = [("/".join(key[: i + 1]), f"../{group_slug(key[: i + 1])}/index.html") for i in range(len(key) - 1)]
    page = render_page(
        env.get_template("trends.html"),
        json_text(data),
        **common_context(config),
        root="../../",
        assets=assets.urls,
        group="/".join(key),
        slug=slug,
        crumbs=crumbs,
        runs=runs,
        trends=[{"metric": tr.metric, "runs": tr.runs, "steps": steps(tr), "band": tr.band} for tr in trends],
    )
    return {f"trends/{slug}/index.html": page}
