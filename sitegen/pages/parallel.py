"""The data of a comparison page's parallel coordinates (drawn and brushed by ``hparams.js``):
one axis per varying hyperparameter, then the chosen metric as the last axis.

Values go out raw (numbers, or category texts for strings and booleans) with each run's slug, so
the page can tell which overlay runs a brush keeps. Every final-metric column with a value is
offered as the last axis; the first one (the first ``[index] key_metrics`` present) is the default.
"""

from __future__ import annotations

import math
from typing import Any

from sitegen.model import SiteRun, text_value
from sitegen.pages.hptable import Table

MAX_AXES = 12  # hyperparameter axes plus the metric axis
MAX_RUNS = 500  # lines drawn (the newest runs); drawn as plain SVG paths, 500 take ~50 ms


def _number(v: Any) -> float | None:
    return v if isinstance(v, float) and math.isfinite(v) else None


def parallel_data(table: Table, runs: list[SiteRun], labels: list[str]) -> dict[str, Any] | None:
    """``{"kind": "parallel", "runs", "s", "n", "axes", "metrics"}``, or None when there is
    nothing to draw (fewer than two runs, or not one hyperparameter axis and one metric)."""
    first = max(0, len(table.rows) - MAX_RUNS)
    rows = table.rows[first:]
    if len(rows) < 2:
        return None
    axes: list[dict[str, Any]] = []
    metrics: list[dict[str, Any]] = []
    for ci, col in enumerate(table.columns):
        vals = [r[ci] for r in rows]
        if col.kind == "final":
            nums = [_number(v) for v in vals]
            if any(v is not None for v in nums):
                metrics.append({"key": col.key, "lower": col.lower, "v": nums})
        elif col.kind == "hparam" and any(v is not None for v in vals):
            if col.numeric:
                axes.append({"key": col.key, "cat": False, "v": [_number(v) for v in vals]})
            else:
                axes.append({"key": col.key, "cat": True, "v": [None if v is None else text_value(v) for v in vals]})
    hp_axes = MAX_AXES - 1 if metrics else MAX_AXES
    if not axes or len(axes) + len(metrics[:1]) < 2:
        return None
    return {
        "kind": "parallel",
        "runs": len(rows),
        "axes_total": len(axes),
        "s": [r.slug for r in runs[first:]],
        "n": labels[first:],
        "axes": axes[:hp_axes],
        "metrics": metrics,
    }
