"""``sitegen report``: what a decision needs to know of one run or one model, from a built site's
run states (``changes.json``): key metrics against the run's baselines, its gates, the model's
trend. Pure functions of plain data; :mod:`sitegen.pages.report` writes it out."""

from __future__ import annotations

import statistics

from sitegen.model import lower_is_better
from sitegen.prepare.changes import RunState
from sitegen.prepare.gates import matches
from sitegen.prepare.trends import trend

MEDIAN_OF = 5  # the baseline "median of the last runs" takes this many


def _before(s: RunState, states: list[RunState]) -> list[RunState]:
    key = (s.start_time if s.start_time is not None else float("-inf"), s.name)
    return sorted(
        (
            r
            for r in states
            if r.group == s.group and r.name != s.name and (r.start_time if r.start_time is not None else float("-inf"), r.name) < key
        ),
        key=lambda r: (r.start_time if r.start_time is not None else float("-inf"), r.name),
    )


def run_report(s: RunState, states: list[RunState], metrics: list[str], gates: dict | None) -> dict:
    """One run: each metric's last and best value, the best so far and the median of the last
    :data:`MEDIAN_OF` runs of its model before it, and the gates evaluated on it."""
    earlier = _before(s, states)
    rows = []
    for m in metrics:
        had = [r.metrics[m] for r in earlier if m in r.metrics]
        best = (min(had) if lower_is_better(m) else max(had)) if had else None
        median = statistics.median(had[-MEDIAN_OF:]) if had else None
        rows.append({"metric": m, "value": s.metrics.get(m), "best_in_run": s.best.get(m), "best_so_far": best, "median": median,
                     "lower_is_better": lower_is_better(m)})  # fmt: skip
    results = [r for r in (gates or {}).get("results", []) if r["run"] == s.name]
    return {"kind": "run", "run": s, "metrics": rows, "earlier": len(earlier), "gates": results}


def group_report(group: str, states: list[RunState], metrics: list[str], gates: dict | None) -> dict:
    """A model or project: its runs, each metric's best run, latest value and change points."""
    members = [s for s in states if s.group == group or s.group.startswith(group + "/") or matches(group, s)]
    members.sort(key=lambda s: (s.start_time if s.start_time is not None else float("-inf"), s.name))
    rows = []
    for m in metrics:
        tr = trend(m, members)
        if not tr.runs:
            continue
        best = min(tr.runs, key=lambda r: r.metrics[m]) if lower_is_better(m) else max(tr.runs, key=lambda r: r.metrics[m])
        rows.append({"metric": m, "best": best, "latest": tr.runs[-1], "changes": [tr.runs[i] for i in tr.changes], "band": tr.band})
    names = {s.name for s in members}
    results = [r for r in (gates or {}).get("results", []) if r["run"] in names]
    return {"kind": "group", "group": group, "runs": members, "metrics": rows, "gates": results}
