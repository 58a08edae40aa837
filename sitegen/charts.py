"""Chart data: the rows each chart template (:mod:`sitegen.specs`) is filled with.

Templates and data travel separately: templates in one shared script, rows in each page's
data script.

Rows are columnar dicts (``{"x": [...], "y": [...], ...}``) to keep pages small; JSON has no
NaN, so non-finite values travel as ``null`` with a kind flag ``k`` ("nan", "+inf", "-inf") and
are drawn as red rules, never dropped.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def templates(language: str = "en") -> dict[str, dict[str, Any]]:
    """Every chart kind's Vega-Lite template with titles in ``language`` (see :mod:`sitegen.specs`)."""
    from .specs import templates as build

    return build(language)


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
