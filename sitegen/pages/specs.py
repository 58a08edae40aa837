"""Chart templates: one Vega-Lite spec per chart kind, authored once with altair.

Building a full altair chart per series would be slow; instead each kind's spec is built once
(with a named data source) and the browser swaps in each chart's rows (see :mod:`sitegen.pages.charts`).
Importing altair is slow too, so this module is imported only when the cache holds no built copy
of the templates (:mod:`sitegen.pages.assets` keeps them keyed by this file and the catalog).
"""

from __future__ import annotations

import functools
from typing import Any

import altair as alt

from sitegen.pages.i18n import translator

WIDTH, HEIGHT = 520, 240
DATA = alt.NamedData(name="rows")


def _scalar(t) -> dict[str, Any]:
    base = alt.Chart(DATA)
    x = alt.X("x:Q", title=t("chart.step"), axis=alt.Axis(format="~s"))
    line = (
        base.mark_line(interpolate="linear", strokeWidth=1.5, point=False)
        .transform_filter("datum.k == ''")
        .encode(
            x=x,
            y=alt.Y("y:Q", title=None, scale=alt.Scale(zero=False)),
            color=alt.Color("s:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=240)),
            detail="s:N",
            tooltip=[
                alt.Tooltip("s:N", title=t("chart.series")),
                alt.Tooltip("x:Q", title=t("chart.step")),
                alt.Tooltip("y:Q", title=t("chart.value"), format=".6~g"),
            ],
        )
    )
    marks = (
        base.mark_rule(color="#d62728", strokeDash=[3, 2], strokeWidth=1.5)
        .transform_filter("datum.k != ''")
        .encode(
            x=x,
            tooltip=[
                alt.Tooltip("s:N", title=t("chart.series")),
                alt.Tooltip("x:Q", title=t("chart.step")),
                alt.Tooltip("k:N", title=t("chart.value")),
            ],
        )
    )
    return alt.layer(line, marks).properties(width=WIDTH, height=HEIGHT).to_dict(validate=True)


def _histogram(t) -> dict[str, Any]:
    return (
        alt.Chart(DATA)
        .mark_rect()
        .encode(
            x=alt.X("l:Q", title=t("chart.value")),
            x2="r:Q",
            y=alt.Y("step:O", title=t("chart.step"), sort="descending", axis=alt.Axis(labelOverlap=True)),
            color=alt.Color("c:Q", title=t("chart.count"), scale=alt.Scale(scheme="blues")),
            tooltip=[
                alt.Tooltip("step:O", title=t("chart.step")),
                alt.Tooltip("l:Q", title=t("chart.from")),
                alt.Tooltip("r:Q", title=t("chart.to")),
                alt.Tooltip("c:Q", title=t("chart.count")),
            ],
        )
        .properties(width=WIDTH, height=HEIGHT)
        .to_dict(validate=True)
    )


def _curve(t) -> dict[str, Any]:
    return (
        alt.Chart(DATA)
        .mark_line(point=False)
        .encode(
            x=alt.X("x:Q", title=t("chart.recall"), scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("y:Q", title=t("chart.precision"), scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("step:O", title=t("chart.step")),
            order="o:Q",
            tooltip=[alt.Tooltip("step:O", title=t("chart.step")), alt.Tooltip("x:Q", format=".3f"), alt.Tooltip("y:Q", format=".3f")],
        )
        .properties(width=360, height=300)
        .to_dict(validate=True)
    )


def _overlay(t) -> dict[str, Any]:
    """Lines of runs (comparison pages) or series (run pages): smoothed ``y`` over a faint ``raw``,
    red rules where a value is NaN/±inf (``k``), lines broken there. ``charts.js`` sets the
    colours, the x field's type and title, the y scale type, and drives the params: ``xd``/``yd``
    (zoom, outlier-free y range), ``hl`` (the highlighted run); its own tooltip lists every run."""
    base = alt.Chart(DATA)
    hl = alt.param(name="hl", value="")
    xd = alt.param(name="xd", value=[0, 1])
    yd = alt.param(name="yd", value=[0, 1])
    x = alt.X("x:Q", title=t("chart.step"), axis=alt.Axis(format="~s"), scale=alt.Scale(domain=xd, nice=False))
    y_scale = alt.Scale(domain=yd, nice=False, zero=False)
    legend = alt.Legend(orient="bottom", columns=2, labelLimit=260, symbolLimit=40, symbolOpacity=1, title=None)
    lit = "hl == '' || datum.s == hl"
    raw = (
        base.mark_line(strokeWidth=1, interpolate="linear", clip=True)
        .encode(
            x=x,
            y=alt.Y("raw:Q", title=None, scale=y_scale),
            color=alt.Color("s:N", legend=legend),
            detail="s:N",
            opacity=alt.condition(lit, alt.value(0.22), alt.value(0.03)),
        )
        .properties(name="raw")
    )
    # a selection bound to the legend only makes its entries clickable (Vega-Lite leaves a
    # legend without one deaf to the pointer); charts.js reads the click, the lines ignore it
    pick = alt.selection_point(fields=["s"], bind="legend", name="pick")
    smooth = (
        base.mark_line(strokeWidth=1.6, interpolate="linear", clip=True)
        .add_params(pick)
        .encode(
            x=x,
            y=alt.Y("y:Q", title=None, scale=y_scale),
            color=alt.Color("s:N", legend=legend),
            detail="s:N",
            opacity=alt.condition(lit, alt.value(1.0), alt.value(0.1)),
        )
        .properties(name="smooth")
    )
    marks = (
        base.mark_rule(color="#d62728", strokeDash=[3, 2], strokeWidth=1.5, clip=True)
        .transform_filter("datum.k != ''")
        .encode(x=x, opacity=alt.condition(lit, alt.value(0.9), alt.value(0.15)))
        .properties(name="nonfinite")
    )
    spec = alt.layer(raw, smooth, marks).add_params(hl, xd, yd).properties(width=WIDTH, height=HEIGHT).to_dict(validate=True)
    for layer in spec["layer"][:2]:
        layer["mark"]["invalid"] = "break-paths-show-domains"  # a NaN breaks the line, never bridged
    return spec


def _scatter(t) -> dict[str, Any]:
    """One metric against one hyperparameter; the page script sets the axis titles."""
    return (
        alt.Chart(DATA)
        .mark_point(filled=True, size=60)
        .encode(
            x=alt.X("x:Q", title="x", scale=alt.Scale(zero=False)),
            y=alt.Y("y:Q", title="y", scale=alt.Scale(zero=False)),
            color=alt.Color("s:N", legend=None),
            tooltip=[alt.Tooltip("s:N", title=t("chart.run")), alt.Tooltip("x:Q", format=".6~g"), alt.Tooltip("y:Q", format=".6~g")],
        )
        .properties(width=300, height=220)
        .to_dict(validate=True)
    )


def _trend(t) -> dict[str, Any]:
    """A trend: each run's last value (a dot linking to the run) and best value (a ring) at its
    start time, change points (red rules, under the dots: the first run of a level stays
    clickable) and the current baseline band."""
    base = alt.Chart(DATA)
    x = alt.X("x:T", title=t("chart.start"), scale=alt.Scale(type="utc"))
    y = alt.Y("y:Q", title=None, scale=alt.Scale(zero=False))
    tip = [
        alt.Tooltip("s:N", title=t("chart.run")),
        alt.Tooltip("x:T", title=t("chart.start"), format="%Y-%m-%d %H:%M", formatType="utc"),
        alt.Tooltip("y:Q", title=t("chart.value"), format=".6~g"),
    ]
    band = base.mark_rect(opacity=0.15, color="#1f77b4").transform_filter("datum.k == 'band'").encode(x=x, x2="x2:T", y=y, y2="y2:Q")
    line = base.mark_line(color="#1f77b4", strokeWidth=1, opacity=0.6).transform_filter("datum.k == 'final'").encode(x=x, y=y)
    best = base.mark_point(filled=False, color="#7f7f7f", size=36).transform_filter("datum.k == 'best'").encode(x=x, y=y, tooltip=tip)
    final = (
        base.mark_circle(color="#1f77b4", size=44, opacity=1)
        .transform_filter("datum.k == 'final'")
        .encode(x=x, y=y, href="u:N", tooltip=tip)
    )
    change = base.mark_rule(color="#d62728", strokeDash=[4, 3], strokeWidth=1.5).transform_filter("datum.k == 'change'").encode(x=x)
    return alt.layer(band, change, line, best, final).properties(width=WIDTH, height=HEIGHT).to_dict(validate=True)


def _trend_commit(t) -> dict[str, Any]:
    """A trend against commits (in the order of their first run; the page script sets the
    domain): each run's last value (a dot linking to the run), its best (a ring), the median of
    each commit's runs (a line), change points and the baseline band over those medians."""
    base = alt.Chart(DATA)
    x = alt.X("c:O", title=t("chart.commit"), scale=alt.Scale(type="point", padding=0.5), axis=alt.Axis(labelAngle=-40, labelLimit=90))
    y = alt.Y("y:Q", title=None, scale=alt.Scale(zero=False))
    tip = [
        alt.Tooltip("s:N", title=t("chart.run")),
        alt.Tooltip("h:N", title=t("chart.hash")),
        alt.Tooltip("g:N", title=t("chart.ref")),
        alt.Tooltip("t:N", title=t("chart.start")),
        alt.Tooltip("y:Q", title=t("chart.value"), format=".6~g"),
    ]
    level_tip = [
        alt.Tooltip("h:N", title=t("chart.hash")),
        alt.Tooltip("g:N", title=t("chart.ref")),
        alt.Tooltip("s:N", title=t("chart.runs")),
        alt.Tooltip("y:Q", title=t("chart.median"), format=".6~g"),
    ]
    band = base.mark_rect(opacity=0.15, color="#1f77b4").transform_filter("datum.k == 'band'").encode(x=x, x2="c2:O", y=y, y2="y2:Q")
    line = base.mark_line(color="#1f77b4", strokeWidth=1, opacity=0.6).transform_filter("datum.k == 'level'").encode(x=x, y=y)
    level = (
        base.mark_tick(color="#1f77b4", thickness=2, size=14, opacity=0.8)
        .transform_filter("datum.k == 'level'")
        .encode(x=x, y=y, tooltip=level_tip)
    )
    best = base.mark_point(filled=False, color="#7f7f7f", size=36).transform_filter("datum.k == 'best'").encode(x=x, y=y, tooltip=tip)
    final = (
        base.mark_circle(color="#1f77b4", size=44, opacity=1)
        .transform_filter("datum.k == 'final'")
        .encode(x=x, y=y, href="u:N", tooltip=tip)
    )
    change = base.mark_rule(color="#d62728", strokeDash=[4, 3], strokeWidth=1.5).transform_filter("datum.k == 'change'").encode(x=x)
    return alt.layer(band, change, line, level, best, final).properties(width=WIDTH, height=HEIGHT).to_dict(validate=True)


@functools.cache
def templates(language: str = "en") -> dict[str, dict[str, Any]]:
    """Every chart kind's Vega-Lite template with titles in ``language`` (built once per process).

    ``$schema`` is dropped: it is a URL to another host and the site must name none.
    """
    t = translator(language)
    specs = {
        "scalar": _scalar(t),
        "histogram": _histogram(t),
        "curve": _curve(t),
        "overlay": _overlay(t),
        "scatter": _scatter(t),
        "trend": _trend(t),
        "trend_commit": _trend_commit(t),
    }
    for spec in specs.values():
        spec.pop("$schema", None)
    return specs
