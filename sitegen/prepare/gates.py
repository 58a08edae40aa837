"""Gates: the ``[gates]`` rules of ``sitegen.toml`` evaluated on the runs a build brought, so a
CI job can fail on a regression. Pure functions of run states (:mod:`sitegen.prepare.changes`)."""

from __future__ import annotations

import statistics
from fnmatch import fnmatchcase

from sitegen.config import GateRule, GatesConfig, parse_base
from sitegen.model import lower_is_better
from sitegen.prepare.changes import RunState

STATUSES = ("pass", "fail", "missing", "no_baseline")


def matches(selector: str, s: RunState) -> bool:
    """The selector's "/"-separated globs against the run's model (``vision/resnet50``) or its
    whole name, part by part (``*`` never crosses a "/")."""
    want = selector.split("/")
    for target in (s.group, s.name):
        have = target.split("/") if target else []
        if len(have) == len(want) and all(fnmatchcase(h, w) for h, w in zip(have, want)):
            return True
    return False


def _before(s: RunState, others: list[RunState]) -> list[RunState]:
    """The runs of ``s``'s model that started before it (by start time, then name): the ones a
    baseline is taken from."""

    def order(r: RunState) -> tuple:
        return (r.start_time if r.start_time is not None else float("-inf"), r.name)

    return sorted((r for r in others if r.group == s.group and r.name != s.name and order(r) < order(s)), key=order)


def baseline(rule: GateRule, default: GateRule, s: RunState, runs: list[RunState]) -> tuple[float | None, str]:
    """The baseline value the rule compares ``s`` with, and where it came from."""
    base = default if rule.base == "baseline" else rule
    m = rule.metric
    if base.base == "run":
        named = next((r for r in runs if r.name == base.run), None)
        return (None, f"run {base.run} not found") if named is None else (named.metrics.get(m), f"run {base.run}")
    have = [r.metrics[m] for r in _before(s, runs) if m in r.metrics]
    if base.base == "median":
        last = have[-base.n :]
        return (statistics.median(last) if last else None), f"median of the last {len(last)} runs"
    if not have:
        return None, "best so far"
    return (min(have) if lower_is_better(m) else max(have)), "best so far"


def evaluate(config: GatesConfig, fresh: list[str], runs: list[RunState]) -> dict | None:
    """Every rule on every run named in ``fresh`` that it selects; None when no rule is configured."""
    rules = config.parsed()
    if not rules:
        return None
    default = parse_base(config.baseline)
    by_name = {s.name: s for s in runs}
    results = []
    for name in sorted(set(fresh)):
        s = by_name.get(name)
        if s is None:
            continue
        for rule in rules:
            if matches(rule.selector, s):
                results.append(_check(rule, default, s, runs))
    counts = {k: sum(r["status"] == k for r in results) for k in STATUSES}
    failed = counts["fail"] + (counts["missing"] if config.missing == "fail" else 0)
    return {
        "evaluated": sorted(set(fresh) & set(by_name)),
        "counts": counts,
        "failed": failed,
        "missing": config.missing,
        "results": results,
    }


def _check(rule: GateRule, default: GateRule, s: RunState, runs: list[RunState]) -> dict:
    value = s.metrics.get(rule.metric)
    out = {"rule": rule.text, "line": rule.line, "run": s.name, "slug": s.slug, "metric": rule.metric, "op": rule.op, "value": value}
    if value is None:
        return {**out, "threshold": None, "baseline": None, "status": "missing", "detail": f"no finite value of {rule.metric}"}
    if rule.number is not None:
        threshold, base, where = rule.number, None, "a fixed threshold"
    else:
        base, where = baseline(rule, default, s, runs)
        if base is None:
            return {**out, "threshold": None, "baseline": None, "status": "no_baseline", "detail": f"no baseline yet ({where})"}
        threshold = (
            base * rule.k if rule.arith == "*" else base + rule.k if rule.arith == "+" else base - rule.k if rule.arith == "-" else base
        )
    ok = {">=": value >= threshold, "<=": value <= threshold, ">": value > threshold, "<": value < threshold}[rule.op]
    detail = f"{rule.metric} = {value:.6g} {'' if ok else 'not '}{rule.op} {threshold:.6g} ({where})"
    return {**out, "threshold": threshold, "baseline": base, "status": "pass" if ok else "fail", "detail": detail}
