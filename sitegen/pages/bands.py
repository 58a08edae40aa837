"""Comparison pages of many runs as summaries: per group (the next folder level below the page)
and tag, a median line and a quantile band at aligned steps, plus the group's best run; each
group's own runs are a script beside the page, loaded when it is ticked (``compare.js``).

The band of a group at a step holds each of its runs' value there: the run's last point at or
before that step, none before its first point or after its last. Non-finite values are left out
of the band, and counted so the page can say they exist. Only a run's own line of a tag (not
its sub-runs' lines) is in the band.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sitegen.model import Packed, SiteRun, lower_is_better
from sitegen.pages import compare
from sitegen.pages.charts import json_text, numbers
from sitegen.pages.grid import GRID, QUANTILES, Span, aligned, distinct, grid_of_spans, quantiles

MIN_GRID = 12
CELLS = 8_000_000  # runs x aligned steps sampled at once (float64: 64 MB)
POINTS = 3_000_000  # points read for the whole page at most: picks the level of thinning (each line keeps its extremes)
MAX_GROUPS = 40  # past this, the smallest groups are summarised together as one "other" group
GROUP_SHARE = 4  # a group's own runs, loaded on demand, get a quarter of a page's budget
EXPAND_RUNS = 250  # ... and at most this many of them, the newest (more lines are slow to draw and unreadable)
OWN = "own"  # the key of the group of the page's own runs (in no sub-folder); a slug has no such name
OTHER = "other"
GROUP_PREFIX = "g-"


@dataclass(eq=False, repr=False)
class Member:
    """One group of a summarised page: its runs (indices into the page's), its name, its key
    (in the address's hash, and its colour), the link to its own comparison page."""

    name: str
    key: str
    runs: list[int]
    link: str | None = None
    best: int | None = None  # the run with the best final value of the metric
    nonfinite: int = 0  # runs with NaN/inf in a summarised tag
    file: str = ""
    drawn: int = 0  # of its runs, drawn when it is expanded (the newest that fit its budget)


@dataclass(eq=False, repr=False)
class Summary:
    """What a summarised page shows: its groups, the metric its best runs are chosen by, the
    tags (with how many groups have each), tags left out for the budget, and the steps a tag's
    band has at most."""

    members: list[Member]
    metric: str | None
    tags: list[tuple[str, int]]
    tags_left: int
    grid: int
    runs: int
    nonfinite: int = 0
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass(eq=False, repr=False)
class Digest:
    """What a page needs of a group's points besides its bands, kept so that a rebuild need not
    read an unchanged group's points: per tag its steps' :data:`Span` and its best run's
    ``(step, value)``; how many of its runs hold NaN/inf."""

    spans: dict[str, Span]
    best: dict[str, tuple[np.ndarray, np.ndarray]]
    nonfinite: int


def digest_of(tagged: Tagged, best: int | None) -> Digest:
    """The :class:`Digest` of a group's points (``best``: its best run's index in the group)."""
    spans: dict[str, Span] = {}
    lines: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    bad: set[int] = set()
    for t, (run_of, step, value) in tagged.items():
        u = distinct(step)
        spans[t] = (int(step.min()), int(step.max()), u if len(u) <= GRID else None)
        if best is not None:
            mine = run_of == best
            if mine.any():
                lines[t] = (step[mine], value[mine])
        bad.update(np.unique(run_of[~np.isfinite(value)]).tolist())
    return Digest(spans, lines, len(bad))


def members(group: compare.Group, own_name: str, other_name: str) -> list[Member]:
    """The page's runs by the next folder level below it (a run in no sub-folder: the group
    ``own_name``); past ``MAX_GROUPS``, the smallest groups as one."""
    n = len(group.key)
    by: dict[tuple[str, ...], list[int]] = {}
    for i, r in enumerate(group.runs):
        by.setdefault(tuple(r.parts[: n + 1]) if len(r.parts) > n + 1 else (), []).append(i)
    keys = sorted(by)
    if len(keys) > MAX_GROUPS:
        big = set(sorted(keys, key=lambda k: (-len(by[k]), k))[: MAX_GROUPS - 1])
        rest = sorted(i for k in keys if k not in big for i in by[k])
        keys = [k for k in keys if k in big]
    else:
        rest = []
    out = []
    for k in keys:
        if k:
            out.append(Member(k[-1], compare.group_slug(k), by[k], f"../{compare.group_slug(k)}/index.html"))
        else:
            out.append(Member(own_name, OWN, by[k]))
    if rest:
        out.append(Member(other_name, OTHER, rest))
    return out


#: per tag, ``(run, step, value)`` of each run's own line of it, in run order (``run``: the run's
#: index among those gathered)
Tagged = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]


def gather(runs: list[SiteRun], points: compare.Points, n_out: int) -> Tagged:
    """Per tag, ``(run index, step, value)`` of every run's own line of it, thinned to the level
    nearest ``n_out`` points (a run read once, from memory or from the store). A run's lines are
    picked by index and taken in one go (a few numpy calls a run, not a few a line)."""
    level = compare._level(n_out)
    tag_ids: dict[str, int] = {}
    cols: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # tag id, run, step, value
    for i, r in enumerate(runs):
        got = points(r, level)
        if isinstance(got, Packed):
            bounds = got.bounds
            step_all, value_all = got.step, got.value
        else:
            spans = [compare._line(ln, n_out, 0.0)[::2] for ln in got]
            bounds = [0, *np.cumsum([len(st) for st, _ in spans]).tolist()]
            step_all = np.concatenate([np.asarray(st, np.int64) for st, _ in spans]) if spans else np.zeros(0, np.int64)
            value_all = np.concatenate([np.asarray(v, np.float64) for _, v in spans]) if spans else np.zeros(0)
        seen: set[str] = set()
        starts, sizes, tags = [], [], []
        for j, ln in enumerate(r.lines[: len(bounds) - 1]):
            a, b = bounds[j], bounds[j + 1]
            if ln.label not in ("", "hparams") or ln.tag in seen or b <= a:
                continue
            seen.add(ln.tag)
            starts.append(a)
            sizes.append(b - a)
            tags.append(tag_ids.setdefault(ln.tag, len(tag_ids)))
        if not sizes:
            continue
        n = np.asarray(sizes, np.int64)
        pick = np.repeat(np.asarray(starts, np.int64) - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))
        cols.append((np.repeat(np.asarray(tags, np.int64), n), np.full(len(pick), i, np.int64), step_all[pick], value_all[pick]))
    if not cols:
        return {}
    tag_of = np.concatenate([c[0] for c in cols])
    order = np.argsort(tag_of, kind="stable")  # by tag, each in run order
    run_of = np.concatenate([c[1] for c in cols])[order]
    step = np.concatenate([c[2] for c in cols]).astype(np.int64)[order]
    value = np.concatenate([c[3] for c in cols]).astype(np.float64)[order]
    ends = np.cumsum(np.bincount(tag_of, minlength=len(tag_ids)))
    out = {}
    for t, k in tag_ids.items():
        a, b = (int(ends[k - 1]) if k else 0), int(ends[k])
        out[t] = (run_of[a:b], step[a:b], value[a:b])
    return out


