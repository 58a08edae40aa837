"""The hyperparameter table of a comparison page: varying hyperparameters, final and best
value of each key metric, constant hyperparameters apart."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sitegen.model import HParamValue, lower_is_better, text_value


@dataclass
class Column:
    key: str
    kind: str  # "hparam" or "final" or "best"
    tag: str = ""  # the metric of a final/best column
    lower: bool = False
    numeric: bool = True
    best: float | None = None


@dataclass
class Table:
    columns: list[Column]
    rows: list[list[Any]]  # one list of values per run, aligned with columns
    same: list[tuple[str, str]] = field(default_factory=list)  # (key, value) equal in every run


def comparison_table(
    hps: list[dict[str, HParamValue]], finals: list[dict[str, float]], bests: list[dict[str, float]], metrics: list[str]
) -> Table:
    """Runs x (varying hparams + final and best value of each metric); constant hparams apart."""
    keys = sorted({k for h in hps for k in h}, key=str)
    columns: list[Column] = []
    same: list[tuple[str, str]] = []
    for k in keys:
        values = [h.get(k) for h in hps]
        texts = {text_value(v) if k in h else "\x00missing" for h, v in zip(hps, values)}
        if len(texts) == 1 and len(hps) > 1:
            same.append((k, text_value(values[0])))
            continue
        numeric = all(isinstance(v, float) for v in values if v is not None)
        columns.append(Column(k, "hparam", numeric=numeric))
    for m in metrics:
        lower = lower_is_better(m)
        columns.append(Column(m, "final", m, lower))
        columns.append(Column(m, "best", m, lower))
    rows: list[list[Any]] = []
    for h, fin, bst in zip(hps, finals, bests):
        row: list[Any] = []
        for c in columns:
            row.append(h.get(c.key) if c.kind == "hparam" else (fin if c.kind == "final" else bst).get(c.tag))
        rows.append(row)
    for i, c in enumerate(columns):
        if c.kind == "hparam":
            continue
        vals = [r[i] for r in rows if isinstance(r[i], float) and math.isfinite(r[i])]
        if vals and len(rows) > 1:
            c.best = min(vals) if c.lower else max(vals)
    return Table(columns, rows, same)
