"""Chart data: the rows each chart template (:mod:`sitegen.pages.specs`) is filled with.

Templates and data travel separately: templates in one shared script, rows in each page's
data script.

Rows are columnar dicts (``{"x": ..., "y": ..., ...}``) to keep pages small and quick to
write: numbers as compact binary or progressions (:func:`numbers`), labels run-length encoded.
Non-finite values become ``null`` in the page with a kind flag ``k`` ("nan", "+inf", "-inf") and
are drawn as red rules, never dropped.
"""

from __future__ import annotations

import base64
import json
import math
import secrets
from typing import Any

import numpy as np


def templates(language: str = "en") -> dict[str, dict[str, Any]]:
    """Every chart kind's Vega-Lite template with titles in ``language`` (see :mod:`sitegen.pages.specs`)."""
    from sitegen.pages.specs import templates as build

    return build(language)


KINDS = ("", "nan", "+inf", "-inf")  # the non-finite flag of a point, by code


def _kind_codes(values: np.ndarray) -> np.ndarray:
    codes = np.zeros(len(values), dtype=np.int8)
    codes[np.isnan(values)] = 1
    codes[np.isposinf(values)] = 2
    codes[np.isneginf(values)] = 3
    return codes


def runs_of(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start index, length) of each run of equal values, vectorized."""
    if len(codes) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.concatenate([[0], np.flatnonzero(codes[1:] != codes[:-1]) + 1])
    return starts, np.diff(np.concatenate([starts, [len(codes)]]))


def run_length(pairs: list[tuple[Any, int]]) -> dict[str, list]:
    """``{"rl": [[value, count], ...]}`` from (value, count) pairs, neighbours merged: labels and
    flags would otherwise repeat for every point."""
    out: list[list] = []
    for v, n in pairs:
        if n <= 0:
            continue
        if out and out[-1][0] == v:
            out[-1][1] += n
        else:
            out.append([v, n])
    return {"rl": out}


class B64(str):
    """Base64 text: nothing in it needs escaping in JSON or in a script, so
    :func:`json_text` copies it as it is (escaping a run's chart data cost more
    than encoding it)."""

    __slots__ = ()


class Plain(list):
    """A list known to hold only plain JSON (no :class:`B64` anywhere in it), so
    :func:`set_aside` passes it without a look: a comparison page's thousands of line records."""

    __slots__ = ()


_PLAIN = frozenset({str, int, float, bool, type(None)})


def set_aside(obj: Any, blobs: list[str], mark: str) -> Any:
    """``obj`` with each B64 string replaced by ``<mark><index>`` (its text appended to
    ``blobs``); lists and dicts of plain values (most of the bulk) are passed through without a copy."""
    kind = type(obj)
    if kind is Plain:
        return obj
    if kind is B64:
        blobs.append(obj)
        return f"{mark}{len(blobs) - 1}"
    if kind is dict:
        if _PLAIN.issuperset(map(type, obj.values())):  # e.g. a comparison page's 5,000 line records
            return obj
        return {k: set_aside(v, blobs, mark) for k, v in obj.items()}
    if kind is list or kind is tuple:
        if _PLAIN.issuperset(map(type, obj)):  # (checked in C: a generator cost 5x more)
            return obj
        return [set_aside(v, blobs, mark) for v in obj]
    return obj


def json_text(obj: Any) -> str:
    """``obj`` as JSON that is safe inside a ``<script>`` element (no ``<``, ``>``, ``&``, U+2028
    or U+2029 but as escapes). :class:`B64` strings are set aside before encoding
    and copied back as they are."""
    blobs: list[str] = []
    mark = secrets.token_hex(8)  # not guessable: no string from a log can forge a placeholder
    text = json.dumps(set_aside(obj, blobs, mark), ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=False)
    for raw, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, esc)
    if blobs:
        head, *rest = text.split(f'"{mark}')
        pieces = [head]
        for part in rest:
            index, tail = part.split('"', 1)
            pieces += ['"', blobs[int(index)], '"', tail]
        text = "".join(pieces)
    return text


def _b64(a: np.ndarray) -> str:
    return B64(base64.b64encode(a.tobytes()).decode("ascii"))


MAX_SAFE_INT = 2**53  # integers a JavaScript number holds exactly


