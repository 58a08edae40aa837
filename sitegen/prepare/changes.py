"""What changed since the last published build: two sets of run states in, one list of changes
out (runs added, grown, finished, removed; new best values per model and project).

Pure functions of plain data, so a rebuild, ``sitegen check`` and the tests compute the same
thing. The schema of the documents they make is ``docs/changes.md``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

from sitegen.model import SiteRun, lower_is_better, slug

SCHEMA = "sitegen/changes"
VERSION = 1
#: statuses a log may record (MLflow's run status) that mean the run has ended
TERMINAL = ("FINISHED", "FAILED", "KILLED")
KINDS = ("added", "grown", "finished", "removed", "best")
FEED_ENTRIES = 100  # entries the feed keeps, newest builds first


@dataclass(slots=True)
class RunState:
    """What a build remembers of a run to tell the next build what changed."""

    name: str
    slug: str
    group: str  # the run's model: its name without the last part
    start_time: float | None
    end_time: float | None
    last_step: int | None
    records: int  # scalar records of its own lines
    status: str | None  # as the logs record it (MLflow); None: not recorded
    metrics: dict[str, float] = field(default_factory=dict)  # last value of each tracked tag (finite only)
    best: dict[str, float] = field(default_factory=dict)  # best value of each tracked tag over the run (finite only)
    commit: str | None = None  # the commit the run records (lower-case hex), its git tag and branch
    commit_tag: str | None = None
    commit_branch: str | None = None


_FIELDS = [f.name for f in fields(RunState)]


@dataclass
class Changes:
    """The changes of one build against the live one (``previous`` None: there was none)."""

    metrics: list[str]
    previous: int | None  # runs the live build had
    added: list[dict] = field(default_factory=list)
    grown: list[dict] = field(default_factory=list)
    finished: list[dict] = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)
    best: list[dict] = field(default_factory=list)
    runs: list[RunState] = field(default_factory=list)  # every run of this build, in name order

    def count(self) -> int:
        return len(self.added) + len(self.grown) + len(self.finished) + len(self.removed) + len(self.best)

    def fresh(self) -> list[str]:
        """Names of the runs this build brought: added, grown or finished."""
        return [c["name"] for c in (*self.added, *self.grown, *self.finished)]


def state_of(run: SiteRun, metrics: list[str]) -> RunState:
    """A run's state: its extent, its recorded status and the last value of each tag of ``metrics``."""
    own = [ln for ln in run.lines if ln.label in ("", "hparams")]
    last: dict[str, float] = {}
    best: dict[str, float] = {}
    for ln in own:
        st = ln.series.stats
        if ln.tag not in metrics or ln.tag in last:
            continue
        if isinstance(st.last_value, float) and math.isfinite(st.last_value):
            last[ln.tag] = st.last_value
        b = st.min_value if lower_is_better(ln.tag) else st.max_value
        if isinstance(b, float) and math.isfinite(b):
            best[ln.tag] = b
    status = run.data.meta.get("status")
    return RunState(
        name=run.name,
        slug=run.slug,
        group="/".join(run.parts[:-1]),
        start_time=run.start_time,
        end_time=run.end_time,
        last_step=run.last_step,
        records=sum(ln.series.stats.count for ln in own),
        status=status.upper() if isinstance(status, str) and status else None,
        metrics=dict(sorted(last.items())),
        best=dict(sorted(best.items())),
        commit=None if run.commit is None else run.commit.hash,
        commit_tag=None if run.commit is None else run.commit.tag,
        commit_branch=None if run.commit is None else run.commit.branch,
    )


def to_json(s: RunState) -> dict:
    # (by hand, not dataclasses.asdict: its deep copy costs a third of a rebuild of 2,000 runs)
    return {f: getattr(s, f) for f in _FIELDS} | {"metrics": dict(s.metrics), "best": dict(s.best)}


