"""A run's summary as plain data, so an unchanged run need not be read or drawn again.

What the index and comparison pages need of a run (its light :class:`SiteRun`, hyperparameters,
problems, log files and the list of files of its page) is kept in the store under a key of
everything the run's page depends on; the next build reuses it when the key is unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from sitegen.errors import Problem
from sitegen.model import NO_STEPS, NO_VALUES, ChartLine, Commit, Packed, Series, SiteRun, SourceFile, Stats, chart_line, held_data, path_in


def to_doc(
    run: SiteRun,
    hp: dict,
    files: list[str],
    problems: list[Problem],
    sources: list[SourceFile],
) -> tuple[dict, dict[str, np.ndarray]]:
    """The summary as a JSON document and its lines' points as columns. A line is a list
    (tag, label, thinned, then the :class:`Stats` fields in order), not an object: a rebuild
    parses hundreds of summaries, and the keys were most of their text."""
    d = run.data
    lines = []
    ids, steps, walls, values, levels = [], [], [], [], []
    for i, ln in enumerate(run.lines):
        s = ln.series
        lines.append([ln.tag, ln.label, s.thinned, *s.stats.values()])
        ids.append(np.full(len(s.step), i, dtype=np.int32))
        steps.append(s.step)
        walls.append(s.wall_time)
        values.append(s.value)
        levels.append(s.levels if s.levels is not None and len(s.levels) == len(s.step) else np.full(len(s.step), 255, np.uint8))

    def cat(xs, dt):
        return np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)

    table = {
        "line": cat(ids, np.int32),
        "step": cat(steps, np.int64),
        "wall_time": cat(walls, np.float64),
        "value": cat(values, np.float64),
        "levels": cat(levels, np.uint8),
    }
    doc = {
        "run": {
            "name": run.name,
            "slug": run.slug,
            "title": run.title,
            "parts": list(run.parts),
            "start_time": run.start_time,
            "end_time": run.end_time,
            "last_step": run.last_step,
            "directory": None if run.directory is None else str(run.directory),
            "commit": None if run.commit is None else asdict(run.commit),
        },
        "data": {
            "name": d.name,
            "format": d.format,
            "hparams": d.hparams,
            "hparam_metrics": d.hparam_metrics,
            "meta": d.meta,
            "artifacts": [asdict(a) for a in d.artifacts],
            "problems": [asdict(p) for p in d.problems],
            "files": [[str(f.path), f.size, f.decoded_bytes] for f in d.files],
        },
        "lines": lines,
        "hparams": hp,
        "files": files,
        "problems": [asdict(p) for p in problems],
        "sources": [[str(f.path), f.size, f.decoded_bytes] for f in sources],
        "digests": {str(f.path): [f.sha256, f.size] for f in sources if f.sha256},  # source -> [sha256, bytes hashed]
    }
    return doc, table


def _stats_line(tag: str, label: str, stats: Stats, thinned: bool) -> ChartLine:
    """A chart line with its statistics and no points (they wait in the store)."""
    return chart_line(tag, label, Series(NO_STEPS, NO_VALUES, NO_VALUES, stats, thinned))


def from_doc(doc: dict, known: dict[str, Path] | None = None) -> tuple[SiteRun, dict, list[str], list[Problem], list[SourceFile]]:
    """The summary back, as :func:`held` makes a drawn run: its lines keep their statistics,
    their points stay in the store (see :func:`level_points`). ``known``: Path objects the
    caller already has, by their text (the scan's folder and log files of the run), used
    instead of new ones."""
    r, d = doc["run"], doc["data"]
    folder = r["directory"]
    paths: dict[str, Path] = dict(known or {})
    where = None if folder is None else paths.get(folder) or Path(folder)

    def path(text: str) -> Path:
        got = paths.get(text)
        if got is None:
            got = paths[text] = path_in(where, folder, text)
        return got

    run = SiteRun(
        name=r["name"],
        slug=r["slug"],
        title=r["title"],
        parts=tuple(r["parts"]),
        data=held_data(d["name"], d["format"], d["meta"]),
        lines=[_stats_line(tag, label, Stats(*stats), thinned) for tag, label, thinned, *stats in doc["lines"]],
        start_time=r["start_time"],
        end_time=r["end_time"],
        last_step=r["last_step"],
        commit=Commit(**r["commit"]) if r.get("commit") else None,
    )
    digests = doc.get("digests", {})
    sources = [SourceFile(path(p), s, e, _digest(digests.get(p), s)) for p, s, e in doc["sources"]]
    return run, doc["hparams"], doc["files"], [Problem(**p) for p in doc["problems"]], sources


def _digest(kept: object, size: int) -> str:
    """A log file's SHA-256 as its summary kept it, when it is of the file's ``size`` bytes."""
    if isinstance(kept, list) and len(kept) == 2 and isinstance(kept[0], str) and kept[1] == size:
        return kept[0]
    return ""


def level_points(lines: list[ChartLine], table: dict[str, np.ndarray], level: int):
    """The points drawn at ``compare.LEVELS[level]`` of a run's lines, as flat columns: a
    comparison page of hundreds of runs needs no object per line (see :class:`sitegen.model.Packed`).
    ``table``: :meth:`sitegen.cache.store.Store.get_points` (of that level, or of all points)."""
    ids, step, wall, value, levels = (table[c] for c in ("line", "step", "wall_time", "value", "levels"))
    keep = (levels & np.uint8(1 << level)) != 0
    if not keep.all():
        ids, step, wall, value = ids[keep], step[keep], wall[keep], value[keep]
    bounds = np.searchsorted(ids, np.arange(len(lines) + 1))
    every = np.zeros(len(lines), np.int64)
    per_line = table["per_line"][: len(lines)]
    every[: len(per_line)] = per_line
    cut = np.diff(bounds) != every
    return Packed(bounds.tolist(), step, wall, value, [ln.series.thinned or c for ln, c in zip(lines, cut.tolist())])


def held(run: SiteRun) -> SiteRun:
    """``run`` as a build holds it once its summary is kept: its lines' statistics (their points
    are in the store) and, of its data, the name, format and recorded meta (a status, notes);
    its log files, folder, artifacts and problems are in its page and summary. What the build
    keeps of a run then does not grow with what the run logged."""
    d = run.data
    lines = [_stats_line(ln.tag, ln.label, ln.series.stats, ln.series.thinned) for ln in run.lines]
    return replace(run, data=held_data(d.name, d.format, d.meta), lines=lines, directory=None)