def numbers(values: np.ndarray, *, exact: bool = True) -> Any:
    """A numeric column as page data, compact and cheap to write (JSON of many floats is
    neither): integer progressions as ``{"ap": [first, [[delta, count], ...]]}``
    (steps are nearly always one), other integers as ``{"i4": ...}`` when they fit, other
    numbers as little-endian binary in base64,
    ``{"f4": ...}`` when float32 holds every value exactly (TensorBoard scalars are float32)
    or ``exact=False`` allows rounding, else ``{"f8d": ...}`` (:func:`_f8_split`) or ``{"f8": ...}``. NaN and infinities travel as
    themselves; the page script turns them into ``null``. Decoded by :func:`decode_numbers`
    and by ``expand`` in ``core.js``."""
    v = np.asarray(values)
    if len(v) == 0:
        return []
    if v.dtype.kind in "iub" and len(v) > 1:
        iv = v.astype(np.int64)
        if np.abs(iv).max() < MAX_SAFE_INT:
            d = np.diff(iv)
            starts, counts = runs_of(d)
            if len(starts) * 4 <= len(v):
                # Plain: json_text passes it without a look (thinned steps make thousands of pairs)
                return {"ap": Plain([int(iv[0]), np.stack((d[starts], counts), axis=1).tolist()])}
        if np.abs(iv).max() < 2**31:
            return {"i4": _b64(iv.astype("<i4"))}
    f = np.asarray(v, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f32 = f.astype("<f4")
        fits = _same_floats(f32.astype(np.float64), f)
        if not fits and not exact:
            finite = np.isfinite(f)
            fits = bool(np.all(np.isfinite(f32[finite])))
    if fits:
        return {"f4": _b64(f32)}
    return _f8_split(f) or {"f8": _b64(f.astype("<f8"))}


def _same_floats(a: np.ndarray, b: np.ndarray) -> bool:
    """``np.array_equal(a, b, equal_nan=True)`` for float64 arrays of one length, without the
    NaN masks that one indexes by: equal bits, or NaN on
    both sides where they differ (no two other float64 values that compare equal differ in
    their bits, but 0.0 and -0.0, which float32 keeps apart too)."""
    differ = a.view(np.int64) != b.view(np.int64)
    if not differ.any():
        return True
    k = int(differ.argmax())  # most often a plain difference: no need to look further
    if a[k] != b[k] and not (a[k] != a[k] and b[k] != b[k]):
        return False
    x, y = a[differ], b[differ]
    return bool(np.all((x == y) | (np.isnan(x) & np.isnan(y))))


def _f8_split(f: np.ndarray) -> dict | None:
    """Float64 values whose high 32 bits repeat in long runs (wall times: they change every
    ~17 minutes) as ``{"f8d": [[[high, count], ...], low]}``: the high words run-length
    encoded, the low words as wrapping int32 differences in base64. Half the size of ``f8``
    and exact, bit for bit (NaN payloads too). None when the high words do not repeat."""
    if len(f) < 64:
        return None
    bits = np.ascontiguousarray(f, dtype="<f8").view("<u8")
    high = (bits >> np.uint64(32)).astype(np.uint32)
    starts, counts = runs_of(high)
    if len(starts) * 8 > len(f):
        return None
    low = (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    steps = np.diff(low, prepend=np.uint32(0)).astype("<u4").view("<i4")  # (unsigned: wraps)
    runs = np.stack((high[starts].astype(np.int64), counts.astype(np.int64)), axis=1).tolist()
    return {"f8d": [Plain(runs), _b64(steps)]}


def decode_numbers(col: Any) -> list:
    """The values of a :func:`numbers` column as the page script sees them (None: non-finite)."""
    if isinstance(col, list):
        return col
    if "ap" in col:
        first, pieces = col["ap"]
        d = np.repeat([p[0] for p in pieces], [p[1] for p in pieces]).astype(np.int64)
        return (first + np.concatenate([[0], np.cumsum(d)])).tolist()
    if "i4" in col:
        return np.frombuffer(base64.b64decode(col["i4"]), "<i4").astype(np.int64).tolist()
    if "f8d" in col:
        runs, low = col["f8d"]
        high = np.repeat(np.array([h for h, _ in runs], np.uint64), [c for _, c in runs])
        low = np.cumsum(np.frombuffer(base64.b64decode(low), "<u4").astype(np.uint64)) & np.uint64(0xFFFFFFFF)
        a = ((high << np.uint64(32)) | low).view(np.float64)
        return [x if math.isfinite(x) else None for x in a.tolist()]
    wide = "f8" in col
    a = np.frombuffer(base64.b64decode(col["f8" if wide else "f4"]), "<f8" if wide else "<f4").astype(np.float64)
    return [x if math.isfinite(x) else None for x in a.tolist()]


def scalar_rows(series: list[tuple[str, np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """Columnar rows for a scalar chart from (label, step, value) per line: labels and
    non-finite flags run-length encoded, steps and values as :func:`numbers` (exact; the
    page's stats table and the CSV/Parquet downloads have the full records too)."""
    if not series:
        return {"x": [], "y": [], "s": {"rl": []}, "k": {"rl": []}}
    step = np.concatenate([np.asarray(s, dtype=np.int64) for _, s, _ in series])
    value = np.concatenate([np.asarray(v, dtype=np.float64) for _, _, v in series])
    codes = _kind_codes(value)
    starts, counts = runs_of(codes)
    kinds = run_length([(KINDS[c], n) for c, n in zip(codes[starts].tolist(), counts.tolist())])
    labels = run_length([(label, len(s)) for label, s, _ in series])
    return {"x": numbers(step), "y": numbers(value), "s": labels, "k": kinds}


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