def member_points(group: compare.Group, g: Member, points: compare.Points, n_out: int, kept: compare.Kept | None) -> Tagged:
    """:func:`gather` of a group's runs. Why kept: a rebuild would read every run of the page
    again; with ``kept``, the last build's points of the group are taken for its unchanged runs."""
    runs = [group.runs[i] for i in g.runs]
    doc = _member_doc(group, g, n_out, kept)
    if doc is None or kept is None or kept.load is None or kept.save is None:
        return gather(runs, points, n_out)
    last = kept.load(group.slug, g.key)
    got = None if last is None else _spliced(last, doc, runs, points, n_out)
    if got is not None and got[1]:
        return got[0]
    tagged = gather(runs, points, n_out) if got is None else got[0]
    tags = sorted(tagged)
    arrays = {f"{c}{k}": tagged[t][j] for k, t in enumerate(tags) for j, c in enumerate("rsv")}
    kept.save(group.slug, g.key, {**doc, "tags": tags}, arrays)
    return tagged


def _digest(
    group: compare.Group, g: Member, doc: dict | None, points: compare.Points, n_out: int, kept: compare.Kept | None
) -> tuple[Digest, Tagged | None]:
    """The group's :class:`Digest`: the last build's while it holds, else made from the group's
    points (and kept), which come back too."""
    best = g.runs.index(g.best) if g.best is not None else None
    d = _kept_digest(group, g, doc, best, kept)
    if d is not None:
        return d, None
    f = member_points(group, g, points, n_out, kept)
    d = digest_of(f, best)
    _keep_digest(group, g, doc, best, d, kept)
    return d, f


