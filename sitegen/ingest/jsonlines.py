"""JSON-lines logs of other trackers (Comet messages, ClearML events, Neptune operations):
every line that parses is kept, each damaged line is one problem with its byte offset."""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np

from sitegen.errors import Problem

log = logging.getLogger(__name__)

MAX_REPORTED = 20  # damaged lines reported one by one; the rest summed up in one more problem


def parse_lines(
    data: bytes, path: str, problems: list[Problem], *, live_tail: bool = False, skip: list[tuple[int, int]] | None = None
) -> tuple[list[tuple[int, Any]], int]:
    """``([(byte offset, value), ...], end)``: the value of every line that parses, and the end
    of the last complete line. A last line without its newline that does not parse is cut
    short: with ``live_tail`` (a writer may still be appending) it is only logged, else it is a
    ``truncated`` problem. A bad line elsewhere is a ``bad-record`` problem; reading goes on.
    ``skip``: spans of whole lines (from :func:`pick_lines`) read elsewhere, passed over."""
    out: list[tuple[int, Any]] = []
    bad: list[int] = []
    at, n = 0, len(data)
    end = 0
    spans = iter(skip or ())
    lo, hi = next(spans, (n + 1, n + 1))
    while at < n:
        if at == lo:
            at = end = hi
            lo, hi = next(spans, (n + 1, n + 1))
            continue
        nl = data.find(b"\n", at)
        stop = n if nl < 0 else nl
        line = data[at:stop]
        if line.strip():
            try:
                out.append((at, json.loads(line)))
                end = stop + 1 if nl >= 0 else stop
            except (ValueError, RecursionError):
                if nl < 0:
                    if live_tail:
                        log.info("%s: offset %d: last line incomplete (%d bytes), still being written; not read", path, at, n - at)
                    else:
                        problems.append(Problem(path, at, "truncated", f"last line cut short ({n - at} bytes, no newline); not read"))
                    return out, end
                bad.append(at)
                end = stop + 1
        elif nl >= 0:
            end = stop + 1
        if nl < 0:
            break
        at = nl + 1
    for off in bad[:MAX_REPORTED]:
        problems.append(Problem(path, off, "bad-record", "line is not valid JSON; skipped"))
    if len(bad) > MAX_REPORTED:
        problems.append(Problem(path, bad[MAX_REPORTED], "bad-record", f"{len(bad) - MAX_REPORTED} more lines are not valid JSON; skipped"))
    return out, end


def as_float(v: Any) -> float | None:
    """A logged value as a float: numbers (not bools), and the strings ``NaN``/``Infinity``/
    ``-Infinity`` or any other number written as text; None otherwise."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float):
        return v
    if isinstance(v, int):
        try:
            return float(v)
        except OverflowError:
            return float("inf") if v > 0 else float("-inf")
    if isinstance(v, str) and len(v) < 64:
        try:
            return float(v)
        except ValueError:
            return None
    return None


def as_step(v: Any) -> int | None:
    """A step as an int: whole numbers only (a float step such as ``3.0`` too), within int64."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, int) and -(2**63) <= v < 2**63:
        return v
    return None


def pick_lines(data: bytes, prefix: bytes, suffix: bytes = b"") -> tuple[bytes, list[tuple[int, int]]]:
    """``(picked, spans)``: the complete lines of ``data`` that start with ``prefix`` and end with
    ``suffix`` (before the newline), one after another (for one bulk parse, e.g.
    ``pyarrow.json``), and where they are in ``data`` (runs of them, for :func:`parse_lines` to
    pass over). Lines are found and told apart by numpy over the whole buffer."""
    buf = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(buf == 10)  # each complete line's newline
    size = len(prefix)
    if not len(ends) or len(data) < size + len(suffix):
        return b"", []
    starts = np.concatenate([[0], ends[:-1] + 1])
    heads = np.ndarray((len(data) - size + 1,), f"S{size}", buffer=data, strides=(1,))
    fits = starts + size + len(suffix) <= ends
    match = fits & (heads[np.where(fits, starts, 0)] == prefix)
    if suffix:
        tails = np.ndarray((len(data) - len(suffix) + 1,), f"S{len(suffix)}", buffer=data, strides=(1,))
        match &= fits & (tails[np.where(fits, ends - len(suffix), 0)] == suffix)
    picked = np.flatnonzero(match)
    if not len(picked):
        return b"", []
    cut = np.flatnonzero(np.diff(picked) != 1) + 1  # runs of consecutive picked lines
    first, last = picked[np.concatenate([[0], cut])], picked[np.concatenate([cut - 1, [len(picked) - 1]])]
    spans = list(zip(starts[first].tolist(), (ends[last] + 1).tolist()))
    return b"".join(data[a:b] for a, b in spans), spans