def from_json(d: Any) -> RunState | None:
    """A state from a previous build's ``changes.json``; None when it is not one."""
    try:
        m = d["metrics"]
        return RunState(
            name=str(d["name"]),
            slug=str(d["slug"]),
            group=str(d["group"]),
            start_time=_num(d.get("start_time")),
            end_time=_num(d.get("end_time")),
            last_step=int(d["last_step"]) if isinstance(d.get("last_step"), int) else None,
            records=int(d["records"]),
            status=d["status"] if isinstance(d.get("status"), str) else None,
            metrics=_finite(m),
            best=_finite(d.get("best", {})),
            commit=_text(d.get("commit")),
            commit_tag=_text(d.get("commit_tag")),
            commit_branch=_text(d.get("commit_branch")),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def compare(previous: list[RunState] | None, current: list[RunState], metrics: list[str]) -> Changes:
    """The changes from ``previous`` (the live build's runs; None: no live build, so every run is
    new) to ``current``. A run grew when it has more records or a later step; it finished when
    its recorded status became terminal (formats that record no status only ever grow)."""
    before = {s.name: s for s in previous or []}
    now = {s.name: s for s in current}
    out = Changes(metrics=list(metrics), previous=None if previous is None else len(before), runs=sorted(current, key=lambda s: s.name))
    for name in sorted(now):
        s, p = now[name], before.get(name)
        if p is None:
            out.added.append(_entry(s))
            continue
        grew = s.records > p.records or (s.last_step if s.last_step is not None else -1) > (p.last_step if p.last_step is not None else -1)
        ended = s.status in TERMINAL and p.status not in TERMINAL
        if ended:
            out.finished.append({**_entry(s), "previous_last_step": p.last_step, "previous_records": p.records})
        elif grew:
            out.grown.append({**_entry(s), "previous_last_step": p.last_step, "previous_records": p.records})
    out.removed = [{"name": n, "slug": before[n].slug, "group": before[n].group} for n in sorted(before) if n not in now]
    out.best = new_bests(list(before.values()), current, metrics)
    return out


def groups_of(group: str) -> list[tuple[str, str]]:
    """``(level, group)`` for the model a run belongs to and the project above it."""
    if not group:
        return []
    parts = group.split("/")
    found = [("model", group)]
    if len(parts) > 1:
        found.insert(0, ("project", parts[0]))
    return found


def _by_group(states: list[RunState]) -> dict[tuple[str, str], list[RunState]]:
    """``(level, group)`` -> its runs, in the order given (one pass: an archive has thousands)."""
    out: dict[tuple[str, str], list[RunState]] = {}
    for s in states:
        for g in groups_of(s.group):
            out.setdefault(g, []).append(s)
    return out


def best_of(states: list[RunState], metric: str) -> RunState | None:
    """The run with the best last value of ``metric`` (lowest for a loss-like tag), ties to the
    first in name order."""
    have = sorted((s for s in states if metric in s.metrics), key=lambda s: s.name)
    if not have:
        return None
    low = lower_is_better(metric)
    return min(have, key=lambda s: s.metrics[metric]) if low else max(have, key=lambda s: s.metrics[metric])


def new_bests(previous: list[RunState], current: list[RunState], metrics: list[str]) -> list[dict]:
    """Per model and project and key metric: the best value when it beats the live build's best
    (or when the live build had none)."""
    found = []
    was_in, now_in = _by_group(previous), _by_group(current)
    for level, group in sorted(now_in):
        was, now = was_in.get((level, group), []), now_in[(level, group)]
        for m in metrics:
            b, p = best_of(now, m), best_of(was, m)
            if b is None:
                continue
            value = b.metrics[m]
            if p is not None:
                old = p.metrics[m]
                if not (value < old if lower_is_better(m) else value > old):
                    continue
            found.append(
                {
                    "level": level,
                    "group": group,
                    "group_slug": slug(group, "group"),
                    "metric": m,
                    "value": value,
                    "run": b.name,
                    "slug": b.slug,
                    "previous_value": None if p is None else p.metrics[m],
                    "previous_run": None if p is None else p.name,
                }
            )
    return found


def _entry(s: RunState) -> dict:
    return {
        "name": s.name,
        "slug": s.slug,
        "group": s.group,
        "group_slug": slug(s.group, "group") if s.group else "all",  # its model's comparison page
        "last_step": s.last_step,
        "records": s.records,
        "status": s.status,
    }


def _finite(m: Any) -> dict[str, float]:
    return {str(k): float(v) for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def document(ch: Changes, *, build_time: float | None, previous_feed: list[dict], gates: dict | None = None) -> dict:
    """``changes.json``: the changes, the gates' results, the feed's entries (this build's first,
    then the live build's, at most :data:`FEED_ENTRIES`) and every run's state for the next build
    (as a :class:`RunState`: :func:`to_json` is its JSON, written one at a time by the page's
    ``dumps``; as dicts, the states of 100,000 runs were the largest part of a build's memory)."""
    when = build_time if build_time is not None else max((s.end_time for s in ch.runs if s.end_time is not None), default=0.0)
    entries = feed_entries(ch, when)
    ids = {e["id"] for e in entries}
    kept = [e for e in previous_feed if isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"] not in ids]
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "updated": rfc3339(when),
        "previous_runs": ch.previous,
        "metrics": ch.metrics,
        "counts": {k: len(getattr(ch, k)) for k in KINDS},
        "changes": {k: getattr(ch, k) for k in KINDS},
        "gates": gates,
        "feed": (entries + kept)[:FEED_ENTRIES],
        "runs": list(ch.runs),
    }


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(int(t), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_link(slug: str) -> str:
    return f"runs/{slug}/index.html"


def fmt(v: Any) -> str:
    """A value in a feed entry's text."""
    return "" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)


def feed_entries(ch: Changes, when: float) -> list[dict]:
    """One entry per change. Its id hashes the run and what changed (its extent, status or the new
    best value), so a rebuild that finds the same change gives the same id and feed readers
    show it once."""
    ends = {s.name: s.end_time for s in ch.runs}
    out = []

    def add(kind: str, what: list, title: str, link: str, summary: str, t: float | None) -> None:
        digest = hashlib.sha256(json.dumps([kind, *what], sort_keys=True).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        out.append({"id": f"tag:sitegen,2024:{kind}/{digest}", "kind": kind, "title": title, "link": link, "summary": summary,
                    "updated": rfc3339(t if t is not None else when)})  # fmt: skip

    for c in ch.added:
        add("added", [c["name"], c["last_step"], c["records"]], f"New run: {c['name']}", run_link(c["slug"]),
            f"{c['records']} records, last step {c['last_step']}", ends.get(c["name"]))  # fmt: skip
    for c in ch.grown:
        add("grown", [c["name"], c["last_step"], c["records"]], f"Run grew: {c['name']}", run_link(c["slug"]),
            f"step {c['previous_last_step']} -> {c['last_step']}", ends.get(c["name"]))  # fmt: skip
    for c in ch.finished:
        add("finished", [c["name"], c["last_step"], c["status"]], f"Run finished: {c['name']}", run_link(c["slug"]),
            f"{c['status']} at step {c['last_step']}", ends.get(c["name"]))  # fmt: skip
    for c in ch.removed:
        add("removed", [c["name"], when], f"Run removed: {c['name']}", "index.html", "no longer in the archive", when)
    for c in ch.best:
        add("best", [c["group"], c["metric"], c["value"], c["run"]], f"New best {c['metric']} for {c['group']}: {fmt(c['value'])}",
            f"compare/{c['group_slug']}/index.html", f"{c['run']} (was {fmt(c['previous_value'])})", ends.get(c["run"]))  # fmt: skip
    return out
