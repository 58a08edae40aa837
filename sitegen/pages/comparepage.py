"""A comparison page: the overlaid curves of a group's runs (in piece scripts beside the page),
the hyperparameter table, parallel coordinates, scatter plots and the config diff."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from sitegen.config import Config
from sitegen.model import HParamValue, SiteRun
from sitegen.pages import bands, compare
from sitegen.pages.assets import Assets
from sitegen.pages.charts import json_text
from sitegen.pages.environment import common_context, fmt_value, page_context, render_page, sort_key
from sitegen.pages.index import key_metrics

if TYPE_CHECKING:
    from markupsafe import Markup


def compare_files(
    group: compare.Group,
    hps: list[dict[str, HParamValue]],
    config: Config,
    assets: Assets,
    points: compare.Points | None = None,
    kept: compare.Kept | None = None,
) -> dict[str, bytes]:
    """One comparison page and its data (``hps``: of ``group.runs``; runs in workers; ``kept``:
    the pieces of the last build's page, see :func:`sitegen.pages.compare.overlay_data`)."""
    env, _ = page_context(config.language)
    return _compare_page(env, group, hps, config, assets, common_context(config), points, kept)


def _compare_page(env, group, hps, config, assets, common, points=None, kept=None) -> dict[str, bytes]:
    prefix = f"compare/{group.slug}/"
    labels = compare.labels(group)
    first = max(0, len(group.runs) - compare.MAX_TABLE_ROWS)  # the table lists the newest runs
    table_runs = group.runs[first:]
    ghps = hps[first:]
    metrics = key_metrics(group.runs, config)
    table, hcharts, configs = compare.hparam_section(table_runs, labels[first:], ghps, metrics)
    rest = {"labels": labels[first:], "charts": hcharts, "configs": configs}
    rest_json = json_text(rest)
    # the curves get what the table, charts and configs leave of the page's data budget
    t = env.globals["t"]
    summary = None
    if len(group.runs) > config.compare.summarise_above:  # each group as a median, a band and its best run
        own = group.key[-1] if group.key else t("compare.all_runs")
        text, summary = bands.summary_data(
            group,
            labels,
            metrics,
            (own, t("compare.other_groups")),
            budget=compare.BUDGET - len(rest_json),
            points=points,
            kept=kept,
            prefix=prefix,
        )
        overlay = compare.Overlay(text, [], summary.tags, False, summary.grid, 0, 0, summary.files)
    else:
        overlay = compare.overlay_data(group, labels, budget=compare.BUDGET - len(rest_json), points=points, kept=kept, prefix=prefix)
    # the page's data, {"kind": "compare", **overlay, **rest}, from the two halves (``rest`` is
    # encoded once: for 500 runs that is a third of the data)
    data_json = '{"kind":"compare",' + overlay.text + "," + rest_json[1:]
    crumbs = [("/".join(group.key[: i + 1]), f"../{compare.group_slug(group.key[: i + 1])}/index.html") for i in range(len(group.key) - 1)]
    page = render_page(
        env.get_template("compare.html"),
        data_json,
        **common,
        root="../../",
        assets=assets.urls,
        group=group,
        labels=labels[first:],
        overlay=overlay,
        table=table,
        table_runs=table_runs,
        hcharts=hcharts,
        crumbs=crumbs,
        metrics=metrics,
        run_items=_run_items(overlay),
        summary=summary,
        group_items=_group_items(summary, t) if summary else "",
        table_body=_table_body(table, table_runs, labels[first:], "../../", t),
    )
    return {prefix + "index.html": page, **{prefix + name: data for name, data in overlay.files.items()}}


def _run_items(overlay: compare.Overlay) -> Markup:
    """The run picker's items (``<li>`` per drawn run; the newest ``on`` are checked)."""
    from markupsafe import Markup, escape

    n, on = len(overlay.runs), overlay.on
    return Markup(
        "".join(
            f'<li><label><input type="checkbox" class="run-toggle" data-r="{i}"{" checked" if i >= n - on else ""}> '
            f'{escape(label)}</label> <a href="{escape(href)}">↗</a></li>'
            for i, (label, href) in enumerate(overlay.runs)
        )
    )


def _group_items(summary: bands.Summary, t: Callable) -> Markup:
    """The group picker's items (``<li>`` per group, none ticked): a tick draws its runs."""
    from markupsafe import Markup, escape

    out = []
    for i, g in enumerate(summary.members):
        facts = [t("compare.group_runs", n=len(g.runs))]
        if g.drawn < len(g.runs):
            facts.append(t("compare.group_newest", n=g.drawn))
        if g.nonfinite:
            facts.append(t("compare.group_nonfinite", n=g.nonfinite))
        link = f' <a href="{escape(g.link)}" title="{escape(t("compare.group_page"))}">↗</a>' if g.link else ""
        out.append(
            f'<li><label><input type="checkbox" class="run-toggle group-toggle" data-r="{i}"> {escape(g.name)}</label>'
            f' <span class="muted">({escape(" · ".join(facts))})</span>{link}</li>'
        )
    return Markup("".join(out))


def _table_body(table, table_runs: list[SiteRun], labels: list[str], root: str, t: Callable) -> Markup:
    """The hyperparameter table's rows."""
    from markupsafe import Markup, escape

    pick, best_title = escape(t("compare.pick_for_diff")), escape(t("compare.best"))
    out = []
    for i, (row, run, label) in enumerate(zip(table.rows, table_runs, labels)):
        label = escape(label)
        cells = []
        for c, v in zip(table.columns, row):
            best = c.best is not None and v == c.best
            cls = ("num" if c.numeric else "") + (" best" if best else "")
            if type(v) is float and math.isfinite(v):  # most cells: sort_key and fmt_value, inlined
                key, text = repr(v), f"{v:.6g}"
            elif type(v) is float:  # NaN, inf: their texts need no escaping either
                key, text = sort_key(v), fmt_value(v)
            else:
                key, text = escape(sort_key(v)), escape(fmt_value(v))
            cells.append(
                f'<td data-v="{key}" class="{cls}"'
                + (f' title="{best_title}"' if best else "")
                + f">{text}"
                + (" ★" if best else "")
                + "</td>"
            )
        out.append(
            f'<tr><td><input type="checkbox" class="diff-pick" data-r="{i}" aria-label="{pick}"></td>\n'
            f'<td data-v="{label}"><a href="{escape(root)}runs/{escape(run.slug)}/index.html">{label}</a></td>\n'
            + "".join(cells)
            + "</tr>\n"
        )
    return Markup("".join(out)[:-1])  # the template puts the last line break
