"""Comparison pages: every run of a group (project, model, ... or the whole archive) on one
overlay chart per tag, plus the hyperparameter table, parallel coordinates, scatter plots and
the data for the config diff.

Pages stay light with many runs: each line is thinned again (at most ``MAX_POINTS``, fewer when
the page would pass ``BUDGET`` bytes of data); past a floor of points per line, only the newest
runs are drawn. The page says when either happened. Smoothing, axes and filters run in the
browser (``compare.js``) on this data; the chart spec stays the one shared template.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from sitegen.downsample import downsample
from sitegen.downsample import level_bits as downsample_levels
from sitegen.model import HParamValue, Packed, SiteRun, lower_is_better, slug, text_value
from sitegen.pages.charts import Plain, json_text, numbers
from sitegen.pages.hptable import Table, comparison_table
from sitegen.pages.parallel import parallel_data  # (its MAX_AXES, MAX_RUNS: the parallel coordinates)

log = logging.getLogger(__name__)

BUDGET = 1_900_000  # bytes of page data (the tests hold pages under 2 MB)
MAX_POINTS = 500
MIN_POINTS = 24
LEVELS = (MAX_POINTS, 240, 120, 60, MIN_POINTS)  # resolutions chosen ahead (Series.levels)
BYTES_PER_POINT = 16  # base64 int32 "x", float32 "t" and "y" (5.3 bytes each)
MAX_SCATTER = 8
MAX_TABLE_ROWS = 500  # hyperparameter table (and config diff) rows: the newest runs
DEFAULT_ON = 40  # runs drawn when the page opens (the newest); the rest are a tick away


@dataclass
class Group:
    key: tuple[str, ...]  # () for the whole archive
    slug: str
    runs: list[SiteRun] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "/".join(self.key)


def group_slug(key: tuple[str, ...]) -> str:
    return slug("/".join(key), "group") if key else "all"


def groups(runs: list[SiteRun]) -> list[Group]:
    """The whole archive first, then every prefix of the hierarchy, in sorted order."""
    out: dict[tuple[str, ...], Group] = {(): Group((), "all")}
    for r in runs:
        out[()].runs.append(r)
        for i in range(1, len(r.parts)):
            key = tuple(r.parts[:i])
            group = out.get(key)
            if group is None:  # (its slug hashes its name: once per group, not once per run)
                group = out[key] = Group(key, group_slug(key))
            group.runs.append(r)
    return [out[k] for k in sorted(out, key=lambda k: (len(k) > 0, k))]


def labels(group: Group) -> list[str]:
    """Each run's name below the group, made unique."""
    n = len(group.key)
    seen: dict[str, int] = {}
    out = []
    for r in group.runs:
        label = "/".join(r.parts[n:]) or r.title
        if label in seen:
            seen[label] += 1
            label = f"{label} ({seen[label]})"
        else:
            seen[label] = 1
        out.append(label)
    return out


def level_bits(step: np.ndarray, wall: np.ndarray, value: np.ndarray) -> np.ndarray:
    """For a line of at most ``MAX_POINTS`` points: bit k of a point is set when it is drawn at
    ``LEVELS[k]`` points (thinned by :func:`sitegen.downsample.downsample`, which keeps first,
    last, extremes and non-finite points at every level)."""
    return downsample_levels(step, wall, value, LEVELS)


