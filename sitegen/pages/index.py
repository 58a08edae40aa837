"""The index page: every run in a table grouped by project and model, a server-rendered first
page, and the data the page script searches, sorts, filters and pages: a small head
(``index-data.js``) and the rows in shards loaded on demand (:mod:`sitegen.pages.indexdata`)."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from sitegen.config import Config
from sitegen.errors import Problem
from sitegen.model import HParamValue, SiteRun, lower_is_better, text_value
from sitegen.pages import changes as changes_page
from sitegen.pages import compare, hpnames, indexdata
from sitegen.pages.assets import Assets
from sitegen.pages.environment import (
    RESOURCE_PREFIXES,
    common_context,
    fmt_duration,
    fmt_time,
    fmt_value,
    page_context,
)

if TYPE_CHECKING:
    from markupsafe import Markup


KEY_WORDS = re.compile(r"acc|loss|error|perplexity|ppl|f1|bleu|rouge|auc|map|iou|score|reward|wer|cer", re.I)

EVAL_PREFIX = re.compile(r"^(eval|val|valid|validation|test|dev)[/_]", re.I)


def key_metrics(runs: list[SiteRun], config: Config) -> list[str]:
    """The configured key metrics, else the 4 most common of the runs' own tags, preferring
    evaluation tags and tags that name a quality (loss, accuracy, ...)."""
    if config.index.key_metrics:
        return list(config.index.key_metrics)
    counts = Counter(
        t for r in runs for t in {ln.tag for ln in r.lines if ln.label in ("", "hparams") and not ln.tag.startswith(RESOURCE_PREFIXES)}
    )
    ranked = sorted(counts, key=lambda t: (-counts[t], -bool(KEY_WORDS.search(t)) - bool(EVAL_PREFIX.search(t)), t))
    return sorted(ranked[:4])


def last_values(run: SiteRun) -> dict[str, float]:
    out: dict[str, float] = {}
    for ln in run.lines:
        if ln.label in ("", "hparams") and ln.tag not in out:
            out[ln.tag] = ln.series.stats.last_value
    return out


PAGE_ROWS = 200  # index rows per page (server-rendered first page; the script pages the rest)
RECENT = 3600.0  # a run written this many seconds before the build counts as running


def best_marks(runs: list[SiteRun], lasts: list[dict[str, float]], metrics: list[str]) -> list[dict[int, str]]:
    """Per key metric, the best runs: ``"p"`` best of its project (the first part of its name),
    ``"m"`` best of its model (its name without the last part). Runs are only ranked against
    runs of the same project or model, and a group of one run has no best; of equal values,
    the first run is the best where lower is better, the last where higher is (ranked as arrays:
    the index of 100,000 runs ranks them for every metric)."""
    levels = (("m", [r.parts[:-1] for r in runs]), ("p", [r.parts[:1] if len(r.parts) > 1 else None for r in runs]))
    values = np.array([[_finite(lv.get(m)) for m in metrics] for lv in lasts], np.float64).reshape(len(runs), len(metrics))
    out: list[dict[int, str]] = [{} for _ in metrics]
    for level, keys in levels:
        ids: dict[tuple[str, ...], int] = {}
        group = np.array([-1 if k is None else ids.setdefault(k, len(ids)) for k in keys], np.int64)
        for j, m in enumerate(metrics):
            v = values[:, j]
            at = np.flatnonzero((group >= 0) & ~np.isnan(v))
            if not len(at):
                continue
            g = group[at]
            sizes = np.bincount(g)
            # per group, the first of its runs ordered by value (lowest or highest), ties by position
            key = v[at] if lower_is_better(m) else -v[at]
            pos = at if lower_is_better(m) else -at
            order = np.lexsort((pos, key, g))
            first = order[np.r_[True, g[order][1:] != g[order][:-1]]]
            for i in at[first][sizes[g[first]] > 1].tolist():
                out[j][i] = level
    return out


def _finite(v: object) -> float:
    return v if isinstance(v, float) and math.isfinite(v) else math.nan


def running(runs: list[SiteRun], writing: set[str], build_time: float | None) -> set[str]:
    """Runs shown as running: a log ends in a record still being written (``writing``), or its
    last record is less than :data:`RECENT` seconds before the build time (``SOURCE_DATE_EPOCH``
    when set, else the newest record of the archive: both the same on every rebuild)."""
    if build_time is None:
        build_time = max((r.end_time for r in runs if r.end_time is not None), default=None)
    out = set(writing)
    if build_time is not None:
        out.update(r.name for r in runs if r.end_time is not None and build_time - RECENT <= r.end_time <= build_time + RECENT)
    return out


MAX_INDEX_HPARAMS = 20


def index_files(
    runs: list[SiteRun],
    hps: list[dict[str, HParamValue]],
    groups: list[compare.Group],
    config: Config,
    assets: Assets,
    problems: list[Problem],
    changes: dict | None = None,
    live: set[str] | None = None,
    reuse: indexdata.Reuse | None = None,
) -> Iterator[tuple[str, bytes]]:
    """The experiment browser (``index.html``, ``index-data.js`` and ``index/*.js``, by path, one
    at a time), with the "What's new" panel of ``changes`` (``changes.json``), a badge on the
    runs it added and on the runs of ``live`` (shown as running: :func:`running`). ``reuse``:
    the live build's shards, linked where their rows did not change."""
    env, _ = page_context(config.language)
    return _index(env, runs, hps, groups, config, assets, common_context(config), problems, changes, live or set(), reuse)


def _varies(column: hpnames.HParamColumn, hps: list[dict[str, HParamValue]]) -> bool:
    """Whether a hyperparameter takes two values (as shown) across the runs, which puts it in
    the index; it stops at the second value instead of collecting every run's."""
    first: str | None = None
    for i, h in enumerate(hps):
        v = text_value(column.value(h)) if column.has(h) else None
        if i == 0:
            first = v
        elif v != first:
            return True
    return False


def _index(
    env, runs, hps, groups, config, assets, common, problems, changes=None, live=frozenset(), reuse=None
) -> Iterator[tuple[str, bytes]]:
    """The experiment browser: a server-rendered first page, the data head and its shards for the rest."""
    metrics = key_metrics(runs, config)
    depth = max((len(r.parts) - 1 for r in runs), default=0)
    varying = list(itertools.islice((c for c in hpnames.columns(hps) if _varies(c, hps)), MAX_INDEX_HPARAMS))
    lasts = [last_values(r) for r in runs]
    best = best_marks(runs, lasts, metrics)
    group_links = {g.name: f"compare/{g.slug}/index.html" for g in groups if g.key}
    added = {c["name"] for c in changes["changes"]["added"]} if changes else set()
    head = {
        "depth": depth,
        "metrics": metrics,
        "lower": [lower_is_better(m) for m in metrics],
        "hcols": [list(c.keys) for c in varying],
        "groups": group_links,
        "pageRows": PAGE_ROWS,
        # the runs new since the live build: all of them after a first build (said in one word)
        "fresh": "all" if runs and len(added) >= len(runs) else sorted(r.slug for r in runs if r.name in added),
        "running": sorted(r.slug for r in runs if r.name in live),
        "all": "compare/all/index.html",
    }
    index_rows = [
        indexdata.IndexRow(r, hp, [lv.get(m) for m in metrics], "".join(b.get(i, "-") for b in best))
        for i, (r, hp, lv) in enumerate(zip(runs, hps, lasts))
    ]
    rows = [
        {
            "run": r,
            "groups": list(r.parts[:-1]) + [""] * (depth - len(r.parts) + 1),
            "leaf": r.parts[-1],
            "metrics": lv,
            "hparams": hp,
            "best": {m: b[i] for m, b in zip(metrics, best) if i in b},
            "new": r.name in added,
            "running": r.name in live,
        }
        for i, (r, hp, lv) in enumerate(zip(runs, hps, lasts))
        if i < PAGE_ROWS
    ]
    page = env.get_template("index.html").render(
        **common,
        root="",
        assets=assets.urls,
        rows=rows,
        total=len(runs),
        depth=depth,
        metrics=metrics,
        row_html=_index_rows(rows, metrics, varying, group_links, env.globals["t"]),
        hparam_columns=varying,
        problems=problems,
        groups=[g for g in groups],
        group_links=group_links,
        page_rows=PAGE_ROWS,
        news=changes_page.panel(changes),
    )
    yield "index.html", page.encode("utf-8")
    yield from indexdata.index_data(index_rows, head, reuse)


def _index_rows(
    rows: list[dict], metrics: list[str], hparam_cols: list[hpnames.HParamColumn], group_links: dict[str, str], t: Callable
) -> Markup:
    """The index table's server-rendered rows (written here rather than in the template, where
    they were the slowest part of the index)."""
    from markupsafe import Markup, escape

    best_title = {"p": escape(t("index.best_project")), "m": escape(t("index.best_model"))}
    star = {"p": "★", "m": "☆"}
    badge = f' class="fresh" data-badge="{escape(t("index.new"))}" title="{escape(t("index.new_title"))}"'  # (CSS draws it: no text in the cell)
    live = f' class="running" data-badge="{escape(t("index.running"))}" title="{escape(t("index.running_title"))}"'
    tick = escape(t("index.tick"))
    out = []
    for row in rows:
        r = row["run"]
        cells = ["<tr>\n", f'<td class="tick"><input type="checkbox" class="run-tick" value="{escape(r.slug)}" aria-label="{tick}"></td>']
        for k, g in enumerate(row["groups"]):
            href = group_links.get("/".join(r.parts[: k + 1])) if g else None
            cells.append(f'<td><a href="{escape(href)}">{escape(g)}</a></td>' if href else f"<td>{escape(g)}</td>")
        dur = (r.end_time - r.start_time) if r.start_time is not None and r.end_time is not None else None
        cells.append(
            f'<td{badge if row["new"] else ""}><a href="runs/{escape(r.slug)}/index.html"{live if row["running"] else ""}>'
            f"{escape(r.title if r.title != r.name else row['leaf'])}</a></td>\n"
            f"<td>{escape(fmt_time(r.start_time))}</td>\n<td>{escape(fmt_duration(dur))}</td>\n"
            f"<td>{escape(r.last_step if r.last_step is not None else '')}</td>\n"
        )
        for m in metrics:
            value = escape(fmt_value(row["metrics"].get(m)))
            if m in row["best"]:
                level = row["best"][m]
                cells.append(f'<td class="num best best-{level}" title="{best_title[level]}">{value} {star[level]}</td>')
            else:
                cells.append(f'<td class="num">{value}</td>')
        cells.extend(f"<td>{escape(fmt_value(c.value(row['hparams'])))}</td>" for c in hparam_cols)
        cells.append("</tr>\n")
        out.append("".join(cells))
    return Markup("".join(out))
