"""Shared by the readers of other trackers' files: hyperparameter values, summary text, tables."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa

from sitegen.model import RUN_SCALARS_SCHEMA, HParamValue, empty_scalars, numeric_array, remember_tag_groups, strings_from_codes

MAX_HPARAMS = 500


def hparam_value(v: Any) -> HParamValue:
    """A config value as the site keeps it: numbers as floats (exact big ints as text), lists and
    nulls as their JSON text."""
    if isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return float(v) if abs(v) < 2**53 else str(v)
    if isinstance(v, float):
        return v
    return json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)


def flat_hparams(obj: Any, prefix: str = "", out: dict[str, HParamValue] | None = None) -> dict[str, HParamValue]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1.0}`` (at most MAX_HPARAMS keys)."""
    out = {} if out is None else out
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                flat_hparams(v, key, out)
            elif len(out) < MAX_HPARAMS:
                out[key] = hparam_value(v)
    elif prefix and len(out) < MAX_HPARAMS:
        out[prefix] = hparam_value(obj)
    return out


def number(v: Any) -> float | None:
    """A JSON value as a float when it is a number (not a bool); None otherwise."""
    if isinstance(v, float):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    return None


def summary_text(v: Any) -> str:
    """A summary value as shown on the run page: floats to the last digit written."""
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)
    return str(v)


class Columns:
    """Scalars collected row by row, tags as codes: one table at the end."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.codes: list[int] = []
        self.steps: list[int] = []
        self.walls: list[float] = []
        self.values: list[float] = []

    def add(self, tag: str, step: int, wall: float, value: float) -> None:
        code = self.names.get(tag)
        if code is None:
            code = self.names[tag] = len(self.names)
        self.codes.append(code)
        self.steps.append(step)
        self.walls.append(wall)
        self.values.append(value)

    def table(self) -> pa.Table:
        return scalars_table(list(self.names), np.array(self.codes, np.int64), self.steps, self.walls, self.values)


def scalars_table(tags: list[str], codes: np.ndarray, steps: Any, walls: Any, values: Any) -> pa.Table:
    """A run's scalars table from tag codes and the three numeric columns."""
    if not len(codes):
        return empty_scalars()
    table = pa.Table.from_arrays(
        [
            strings_from_codes(tags, codes),
            numeric_array(np.asarray(steps, np.int64), "<i8"),
            numeric_array(np.asarray(walls, np.float64), "<f8"),
            numeric_array(np.asarray(values, np.float64), "<f8"),
        ],
        schema=RUN_SCALARS_SCHEMA,
    )
    used = np.bincount(codes, minlength=len(tags)).all()
    if used:
        remember_tag_groups(table, tags, codes)
    return table