def _line(ln, n_out: int, start: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """A line's (step, seconds since the run's start, value), thinned to about ``n_out``: to
    the largest level at most ``n_out`` when the line has its levels, else here."""
    s = ln.series
    thinned = s.thinned
    step, wall, value = s.step, s.wall_time, s.value
    if s.levels is not None and len(s.levels) == len(step):
        keep = (s.levels & np.uint8(1 << _level(n_out))) != 0
        if not keep.all():
            step, wall, value, thinned = step[keep], wall[keep], value[keep], True
    elif len(step) > n_out:
        t = downsample(step, wall, value, n_out)
        step, wall, value, thinned = t.step, t.wall_time, t.value, True
    return step, wall - start, value, thinned


def _level(n_out: int) -> int:
    """The largest of :data:`LEVELS` at most ``n_out`` (the smallest when none is)."""
    return next((k for k, n in enumerate(LEVELS) if n <= n_out), len(LEVELS) - 1)


#: a run's points at a level: its chart lines, or (from the store) :class:`Packed`
Points = Callable[[SiteRun, int], Any]


@dataclass(eq=False, repr=False)
class Kept:
    """What the last build left of comparison pages' pieces (see :func:`overlay_data`).

    ``keys``: the input key of each run (by slug) whose points come from the store, ``salt``:
    the code (a piece is reused only with the code that drew it), ``get(slug, key)``: the head
    of a piece of a page kept by the last build (:meth:`Piece.head`), ``put(slug, heads)``: the
    page's piece heads of this build. ``have(rel)``: whether the live build has the piece's file,
    ``link(rel)``: link it into this build (False when that failed); without them no piece is
    taken from the last build. ``load(slug, name)``/``save(slug, name, doc, arrays)``: the
    points a summarised page gathered for one of its groups (:mod:`sitegen.pages.bands`)."""

    keys: dict[str, str]
    salt: str
    get: Callable[[str, str], list | None]
    put: Callable[[str, dict], None]
    have: Callable[[str], bool] | None = None
    link: Callable[[str], bool] | None = None
    load: Callable[[str, str], tuple[dict, dict[str, np.ndarray]] | None] | None = None
    save: Callable[[str, str, dict, dict[str, np.ndarray]], None] | None = None


@dataclass(eq=False, repr=False)
class Overlay:
    """A page's curves: the members of its data object as JSON text (``"runs":[...],"tags":
    [...],"pieces":[...],...``), what its HTML shows of them, and the files of the pieces
    drawn for it (``files``: name in the page's folder -> bytes; ``names``: every piece's file,
    in order: the page loads them as scripts)."""

    text: str
    runs: list[tuple[str, str]]  # (label, link) of each drawn run
    tags: list[tuple[str, int]]  # (tag, number of lines), in chart order
    thinned: bool
    points: int
    dropped: int
    on: int
    files: dict[str, bytes] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)


@dataclass(eq=False, repr=False)
class TagPart:
    """One tag's lines in a piece: their count, and their JSON (``[lines, x, t, y]``) when the
    piece was drawn in this build (``None`` when it was kept from the last one); ``size``: its length."""

    tag: str
    lines: int
    size: int
    text: str | None = None


@dataclass(eq=False, repr=False)
class Piece:
    """A few runs' curves, a script file of their own beside the page: the runs' rows (JSON,
    without brackets), how many runs, whether any line is thinned, each tag's part, and the
    script's name once it is written (or kept from the last build)."""

    runs_text: str
    runs: int
    thinned: bool
    tags: list[TagPart]
    file: str = ""

    @property
    def drawn(self) -> bool:
        """Drawn in this build (its parts' JSON in memory), not yet written."""
        return not self.file

    def head(self) -> list:
        """What the cache keeps of a written piece: ``[run rows, runs, thinned, [[tag, lines,
        size], ...], file name]``."""
        return [self.runs_text, self.runs, self.thinned, [[t.tag, t.lines, t.size] for t in self.tags], self.file]

    @classmethod
    def from_head(cls, head: Any) -> Piece | None:
        """A piece kept by the last build, from :meth:`head`; None when the cache file was
        damaged (its shape is checked, and its name must be a piece's)."""
        ok = (
            type(head) is list
            and len(head) == 5
            and type(head[0]) is str
            and type(head[1]) is int
            and type(head[2]) is bool
            and type(head[3]) is list
            and type(head[4]) is str
            and PIECE_NAME.match(head[4]) is not None
            and all(type(t) is list and len(t) == 3 and type(t[0]) is str and type(t[1]) is int and type(t[2]) is int for t in head[3])
        )
        return cls(head[0], head[1], head[2], [TagPart(t, n, size) for t, n, size in head[3]], head[4]) if ok else None


PIECE_RUNS = 16  # runs per piece of a page's curves at the coarsest level, on average (see _cuts)
MIN_PIECE_RUNS = 8  # ... and at any level
PIECE_PREFIX = "p-"  # a piece's file in its page's folder: p-<key>.js


