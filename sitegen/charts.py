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

DATA = alt.NamedData(name="rows")
WIDTH, HEIGHT = 520, 240


def _scalar() -> dict[str, Any]:
    base = alt.Chart(DATA)
    x = alt.X("x:Q", title="step", axis=alt.Axis(format="~s"))
    line = (
        base.mark_line(interpolate="linear", strokeWidth=1.5, point=False)
        .transform_filter("datum.k == ''")
        .encode(
            x=x,
            y=alt.Y("y:Q", title=None, scale=alt.Scale(zero=False)),
            color=alt.Color("s:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=240)),
            detail="s:N",
            tooltip=[alt.Tooltip("s:N", title="series"), alt.Tooltip("x:Q", title="step"), alt.Tooltip("y:Q", title="value", format=".6~g")],
        )
    )
    marks = (
        base.mark_rule(color="#d62728", strokeDash=[3, 2], strokeWidth=1.5)
        .transform_filter("datum.k != ''")
        .encode(
            x=x,
            tooltip=[alt.Tooltip("s:N", title="series"), alt.Tooltip("x:Q", title="step"), alt.Tooltip("k:N", title="value")],
        )
    )
    return alt.layer(line, marks).properties(width=WIDTH, height=HEIGHT).to_dict(validate=True)


def _histogram() -> dict[str, Any]:
    return (
        alt.Chart(DATA)
        .mark_rect()
        .encode(
            x=alt.X("l:Q", title="value"),
            x2="r:Q",
            y=alt.Y("step:O", title="step", sort="descending", axis=alt.Axis(labelOverlap=True)),
            color=alt.Color("c:Q", title="count", scale=alt.Scale(scheme="blues")),
            tooltip=[alt.Tooltip("step:O"), alt.Tooltip("l:Q", title="from"), alt.Tooltip("r:Q", title="to"), alt.Tooltip("c:Q", title="count")],
        )
        .properties(width=WIDTH, height=HEIGHT)
        .to_dict(validate=True)
    )


def _curve() -> dict[str, Any]:
    return (
        alt.Chart(DATA)
        .mark_line(point=False)
        .encode(
            x=alt.X("x:Q", title="recall", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("y:Q", title="precision", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("step:O", title="step"),
            order="o:Q",
            tooltip=[alt.Tooltip("step:O"), alt.Tooltip("x:Q", format=".3f"), alt.Tooltip("y:Q", format=".3f")],
        )
        .properties(width=360, height=300)
        .to_dict(validate=True)
    )


@functools.cache
def templates() -> dict[str, dict[str, Any]]:
    """Every chart kind's Vega-Lite template (built once per process).

    ``$schema`` is dropped: it is a URL to another host and the site must name none.
    """
    specs = {"scalar": _scalar(), "histogram": _histogram(), "curve": _curve()}
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


def scalar_rows(series: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]) -> dict[str, list]:
    """Columnar rows for a scalar chart from (label, step, wall_time, value) per line."""
    cols: dict[str, list] = {"x": [], "y": [], "w": [], "s": [], "k": []}
    for label, step, wall, value in series:
        finite = np.isfinite(value)
        cols["x"] += step.tolist()
        cols["y"] += np.where(finite, value, 0.0).tolist() if finite.all() else [v if f else None for v, f in zip(value.tolist(), finite.tolist())]
        cols["w"] += np.round(wall, 3).tolist()
        cols["s"] += [label] * len(step)
        cols["k"] += [""] * len(step) if finite.all() else nonfinite_kind(value)
    return cols


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
