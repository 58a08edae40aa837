"""A trend page per model and project (``trends/<group>/index.html``): for each key metric, every
run's last and best value against its start time and, when runs record one, against their
commit; the change points and the baseline band of each (computed by
:mod:`sitegen.prepare.trends`; drawn here)."""

from __future__ import annotations

import statistics
from typing import Any

from sitegen.config import Config
from sitegen.pages.assets import Assets
from sitegen.pages.charts import json_text
from sitegen.pages.compare import group_slug
from sitegen.pages.environment import common_context, fmt_time, page_context, render_page


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


MAX_NAMED = 5  # runs a commit's tick names in its tooltip


def commit_rows(ct: Any) -> dict[str, list]:
    """The commit chart's rows as columns: ``c`` the commit's label (the x position), ``h`` its
    full hash, ``g`` its tag and branch, ``t`` the run's start (UTC); ``k`` what a row is (final,
    best, level: a commit's median, change, band from ``c`` to ``c2``)."""
    cols: dict[str, list] = {c: [] for c in ("c", "c2", "t", "y", "y2", "s", "h", "g", "u", "k")}

    def add(c: str, k: str, y: float | None = None, **more: Any) -> None:
        row = {"c": c, "k": k, "y": y, "c2": None, "t": "", "y2": None, "s": "", "h": "", "g": "", "u": ""} | more
        for name, col in cols.items():
            col.append(row[name])

    for label, full, runs, value in zip(ct.labels, ct.commits, ct.runs, ct.values):
        ref = ref_text(runs)
        for run in runs:
            link = f"../../runs/{run.slug}/index.html"
            final, best = run.metrics[ct.metric], run.best.get(ct.metric)
            add(label, "final", final, t=fmt_time(run.start_time), s=run.name, h=full, g=ref, u=link)
            if best is not None and best != final:
                add(label, "best", best, t=fmt_time(run.start_time), s=run.name, h=full, g=ref, u=link)
        names = ", ".join(r.name for r in runs[:MAX_NAMED]) + (f", … (+{len(runs) - MAX_NAMED})" if len(runs) > MAX_NAMED else "")
        add(label, "level", value, s=names, h=full, g=ref)
    for i in ct.changes:
        add(ct.labels[i], "change")
    if ct.band is not None and ct.labels:
        add(ct.labels[ct.band[0]], "band", ct.band[1], c2=ct.labels[-1], y2=ct.band[2])
    return cols


def ref_text(runs: list[Any]) -> str:
    """A commit's git tag and branch, as its runs record them."""
    tag = next((r.commit_tag for r in runs if r.commit_tag), None)
    branch = next((r.commit_branch for r in runs if r.commit_branch), None)
    return " · ".join(x for x in (tag, branch) if x)


def steps(tr: Any) -> list[tuple[Any, float, float]]:
    """Each change point: the first run of the new level, the level before and after (means)."""
    bounds = [0, *tr.changes, len(tr.values)]
    means = [statistics.fmean(tr.values[a:b]) for a, b in zip(bounds, bounds[1:])]
    return [(tr.runs[i], means[j], means[j + 1]) for j, i in enumerate(tr.changes)]


def commit_steps(ct: Any) -> list[tuple[str, str, Any, float, float]]:
    """Each change point by commit: its label, full hash, first run, the level before and after."""
    return [(ct.labels[i], ct.commits[i], ct.runs[i][0], before, after) for (_, before, after), i in zip(steps(ct), ct.changes)]


def trend_files(
    key: tuple[str, ...],
    runs: int,
    trends: list[Any],
    config: Config,
    assets: Assets,
    *,
    by_commit: list[Any] | None = None,
    committed: int = 0,
) -> dict[str, bytes]:
    """The trend page of the group ``key`` (``runs`` of them, ``committed`` of which record a
    commit; ``trends``: one per key metric with values; ``by_commit``: the same metrics against
    commits, None or empties when no run records one)."""
    env, _ = page_context(config.language)
    slug = group_slug(key)
    by_commit = by_commit if by_commit and any(ct.commits for ct in by_commit) else [None] * len(trends)
    charts = [{"kind": "trend", "rows": rows(tr)} for tr in trends]
    commit_charts = []
    for ct in by_commit:
        commit_charts.append(None if ct is None or not ct.commits else len(charts))
        if ct is not None and ct.commits:
            charts.append({"kind": "trend_commit", "rows": commit_rows(ct), "domain": ct.labels})
    data = {"kind": "trends", "charts": charts}
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
        committed=committed,
        has_commits=any(c is not None for c in commit_charts),
        trends=[
            {
                "metric": tr.metric,
                "runs": tr.runs,
                "steps": steps(tr),
                "band": tr.band,
                "commit_chart": chart,
                "commits": 0 if ct is None else len(ct.commits),
                "commit_runs": 0 if ct is None else sum(map(len, ct.runs)),
                "commit_steps": [] if ct is None else commit_steps(ct),
                "commit_band": None if ct is None else ct.band,
            }
            for tr, ct, chart in zip(trends, by_commit, commit_charts)
        ],
    )
    return {f"trends/{slug}/index.html": page}