def _member_doc(group: compare.Group, g: Member, n_out: int, kept: compare.Kept | None) -> dict | None:
    """What a group's points (and so its bands) depend on, when they are all in the store: the
    code, the level of thinning and its runs' input keys in order; None when they are not."""
    if kept is None or kept.load is None or kept.save is None:
        return None
    keys = [kept.keys.get(group.runs[i].slug) for i in g.runs]
    if None in keys or len(set(keys)) != len(keys):
        return None
    return {"salt": kept.salt, "level": compare._level(n_out), "keys": keys}


def _spliced(
    last: tuple[dict, dict[str, np.ndarray]], doc: dict, runs: list[SiteRun], points: compare.Points, n_out: int
) -> tuple[Tagged, bool] | None:
    """The last build's points of a group with its changed runs' points read again (and
    whether nothing changed); None when they cannot be reused (another level or code, or the
    unchanged runs in another order)."""
    head, arrays = last
    if head.get("salt") != doc["salt"] or head.get("level") != doc["level"] or not isinstance(head.get("keys"), list):
        return None
    where = {k: j for j, k in enumerate(head["keys"])}
    new_of_old = np.full(len(head["keys"]), -1, np.int64)
    fresh = []
    for i, k in enumerate(doc["keys"]):
        j = where.get(k)
        if j is None:
            fresh.append(i)
        else:
            new_of_old[j] = i
    moved = new_of_old[new_of_old >= 0]
    if len(moved) > 1 and not bool((moved[1:] > moved[:-1]).all()):
        return None
    same = not fresh and len(moved) == len(new_of_old)
    add = gather([runs[i] for i in fresh], points, n_out) if fresh else {}
    fresh_at = np.asarray(fresh, np.int64)
    old_tags = {t: k for k, t in enumerate(head.get("tags", []))}
    out: Tagged = {}
    for t in sorted({*old_tags, *add}):
        if t in old_tags:
            k = old_tags[t]
            r_old, s, v = arrays[f"r{k}"], arrays[f"s{k}"], arrays[f"v{k}"]
            r = new_of_old[r_old]
            keep = r >= 0
            r, s, v = (r, s, v) if keep.all() else (r[keep], s[keep], v[keep])
        else:
            r, s, v = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        if t in add:
            ar, add_s, add_v = add[t]
            at = np.searchsorted(r, fresh_at[ar], side="left")  # (a changed run is not among the kept ones)
            r, s, v = np.insert(r, at, fresh_at[ar]), np.insert(s, at, add_s), np.insert(v, at, add_v)
        if len(r):
            out[t] = (r, s, v)
    return out, same


def best_runs(runs: list[SiteRun], ms: list[Member], metrics: list[str]) -> str | None:
    """Sets each group's best run: the best final value of the first key metric any run has
    (lower is better for losses and errors), like the index's ★ marks; that metric."""
    finals = [compare._finals(r)[0] for r in runs]
    for m in metrics:
        if not any(isinstance(f.get(m), float) and math.isfinite(f[m]) for f in finals):
            continue
        sign = 1.0 if lower_is_better(m) else -1.0
        for g in ms:
            vals = [(sign * finals[i][m], i) for i in g.runs if isinstance(finals[i].get(m), float) and math.isfinite(finals[i][m])]
            g.best = min(vals)[1] if vals else None
        return m
    return None


