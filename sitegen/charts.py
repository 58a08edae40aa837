"""Chart specs: one Vega-Lite template per chart kind, authored once with altair.

Building a full altair chart per series costs ~28 ms; instead each kind's spec is built once
(with a named data source) and the browser swaps in each chart's rows. Templates and data
travel separately: templates in one shared script, rows in each page's data script.

Rows are columnar dicts (``{"x": [...], "y": [...], ...}``) to keep pages small; JSON has no
NaN, so non-finite values travel as ``null`` with a kind flag ``k`` ("nan", "+inf", "-inf") and
are drawn as red rules, never dropped.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import altair as alt
import numpy as np

from .i18n import translator

DATA = alt.NamedData(name="rows")
WIDTH, HEIGHT = 520, 240


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
            tooltip=[alt.Tooltip("s:N", title=t("chart.series")), alt.Tooltip("x:Q", title=t("chart.step")), alt.Tooltip("y:Q", title=t("chart.value"), format=".6~g")],
        )
    )
    marks = (
        base.mark_rule(color="#d62728", strokeDash=[3, 2], strokeWidth=1.5)
        .transform_filter("datum.k != ''")
        .encode(
            x=x,
            tooltip=[alt.Tooltip("s:N", title=t("chart.series")), alt.Tooltip("x:Q", title=t("chart.step")), alt.Tooltip("k:N", title=t("chart.value"))],
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
            tooltip=[alt.Tooltip("step:O", title=t("chart.step")), alt.Tooltip("l:Q", title=t("chart.from")), alt.Tooltip("r:Q", title=t("chart.to")), alt.Tooltip("c:Q", title=t("chart.count"))],
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
    """Every run of a group as a line: smoothed ``y`` over a faint ``raw``; click the legend to
    highlight a run. The page script switches the x field's type/title and the y scale type."""
    base = alt.Chart(DATA)
    pick = alt.selection_point(fields=["s"], bind="legend", name="pick")
    x = alt.X("x:Q", title=t("chart.step"), axis=alt.Axis(format="~s"))
    legend = alt.Legend(orient="bottom", columns=2, labelLimit=260, symbolLimit=40, symbolOpacity=1, title=None)
    raw = base.mark_line(strokeWidth=1, interpolate="linear").encode(
        x=x, y=alt.Y("raw:Q", title=None, scale=alt.Scale(zero=False)),
        color=alt.Color("s:N", legend=legend), detail="s:N",
        opacity=alt.condition(pick, alt.value(0.22), alt.value(0.03)),
    ).properties(name="raw")
    smooth = base.mark_line(strokeWidth=1.6, interpolate="linear").add_params(pick).encode(
        x=x, y=alt.Y("y:Q", title=None, scale=alt.Scale(zero=False)),
        color=alt.Color("s:N", legend=legend), detail="s:N",
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.08)),
        tooltip=[alt.Tooltip("s:N", title=t("chart.run")), alt.Tooltip("x:Q", title=t("chart.x")),
                 alt.Tooltip("y:Q", title=t("chart.smoothed"), format=".6~g"), alt.Tooltip("raw:Q", title=t("chart.value"), format=".6~g")],
    ).properties(name="smooth")
    return alt.layer(raw, smooth).properties(width=WIDTH, height=HEIGHT).to_dict(validate=True)


def _parallel(t) -> dict[str, Any]:
    """Parallel coordinates from pre-normalised rows: one line per run across the axes ``k``."""
    return (
        alt.Chart(DATA)
        .mark_line(strokeWidth=1.4, opacity=0.8, point=True)
        .encode(
            x=alt.X("k:N", title=None, sort=alt.EncodingSortField("o"), axis=alt.Axis(labelAngle=-30, labelLimit=160)),
            y=alt.Y("v:Q", title=None, axis=alt.Axis(labels=False, ticks=False)),
            color=alt.Color("s:N", legend=alt.Legend(orient="bottom", columns=2, labelLimit=260, symbolLimit=40, title=None)),
            detail="s:N",
            order="o:Q",
            tooltip=[alt.Tooltip("s:N", title=t("chart.run")), alt.Tooltip("k:N", title=t("chart.axis")), alt.Tooltip("raw:N", title=t("chart.value"))],
        )
        .properties(width=WIDTH + 200, height=HEIGHT + 40)
        .to_dict(validate=True)
    )


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


