"""The index page: every run in a table grouped by project and model, a server-rendered first
page and ``index-data.js`` with every row for the page script (search, sort, filter, paging)."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable

from sitegen.config import Config
from sitegen.errors import Problem
from sitegen.model import HParamValue, SiteRun, lower_is_better, text_value
from sitegen.pages import changes as changes_page
from sitegen.pages import compare
from sitegen.pages.assets import Assets
from sitegen.pages.charts import Plain
from sitegen.pages.environment import (
    RESOURCE_PREFIXES,
    common_context,
    fmt_duration,
    fmt_time,
    fmt_value,
    js_data,
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

MAX_INDEX_HPARAMS = 20


def index_files(
    runs: list[SiteRun],
    hps: list[dict[str, HParamValue]],
    groups: list[compare.Group],
    config: Config,
    assets: Assets,
    problems: list[Problem],
    changes: dict | None = None,
) -> dict[str, bytes]:
    """The experiment browser (``index.html`` and ``index-data.js``), with the "What's new"
    panel of ``changes`` (``changes.json``) and a badge on the runs it added."""
    env, _ = page_context(config.language)
    return _index(env, runs, hps, groups, config, assets, common_context(config), problems, changes)


def _index(env, runs, hps, groups, config, assets, common, problems, changes=None) -> dict[str, bytes]:
    """The experiment browser: a server-rendered first page and ``index-data.js`` for the rest."""
    metrics = key_metrics(runs, config)
    depth = max((len(r.parts) - 1 for r in runs), default=0)
    varying = [k for k in sorted({k for h in hps for k in h}, key=str) if len({text_value(h.get(k)) if k in h else None for h in hps}) > 1][
        :MAX_INDEX_HPARAMS
    ]
    tag_ids: dict[str, int] = {}
    key_ids: dict[str, int] = {}
    lasts = [last_values(r) for r in runs]
    best = []
    for m in metrics:
        vals = [(v, i) for i, lv in enumerate(lasts) if isinstance(v := lv.get(m), float) and math.isfinite(v)]
        best.append((min(vals) if lower_is_better(m) else max(vals))[1] if len(vals) > 1 else -1)
    data_rows = Plain()  # (no binary column in them: json_text need not look inside)
    for _i, (r, hp, lv) in enumerate(zip(runs, hps, lasts)):
        dur = (r.end_time - r.start_time) if r.start_time is not None and r.end_time is not None else None
        tags = sorted({ln.tag for ln in r.lines}, key=str)
        data_rows.append(
            [
                r.slug,
                list(r.parts[:-1]) + [""] * (depth - len(r.parts) + 1),
                r.title if r.title != r.name else r.parts[-1],
                _num(r.start_time),
                fmt_time(r.start_time),
                _num(dur),
                fmt_duration(dur),
                r.last_step,
                [_num(lv.get(m)) for m in metrics],
                [tag_ids.setdefault(t, len(tag_ids)) for t in tags],
                {str(key_ids.setdefault(k, len(key_ids))): _hp(v) for k, v in sorted(hp.items())},
            ]
        )
    group_links = {g.name: f"compare/{g.slug}/index.html" for g in groups if g.key}
    added = {c["name"] for c in changes["changes"]["added"]} if changes else set()
    data = {
        "depth": depth,
        "metrics": metrics,
        "lower": [lower_is_better(m) for m in metrics],
        "best": best,
        "hcols": [key_ids.get(k, -1) for k in varying],
        "tags": list(tag_ids),
        "hkeys": list(key_ids),
        "groups": group_links,
        "pageRows": PAGE_ROWS,
        "runs": data_rows,
        "fresh": [i for i, r in enumerate(runs) if r.name in added],
    }
    rows = [
        {
            "run": r,
            "groups": list(r.parts[:-1]) + [""] * (depth - len(r.parts) + 1),
            "leaf": r.parts[-1],
            "metrics": lv,
            "hparams": hp,
            "best": [m for m, b in zip(metrics, best) if b == i],
            "new": r.name in added,
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
        hparam_names=varying,
        problems=problems,
        groups=[g for g in groups],
        group_links=group_links,
        page_rows=PAGE_ROWS,
        news=changes_page.panel(changes),
    )
    return {"index.html": page.encode("utf-8"), "index-data.js": js_data("SITEGEN_INDEX", data)}


def _index_rows(rows: list[dict], metrics: list[str], hparam_names: list[str], group_links: dict[str, str], t: Callable) -> Markup:
    """The index table's server-rendered rows (written here rather than in the template, where
    they were the slowest part of the index)."""
    from markupsafe import Markup, escape

    best_title = escape(t("index.best_run"))
    badge = f' class="fresh" data-badge="{escape(t("index.new"))}" title="{escape(t("index.new_title"))}"'  # (CSS draws it: no text in the cell)
    out = []
    for row in rows:
        r = row["run"]
        cells = ["<tr>\n"]
        for k, g in enumerate(row["groups"]):
            href = group_links.get("/".join(r.parts[: k + 1])) if g else None
            cells.append(f'<td><a href="{escape(href)}">{escape(g)}</a></td>' if href else f"<td>{escape(g)}</td>")
        dur = (r.end_time - r.start_time) if r.start_time is not None and r.end_time is not None else None
        cells.append(
            f'<td{badge if row["new"] else ""}><a href="runs/{escape(r.slug)}/index.html">'
            f"{escape(r.title if r.title != r.name else row['leaf'])}</a></td>\n"
            f"<td>{escape(fmt_time(r.start_time))}</td>\n<td>{escape(fmt_duration(dur))}</td>\n"
            f"<td>{escape(r.last_step if r.last_step is not None else '')}</td>\n"
        )
        for m in metrics:
            value = escape(fmt_value(row["metrics"].get(m)))
            if m in row["best"]:
                cells.append(f'<td class="num best" title="{best_title}">{value} ★</td>')
            else:
                cells.append(f'<td class="num">{value}</td>')
        cells.extend(f"<td>{escape(fmt_value(row['hparams'].get(h)))}</td>" for h in hparam_names)
        cells.append("</tr>\n")
        out.append("".join(cells))
    return Markup("".join(out))


def _num(v: Any) -> Any:
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v if math.isfinite(v) else None


def _hp(v: HParamValue) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else text_value(v)
    return v
