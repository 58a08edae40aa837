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


def parse_lines(data: bytes, path: str, problems: list[Problem], *, live_tail: bool = False) -> tuple[list[tuple[int, Any]], int]:
    """``([(byte offset, value), ...], end)``: the value of every line that parses, and the end
    of the last complete line. A last line without its newline that does not parse is cut
    short: with ``live_tail`` (a writer may still be appending) it is only logged, else it is a
    ``truncated`` problem. A bad line elsewhere is a ``bad-record`` problem; reading goes on."""
    out: list[tuple[int, Any]] = []
    bad: list[int] = []
    at, n = 0, len(data)
    end = 0
    while at < n:
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


def pick_lines(data: bytes, prefix: bytes, suffix: bytes = b"") -> tuple[bytes, bytes]:
    """``(picked, rest)``: the complete lines of ``data`` that start with ``prefix`` and end with
    ``suffix`` (before the newline), one after
    another (for one bulk parse, e.g. ``pyarrow.json``), and ``data`` with those lines blanked
    (spaces: the other lines keep their offsets for :func:`parse_lines`). Lines are found and
    told apart by numpy over the whole buffer; runs of picked lines are cut out as slices."""
    buf = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(buf == 10)  # each complete line's newline
    size = len(prefix)
    if not len(ends) or len(data) < size:
        return b"", data
    starts = np.concatenate([[0], ends[:-1] + 1])
    heads = np.ndarray((len(data) - size + 1,), f"S{size}", buffer=data, strides=(1,))
    fits = starts + size <= ends
    match = fits & (heads[np.where(fits, starts, 0)] == prefix)
    if suffix:
        tails = np.ndarray((len(data) - len(suffix) + 1,), f"S{len(suffix)}", buffer=data, strides=(1,))
        fits = starts + size + len(suffix) <= ends
        match &= fits & (tails[np.where(fits, ends - len(suffix), 0)] == suffix)
    match = np.flatnonzero(match)
    if not len(match):
        return b"", data
    cut = np.flatnonzero(np.diff(match) != 1) + 1  # runs of consecutive picked lines
    first, last = match[np.concatenate([[0], cut])].tolist(), match[np.concatenate([cut - 1, [len(match) - 1]])].tolist()
    lo, hi = starts[first].tolist(), (ends[last] + 1).tolist()
    picked = b"".join(data[a:b] for a, b in zip(lo, hi))
    rest = bytearray(data)
    for a, b in zip(lo, hi):
        rest[a : b - 1] = b" " * (b - 1 - a)
    return picked, bytes(rest)