@functools.cache
def templates(language: str = "en") -> dict[str, dict[str, Any]]:
    """Every chart kind's Vega-Lite template with titles in ``language`` (built once per process).

    ``$schema`` is dropped: it is a URL to another host and the site must name none.
    """
    t = translator(language)
    specs = {"scalar": _scalar(t), "histogram": _histogram(t), "curve": _curve(t), "overlay": _overlay(t),
             "parallel": _parallel(t), "scatter": _scatter(t)}
    for spec in specs.values():
        spec.pop("$schema", None)
    return specs


def json_number(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def nonfinite_kind(values: np.ndarray) -> list[str]:
    out = np.full(len(values), "", dtype=object)
    out[np.isnan(values)] = "nan"
    out[np.isposinf(values)] = "+inf"
    out[np.isneginf(values)] = "-inf"
    return out.tolist()


def run_length(values: list) -> dict[str, list]:
    """``{"rl": [[value, count], ...]}``: labels and flags repeat for every point otherwise."""
    out: list[list] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return {"rl": out}


def round_sig(values: np.ndarray, digits: int = 7) -> list:
    """Values to ``digits`` significant digits (short JSON; f32 data holds ~7), None for non-finite.

    Vectorized: values are rounded in groups of equal decimal exponent."""
    v = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(v)
    out = v.copy()
    nz = finite & (v != 0)
    if nz.any():
        exp = np.zeros(len(v), dtype=np.int64)
        exp[nz] = np.floor(np.log10(np.abs(v[nz]))).astype(np.int64)
        for e in np.unique(exp[nz]).tolist():
            sel = nz & (exp == e)
            decimals = digits - 1 - e
            r = np.round(v[sel], decimals) if -300 < decimals < 300 else v[sel]
            out[sel] = np.where(np.isfinite(r), r, v[sel])
    if finite.all():
        return out.tolist()
    return [x if f else None for x, f in zip(out.tolist(), finite.tolist())]


def scalar_rows(series: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """Columnar rows for a scalar chart from (label, step, wall_time, value) per line; labels
    and non-finite flags run-length encoded, values to 7 significant digits (the exact values
    are in the page's stats table and the CSV/Parquet downloads)."""
    cols: dict[str, list] = {"x": [], "y": [], "w": []}
    labels: list[str] = []
    kinds: list[str] = []
    for label, step, wall, value in series:
        cols["x"] += step.tolist()
        cols["y"] += round_sig(value)
        w = np.round(wall, 3)
        cols["w"] += w.tolist() if np.isfinite(w).all() else [x if np.isfinite(x) else None for x in w.tolist()]
        labels += [label] * len(step)
        kinds += [""] * len(step) if np.isfinite(value).all() else nonfinite_kind(value)
    return {**cols, "s": run_length(labels), "k": run_length(kinds)}


def histogram_rows(items: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]) -> dict[str, list]:
    cols: dict[str, list] = {"step": [], "l": [], "r": [], "c": []}
    for step, left, right, count in items:
        ok = np.isfinite(left) & np.isfinite(right) & np.isfinite(count)
        cols["step"] += [step] * int(ok.sum())
        cols["l"] += left[ok].tolist()
        cols["r"] += right[ok].tolist()
        cols["c"] += count[ok].tolist()
    return cols


def curve_rows(items: list[tuple[int, np.ndarray, np.ndarray]]) -> dict[str, list]:
    cols: dict[str, list] = {"step": [], "x": [], "y": [], "o": []}
    for step, x, y in items:
        ok = np.isfinite(x) & np.isfinite(y)
        cols["step"] += [step] * int(ok.sum())
        cols["x"] += x[ok].tolist()
        cols["y"] += y[ok].tolist()
        cols["o"] += list(range(int(ok.sum())))
    return cols