def _cuts(group: Group, runs: list[int], n_out: int = MIN_POINTS) -> list[list[int]]:
    """The drawn runs cut into pieces where a run's name says so (a hash of its slug), not by
    position: a run added, removed or changed leaves every other piece as it was: ``PIECE_RUNS``
    runs a piece on average at the coarsest level, ``MIN_PIECE_RUNS`` at finer ones (one run a
    piece would make thousands of files for a large archive's pages)."""
    per = max(MIN_PIECE_RUNS, PIECE_RUNS * MIN_POINTS // max(n_out, 1))
    out: list[list[int]] = []
    part: list[int] = []
    for i in runs:
        part.append(i)
        if zlib.crc32(group.runs[i].slug.encode("utf-8", "surrogatepass")) % per == 0 or len(part) >= 2 * per:
            out.append(part)
            part = []
    if part:
        out.append(part)
    return out


def overlay_data(
    group: Group, labels: list[str], *, budget: int = BUDGET, points: Points | None = None, kept: Kept | None = None, prefix: str = ""
) -> Overlay:
    """Per tag, one thinned line per (run, sub-run line), sized to fit ``budget``.

    ``points(run, level)``: the run's points, when the summaries in memory keep only the lines'
    statistics (a large archive's points stay in the store, one run at a time here): its chart
    lines, or its lines at that level as :class:`Packed`.

    The curves come in pieces of a few runs each (:func:`_cuts`), each piece a script file of
    its own beside the page (its lines and their points per tag) and the page's data its run
    rows and where each tag's parts are: with ``kept``, a piece whose runs did not change since
    the last build is linked from the live build (``prefix``: the page's folder) and not drawn,
    read or written: a nightly build that appended to a few logs redraws only their pieces."""
    points = points or (lambda r, level: r.lines)
    runs = list(range(len(group.runs)))
    lines_per_run = [sum(1 for _ in r.lines) for r in group.runs]
    total_lines = sum(lines_per_run) or 1
    budget = max(budget, 200_000)
    n_out = int(min(MAX_POINTS, budget / (total_lines * BYTES_PER_POINT)))
    dropped = 0
    if n_out < MIN_POINTS:  # too many lines even at the floor: draw the newest runs only
        n_out = MIN_POINTS
        room = budget / (MIN_POINTS * BYTES_PER_POINT)
        keep: list[int] = []
        used = 0
        for i in reversed(runs):
            if used + lines_per_run[i] > room:
                break
            keep.append(i)
            used += lines_per_run[i]
        dropped = len(runs) - len(keep)
        runs = sorted(keep)
    drawn: dict[Any, Piece] = {}
    parts = _cuts(group, runs, n_out)
    while True:
        keyed = [_piece(group, labels, part, n_out, points, kept, drawn, prefix) for part in parts]
        text, tags, size = _assemble([p for _, p in keyed])
        if size <= budget * 0.9 or n_out <= MIN_POINTS:
            break
        n_out = max(MIN_POINTS, int(n_out * budget * 0.85 / size))
    files: dict[str, bytes] = {}  # the pieces drawn: their files
    heads: dict[str, list] = {}
    final: list[Piece] = []
    for (key, piece), part in zip(keyed, parts):
        if not piece.drawn and not (kept is not None and kept.link is not None and kept.link(prefix + piece.file)):
            piece = _draw(group, labels, part, n_out, points)  # the live build lost its file meanwhile
        if piece.drawn:
            name, data = _piece_file(piece)
            files[name] = data
            piece = Piece(piece.runs_text, piece.runs, piece.thinned, [TagPart(t.tag, t.lines, t.size) for t in piece.tags], name)
        if key is not None:
            heads[key] = piece.head()
        final.append(piece)
    if kept is not None:
        kept.put(group.slug, heads)
    names = [p.file for p in final]
    on = min(DEFAULT_ON, len(runs))
    thinned = any(p.thinned for p in final)
    text += f',"pieces":{json_text(names)},"thinned":{json.dumps(thinned)},"points":{n_out},"dropped":{dropped},"on":{on}'
    drawn_runs = [(labels[i], f"../../runs/{group.runs[i].slug}/index.html") for i in runs]
    return Overlay(text, drawn_runs, tags, thinned, n_out, dropped, on, files, names)


def _piece(
    group: Group, labels: list[str], part: list[int], n_out: int, points: Points, kept: Kept | None, drawn: dict, prefix: str
) -> tuple[str | None, Piece]:
    """One piece of the curves and its key when its runs' points are in the store (they then
    depend only on the runs' inputs, the labels and the level): drawn here, or kept by the last
    build when its file is still in the live build."""
    key = None
    if kept is not None:
        run_keys = [kept.keys.get(group.runs[i].slug) for i in part]
        if None not in run_keys:
            doc = [kept.salt, _level(n_out), [[group.runs[i].slug, k, labels[i]] for i, k in zip(part, run_keys)]]
            key = hashlib.sha256(json.dumps(doc).encode("utf-8", "surrogatepass")).hexdigest()
            got = drawn.get(key)
            if got is None and kept.have is not None:
                got = Piece.from_head(kept.get(group.slug, key))
                if got is not None and not kept.have(prefix + got.file):
                    got = None
            if got is not None:
                drawn[key] = got
                return key, got
    memo = (n_out, tuple(part))
    if key is None and memo in drawn:
        return None, drawn[memo]
    piece = drawn[key if key is not None else memo] = _draw(group, labels, part, n_out, points)
    return key, piece


def _draw(group: Group, labels: list[str], part: list[int], n_out: int, points: Points) -> Piece:
    data = _overlay(group, labels, part, n_out, points)
    tags = []
    for tg in data["tags"]:
        text = json_text([tg["lines"], tg["x"], tg["t"], tg["y"]])
        tags.append(TagPart(tg["tag"], len(tg["lines"]), len(text), text))
    return Piece(json_text(data["runs"])[1:-1], len(part), data["thinned"], tags)


PIECE_NAME = re.compile(rf"^{PIECE_PREFIX}[0-9a-f]{{32}}\.js$")


def _piece_file(piece: Piece) -> tuple[str, bytes]:
    """A drawn piece's script, named by its content (a site does not depend on the cache): it
    files the piece's parts, ``[[tag, [lines, x, t, y]], ...]``, under its name in
    ``window.SITEGEN_PIECES`` (scripts, not data: a page opened from disk cannot fetch files;
    classic scripts load over ``file://``)."""
    body = ",".join(f"[{json_text(t.tag)},{t.text}]" for t in piece.tags).encode("utf-8", "surrogatepass")
    name = f"{PIECE_PREFIX}{hashlib.sha256(body).hexdigest()[:32]}.js"
    head = f'window.SITEGEN_PIECES=window.SITEGEN_PIECES||{{}};window.SITEGEN_PIECES["{name}"]=['
    return name, b"".join((head.encode("ascii"), body, b"];\n"))


def _assemble(pieces: list[Piece]) -> tuple[str, list[tuple[str, int]], int]:
    """The pieces as one page's ``"runs":[...],"tags":[...]``: per tag (sorted), the pieces
    that have it, with the index of each piece's first run (``base``) and where the tag's part
    is (``from``: [piece, position in it]), decoded by ``initCompare`` in ``compare.js``; the tags
    and their line counts; and the page's data bytes with its pieces'."""
    by_tag: dict[str, tuple[list[int], list[list[int]], list[int]]] = {}
    base = 0
    size = 0
    for k, piece in enumerate(pieces):
        for pos, part in enumerate(piece.tags):
            bases, where, counts = by_tag.setdefault(part.tag, ([], [], []))
            bases.append(base)
            where.append([k, pos])
            counts.append(part.lines)
            size += part.size
        base += piece.runs
    names = sorted(by_tag, key=str)
    tags_text = ",".join(f'{{"tag":{json_text(t)},"base":{json.dumps(by_tag[t][0])},"from":{json.dumps(by_tag[t][1])}}}' for t in names)
    runs_text = ",".join(p.runs_text for p in pieces if p.runs)
    text = f'"runs":[{runs_text}],"tags":[{tags_text}]'
    return text, [(t, sum(by_tag[t][2])) for t in names], size + len(text)


def _overlay(group: Group, labels: list[str], runs: list[int], n_out: int, points: Points) -> dict[str, Any]:
    """Per tag: the lines of ``runs`` (a piece of the page: run index in the piece, label,
    point count) and their points as one column per field, so a piece of hundreds of lines
    costs three encodings per tag, not three per line. The
    points of every line are laid end to end first and each tag's columns taken in one gather:
    per line, a page of 500 runs spent more on slicing and joining than on encoding."""
    thinned_any = False
    run_rows = Plain()
    level = _level(n_out)
    steps: list[np.ndarray] = []  # each run's (or line's) points, laid end to end
    rels: list[np.ndarray] = []
    values: list[np.ndarray] = []
    line_tag: list[str] = []
    line_rec: list[dict[str, Any]] = []
    line_at: list[int] = []  # where each line's points start, end to end
    line_n: list[int] = []
    at = 0
    for i in runs:
        r = group.runs[i]
        start = r.start_time if r.start_time is not None and math.isfinite(r.start_time) else 0.0
        run_rows.append({"n": labels[i], "h": f"../../runs/{r.slug}/index.html", "w0": round(start, 3)})
        got = points(r, level)
        if isinstance(got, Packed):  # one run's lines as flat columns, already at the level
            steps.append(got.step)
            rels.append(got.wall - start)
            values.append(got.value)
            spans = [(at + a, b - a, t) for a, b, t in zip(got.bounds[:-1], got.bounds[1:], got.thinned)]
            at += len(got.step)
        else:
            spans = []
            for ln in got:
                step, rel, value, thinned = _line(ln, n_out, start)
                steps.append(step)
                rels.append(rel)
                values.append(value)
                spans.append((at, len(step), thinned))
                at += len(step)
        for ln, (a, n, thinned) in zip(r.lines, spans):
            thinned_any |= thinned
            name = labels[i] if ln.label in ("", "hparams") else f"{labels[i]} · {ln.label}"
            line_tag.append(ln.tag)
            line_rec.append({"r": len(run_rows) - 1, "s": name, "n": n})
            line_at.append(a)
            line_n.append(n)
    tags = []
    if line_tag:
        names = sorted(set(line_tag), key=str)
        rank = {t: k for k, t in enumerate(names)}
        codes = np.array([rank[t] for t in line_tag], np.int64)
        order = np.argsort(codes, kind="stable")  # by tag, run order kept
        sizes = np.array(line_n, np.int64)[order]
        first = np.array(line_at, np.int64)[order]
        ends = np.cumsum(sizes)
        idx = np.repeat(first - (ends - sizes), sizes) + np.arange(int(ends[-1]))  # each line's points, in that order
        x = np.concatenate(steps).astype(np.int64)[idx]
        # seconds since the run's start: float32 is plenty for a time axis; NaN wall times
        # (CSV without a time column) have no place on time axes
        t = np.concatenate(rels).astype(np.float64)[idx]
        y = np.concatenate(values).astype(np.float64)[idx]
        bounds = np.concatenate([[0], ends]).tolist()
        counts = np.bincount(codes, minlength=len(names)).tolist()
        lo = k0 = 0
        for tag, c in zip(names, counts):
            hi, k1 = bounds[k0 + c], k0 + c
            tags.append(
                {
                    "tag": tag,
                    "lines": Plain(line_rec[j] for j in order[k0:k1].tolist()),
                    "x": numbers(x[lo:hi]),
                    "t": numbers(t[lo:hi], exact=False),
                    "y": numbers(y[lo:hi]),
                }
            )
            lo, k0 = hi, k1
    return {"runs": run_rows, "tags": tags, "thinned": thinned_any}


def _finals(run: SiteRun) -> tuple[dict[str, float], dict[str, float]]:
    final: dict[str, float] = {}
    best: dict[str, float] = {}
    for ln in run.lines:
        if ln.label not in ("", "hparams") or ln.tag in final:
            continue
        st = ln.series.stats
        final[ln.tag] = st.last_value
        b = st.min_value if lower_is_better(ln.tag) else st.max_value
        if b is not None:
            best[ln.tag] = b
    return final, best


def hparam_section(
    runs: list[SiteRun], labels: list[str], hps: list[dict[str, HParamValue]], metrics: list[str]
) -> tuple[Table, list[dict[str, Any]], list[dict[str, str]]]:
    """The table, the hparam charts' data (parallel coordinates, scatter) and the configs."""
    fb = [_finals(r) for r in runs]
    table = comparison_table(hps, [f for f, _ in fb], [b for _, b in fb], metrics)
    charts: list[dict[str, Any]] = []
    pc = parallel_data(table, runs, labels)
    if pc is not None:
        charts.append(pc)
    hcols = [(i, c) for i, c in enumerate(table.columns) if c.kind == "hparam" and c.numeric]
    mcols = [(i, c) for i, c in enumerate(table.columns) if c.kind == "final"][:2]
    for mi, m in mcols:
        for hi, h in hcols:
            if len(charts) > MAX_SCATTER:
                break
            rows: dict[str, list] = {"x": [], "y": [], "s": []}
            for label, row in zip(labels, table.rows):
                x, y = row[hi], row[mi]
                if isinstance(x, float) and isinstance(y, float) and math.isfinite(x) and math.isfinite(y):
                    rows["x"].append(x)
                    rows["y"].append(y)
                    rows["s"].append(label)
            if len(rows["x"]) >= 2:
                charts.append({"kind": "scatter", "rows": rows, "xt": h.key, "yt": m.key})
    configs = [{k: text_value(v) for k, v in sorted(h.items())} for h in hps]
    return table, charts, configs