def summary_data(
    group: compare.Group,
    labels: list[str],
    metrics: list[str],
    names: tuple[str, str],
    *,
    budget: int = compare.BUDGET,
    points: compare.Points | None = None,
    kept: compare.Kept | None = None,
    prefix: str = "",
    group_budget: int = compare.BUDGET // GROUP_SHARE,
) -> tuple[str, Summary]:
    """The page's curves as summaries (the members of its data object as JSON text: ``"runs":[],
    "tags":[...],...,"summary":{...}``) and what its HTML says of them; the groups' run scripts
    in ``Summary.files``. ``names``: the names of the group of the page's own runs and of the
    "other" group. With ``kept``, a group's script whose runs did not change since the last
    build is linked from the live build (``prefix``: the page's folder), not drawn again, and
    the group's points are not read (its :class:`Digest` and kept bands answer for them)."""
    points = points or (lambda r, level: r.lines)
    ms = members(group, *names)
    runs = group.runs
    n_lines = sum(1 for r in runs for ln in r.lines if ln.label in ("", "hparams")) or 1
    n_out = int(min(compare.MAX_POINTS, max(compare.MIN_POINTS, POINTS // n_lines)))
    metric = best_runs(runs, ms, metrics)
    docs = [_member_doc(group, g, n_out, kept) for g in ms]
    olds = [_kept_bands(group, g, doc, kept) for g, doc in zip(ms, docs)]
    got = [_digest(group, g, doc, points, n_out, kept) for g, doc in zip(ms, docs)]
    digests = [d for d, _ in got]
    flat = [f for _, f in got]  # per group, per tag: its points, when they were read
    for g, d in zip(ms, digests):
        g.nonfinite = d.nonfinite
    first = {m: k for k, m in enumerate(metrics)}
    every_tag = {t for d in digests for t in d.spans}
    tags = sorted(every_tag, key=lambda t: (first.get(t, len(first)), t))  # key metrics first: they stay
    most = int(max(MIN_GRID, min(GRID, CELLS // max(len(runs), 1))))
    grids = {t: grid_of_spans([d.spans.get(t) for d in digests], most) for t in tags}
    for i, (g, d, kept_bands) in enumerate(zip(ms, digests, olds)):
        if flat[i] is None and not all(_covers(kept_bands.get(t), grids[t], sp) for t, sp in d.spans.items()):
            flat[i] = member_points(group, g, points, n_out, kept)  # its kept bands lack steps inside its own
    drawn = {t: _tag(grids[t], [f.get(t) if f is not None else None for f in flat], digests, t, ms, [o.get(t) for o in olds]) for t in tags}
    _keep_bands(group, ms, docs, olds, drawn, digests, kept)
    share = group_budget  # (not the page's budget: that moves with the page's table, the scripts would with it)
    files: dict[str, bytes] = {}
    heads: dict[str, list] = {}
    for g in ms:
        key = _group_key(group, g, labels, share, kept)
        old = _kept_file(group, key, kept, prefix)
        if old is None:
            g.file, g.drawn = _group_file(group, g, labels, share, points, files)
        else:
            g.file, g.drawn = old
        if key is not None:
            heads[key] = [g.file, g.drawn]
    if kept is not None:
        kept.put(group.slug, heads)
    while True:  # fewer aligned steps, then fewer tags, until the page's data fits
        parts = [_tag_text(t, drawn[t], ms, [d.best.get(t) for d in digests], most) for t in tags]
        head = _head(group, ms, labels, metric, len(tags), most)
        size = sum(map(len, parts)) + len(head) + 200
        if size <= budget * 0.9 or (most <= MIN_GRID and len(tags) <= 1):
            break
        if most > MIN_GRID:
            most = max(MIN_GRID, most // 2)
        else:
            keep: list[str] = []
            used = len(head) + 200
            for t, p in zip(tags, parts):
                if used + len(p) > budget * 0.9 and keep:
                    break
                keep.append(t)
                used += len(p)
            drawn_tags = len(tags)
            tags = keep
            if len(tags) == drawn_tags:
                break
    left = len(every_tag) - len(tags)
    head = _head(group, ms, labels, metric, left, most)
    order = sorted(range(len(tags)), key=lambda k: str(tags[k]))
    text = (
        f'"runs":[],"tags":[{",".join(parts[k] for k in order)}],"pieces":[],"thinned":false,"points":{most},"dropped":0,"on":0,'
        f'"summary":{head}'
    )
    shown = [(tags[k], sum(1 for b in drawn[tags[k]][1:] if b is not None)) for k in order]
    return text, Summary(ms, metric, shown, left, most, len(runs), sum(g.nonfinite for g in ms), files)


#: a group's band of a tag: (its aligned steps, its quantiles there (3 x steps), its runs'
#: count there, whether one of them holds NaN/inf there)
Band = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _tag(
    grid: np.ndarray,
    flat: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None],
    digests: list[Digest],
    tag: str,
    ms: list[Member],
    olds: list[Band | None],
) -> list[Any]:
    """A tag's aligned steps and, per group, its band there (None: the group has no line of the
    tag) (``flat``: each group's points of the tag when they were read, see :func:`member_points`;
    ``olds``: each group's band of the last build when its runs did not change)."""
    out: list[Any] = [grid]
    for g, f, d, old in zip(ms, flat, digests, olds):
        span = d.spans.get(tag)
        out.append(None if span is None else _banded(f, len(g.runs), grid, old, span))
    return out


def _banded(f: tuple[np.ndarray, np.ndarray, np.ndarray] | None, n_runs: int, grid: np.ndarray, old: Band | None, span: Span) -> Band:
    """A group's band at ``grid``'s steps: each step's column depends on that step and the
    group's points alone, so the columns ``old`` has are taken from it, the others computed
    (from ``f``, its points, needed only when one of them lies within its steps' ``span``)."""
    have, at = _have(old, grid)
    q = np.full((len(QUANTILES), len(grid)), np.nan)
    n = np.zeros(len(grid), np.int64)
    bad = np.zeros(len(grid), bool)
    if old is not None and have.any():
        q[:, have], n[have], bad[have] = old[1][:, at[have]], old[2][at[have]], old[3][at[have]]
    todo = np.flatnonzero(~have)  # (before the group's first step or after its last, no run has a value)
    todo = todo[(grid[todo] >= span[0]) & (grid[todo] <= span[1])]
    if len(todo):
        if f is None:
            raise ValueError("a band's steps within the group's own need its points")
        v, ok = aligned(f[0], f[1], f[2], n_runs, grid[todo])
        q[:, todo], n[todo] = quantiles(v)
        bad[todo] = (ok & ~np.isfinite(v)).any(axis=0)
    return grid, q, n, bad


def _have(old: Band | None, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``grid``'s steps the kept band ``old`` has, and where."""
    if old is None or not len(old[0]):
        return np.zeros(len(grid), bool), np.zeros(len(grid), np.int64)
    at = np.minimum(np.searchsorted(old[0], grid), len(old[0]) - 1)
    return old[0][at] == grid, at


def _covers(old: Band | None, grid: np.ndarray, span: Span) -> bool:
    """Whether the kept band ``old`` has every step of ``grid`` within the group's steps' ``span``."""
    return old is not None and not _inside(grid[~_have(old, grid)[0]], span)


def _kept_bands(group: compare.Group, g: Member, doc: dict | None, kept: compare.Kept | None) -> dict[str, Band]:
    """The group's bands by tag as the last build kept them, when its runs did not change."""
    if doc is None or kept is None or kept.load is None:
        return {}
    last = kept.load(group.slug, g.key + BANDS)
    if last is None or {k: last[0].get(k) for k in doc} != doc or not isinstance(last[0].get("tags"), list):
        return {}
    try:
        out = {}
        for k, t in enumerate(last[0]["tags"]):
            a = last[1]
            x, q, n, bad = a[f"x{k}"], np.stack([a[f"q{k}_{j}"] for j in range(len(QUANTILES))]), a[f"n{k}"], a[f"b{k}"]
            if not (len(x) == q.shape[1] == len(n) == len(bad)):
                return {}
            out[t] = (x, q, n, bad)
        return out
    except (KeyError, ValueError, TypeError):
        return {}


def _keep_bands(
    group: compare.Group,
    ms: list[Member],
    docs: list[dict | None],
    olds: list[dict[str, Band]],
    drawn: dict[str, list[Any]],
    digests: list[Digest],
    kept: compare.Kept | None,
) -> None:
    """Keep each group's bands for the next build, unless the kept ones still serve: the steps
    they lack all lie outside the group's own steps (where a band is empty without a look)."""
    if kept is None or kept.save is None:
        return
    for k, (g, doc, old) in enumerate(zip(ms, docs, olds)):
        mine = {t: d[k + 1] for t, d in drawn.items() if d[k + 1] is not None}
        if doc is None or (
            old and all(t in old and not _inside(b[0][~np.isin(b[0], old[t][0])], digests[k].spans[t]) for t, b in mine.items())
        ):
            continue
        tags = sorted(mine)
        arrays: dict[str, np.ndarray] = {}
        for j, t in enumerate(tags):
            x, q, n, bad = mine[t]
            arrays |= {f"x{j}": x, **{f"q{j}_{i}": q[i] for i in range(len(QUANTILES))}, f"n{j}": n, f"b{j}": bad}
        kept.save(group.slug, g.key + BANDS, {**doc, "tags": tags}, arrays)


def _inside(steps: np.ndarray, span: Span) -> bool:
    """Whether any of ``steps`` lies between the first and the last of a group's steps (``span``)."""
    return bool(len(steps) and ((steps >= span[0]) & (steps <= span[1])).any())


BANDS = "/bands"  # (after a group's key: its bands are kept beside its points; a key has no "/")
DIGEST = "/digest"  # (... and its digest)


def _kept_digest(group: compare.Group, g: Member, doc: dict | None, best: int | None, kept: compare.Kept | None) -> Digest | None:
    """The group's :class:`Digest` as the last build kept it, when its runs and its best run did
    not change; None when there is none (or it is damaged): the group's points are read then."""
    if doc is None or kept is None or kept.load is None:
        return None
    last = kept.load(group.slug, g.key + DIGEST)
    if last is None:
        return None
    head, a = last
    if {k: head.get(k) for k in doc} != doc or head.get("best") != best or type(head.get("nonfinite")) is not int:
        return None
    try:
        spans: dict[str, Span] = {}
        lines: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for k, (t, has_u, has_best) in enumerate(head["tags"]):
            ends, u = a[f"e{k}"], a[f"u{k}"] if has_u else None
            if type(t) is not str or ends.dtype != np.int64 or len(ends) != 2 or (u is not None and u.dtype != np.int64):
                return None
            spans[t] = (int(ends[0]), int(ends[1]), u)
            if has_best:
                s, v = a[f"s{k}"], a[f"v{k}"]
                if s.dtype != np.int64 or v.dtype != np.float64 or len(s) != len(v):
                    return None
                lines[t] = (s, v)
        return Digest(spans, lines, head["nonfinite"])
    except (KeyError, ValueError, TypeError):
        return None


def _keep_digest(group: compare.Group, g: Member, doc: dict | None, best: int | None, d: Digest, kept: compare.Kept | None) -> None:
    """Keep the group's :class:`Digest` for the next build (beside its points, under ``doc``)."""
    if doc is None or kept is None or kept.save is None:
        return
    tags = sorted(d.spans)
    arrays: dict[str, np.ndarray] = {}
    for k, t in enumerate(tags):
        first, last, u = d.spans[t]
        arrays[f"e{k}"] = np.array([first, last], np.int64)
        if u is not None:
            arrays[f"u{k}"] = u
        if t in d.best:
            arrays[f"s{k}"], arrays[f"v{k}"] = d.best[t]
    head = {**doc, "best": best, "nonfinite": d.nonfinite, "tags": [[t, d.spans[t][2] is not None, t in d.best] for t in tags]}
    kept.save(group.slug, g.key + DIGEST, head, arrays)


def _tag_text(tag: str, drawn: list[Any], ms: list[Member], bests: list[tuple[np.ndarray, np.ndarray] | None], most: int) -> str:
    """A tag's summary as page data: ``{"tag", "x": aligned steps, "bands": [[group, median,
    low, high, runs there, [steps with NaN/inf]], ...], "best": [[group, x, y], ...]}``, at
    ``most`` aligned steps or fewer (every k-th of those drawn, and the last)."""
    grid = drawn[0]
    keep = np.arange(len(grid))
    if len(grid) > most:
        keep = np.unique(np.concatenate([np.arange(0, len(grid), math.ceil(len(grid) / most)), [len(grid) - 1]]))
    bands, best = [], []
    for k, (got, line) in enumerate(zip(drawn[1:], bests)):
        if got is None:
            continue
        _, q, n, bad = got
        bands.append(
            [k, numbers(q[1][keep]), numbers(q[0][keep]), numbers(q[2][keep]), numbers(n[keep]), np.flatnonzero(bad[keep]).tolist()]
        )
        if line is not None:  # (the group's best run has a line of the tag)
            s, y = line
            if len(s) > 2 * most:
                pick = np.unique(np.concatenate([np.linspace(0, len(s) - 1, 2 * most).astype(np.int64)]))
                s, y = s[pick], y[pick]
            best.append([k, numbers(s), numbers(y)])
    return json_text({"tag": tag, "x": numbers(grid[keep]), "bands": bands, "best": best})


def _head(group: compare.Group, ms: list[Member], labels: list[str], metric: str | None, tags_left: int, most: int) -> str:
    rows = []
    for g in ms:
        b = g.best
        rows.append(
            {
                "n": g.name,
                "k": g.key,
                "h": g.link,
                "runs": len(g.runs),
                "file": g.file,
                "drawn": g.drawn,
                "bad": g.nonfinite,
                "best": labels[b] if b is not None else None,
                "bh": f"../../runs/{group.runs[b].slug}/index.html" if b is not None else None,
            }
        )
    return json_text({"q": [QUANTILES[0], QUANTILES[2]], "metric": metric, "groups": rows, "tags_left": tags_left, "grid": most})


def _group_key(group: compare.Group, g: Member, labels: list[str], budget: int, kept: compare.Kept | None) -> str | None:
    """What a group's script depends on, when its runs' points are in the store: the code, its
    runs' inputs and labels, and its budget."""
    if kept is None:
        return None
    newest = g.runs[-EXPAND_RUNS:]
    keys = [kept.keys.get(group.runs[i].slug) for i in newest]
    if None in keys:
        return None
    doc = ["group", kept.salt, budget, [[group.runs[i].slug, k, labels[i]] for i, k in zip(newest, keys)]]
    return hashlib.sha256(json.dumps(doc).encode("utf-8", "surrogatepass")).hexdigest()


def _kept_file(group: compare.Group, key: str | None, kept: compare.Kept | None, prefix: str) -> tuple[str, int] | None:
    """The group's script of the last build, linked into this one; None when there is none."""
    if key is None or kept is None or kept.have is None or kept.link is None:
        return None
    head = kept.get(group.slug, key)
    if not isinstance(head, list) or len(head) != 2 or type(head[0]) is not str or type(head[1]) is not int:
        return None
    if not GROUP_NAME.match(head[0]) or not kept.have(prefix + head[0]) or not kept.link(prefix + head[0]):
        return None
    return head[0], head[1]


GROUP_NAME = re.compile(rf"^{GROUP_PREFIX}[0-9a-f]{{32}}\.js$")


def _group_file(
    group: compare.Group, g: Member, labels: list[str], budget: int, points: compare.Points, files: dict[str, bytes]
) -> tuple[str, int]:
    """A group's newest runs (``EXPAND_RUNS`` at most) as one script (their pieces, then the
    group's overlay data under its name in ``window.SITEGEN_PIECES``), named by its content;
    the runs it draws."""
    newest = g.runs[-EXPAND_RUNS:]
    sub = compare.Group(group.key, group.slug, [group.runs[i] for i in newest])
    ov = compare.overlay_data(sub, [labels[i] for i in newest], budget=budget, points=points)
    body = b"".join(ov.files[n] for n in ov.names)
    data = ("{" + ov.text + "}").encode("utf-8", "surrogatepass")
    name = f"{GROUP_PREFIX}{hashlib.sha256(body + data).hexdigest()[:32]}.js"
    head = f'window.SITEGEN_PIECES=window.SITEGEN_PIECES||{{}};window.SITEGEN_PIECES["{name}"]='
    files[name] = b"".join((body, head.encode("ascii"), data, b";\n"))
    return name, len(ov.runs)
