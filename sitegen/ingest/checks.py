"""Sanity checks of a decoded scalar table: reported as problems, never raised."""

from __future__ import annotations

import numpy as np

from sitegen.errors import Problem
from sitegen.model import tag_groups


def scalar_problems(table, path: str, *, wall_times: bool = True, steps: bool = False, repeats: bool = True) -> list[Problem]:
    """Per-file sanity checks of a decoded scalars table (``tag, step, wall_time, value``).

    One problem per kind and tag, never one per record: non-finite wall times ("bad-wall-time";
    the records are kept, charts by time skip them) and steps that go backwards or repeat
    ("step-order", only with ``steps=True``; the records are kept in file order: out-of-order and
    negative steps are legal, so the readers leave this check to the caller). Tags whose steps are all 0 (writers
    that log no step, e.g. MLflow's default) are not checked for order. ``wall_times=False``:
    formats where a missing wall time is legitimately NaN (CSV without a time column).
    ``repeats=False``: only steps that go backwards count (MLflow keeps several values per step
    by design).
    """
    out: list[Problem] = []
    if table.num_rows == 0:
        return out
    wall = table.column("wall_time").to_numpy(zero_copy_only=False)
    bad = ~np.isfinite(wall)
    if wall_times and bad.any():
        tags = table.column("tag").to_pylist()
        names = sorted({tags[i] for i in np.flatnonzero(bad)})
        shown = ", ".join(repr(t) for t in names[:5]) + (" ..." if len(names) > 5 else "")
        out.append(
            Problem(
                path,
                None,
                "bad-wall-time",
                f"{int(bad.sum())} scalar records have a NaN/infinite wall time (tags {shown}); kept, not placed on time axes",
            )
        )
    if not steps:
        return out
    step = table.column("step").to_numpy(zero_copy_only=False)
    g = tag_groups(table)
    names = g.tags
    sid, sstep = g.rank[g.order], step[g.order]
    same = sid[1:] == sid[:-1]
    back = same & ((sstep[1:] <= sstep[:-1]) if repeats else (sstep[1:] < sstep[:-1]))
    if back.any():
        for t in np.unique(sid[1:][back]).tolist():
            rows = sstep[sid == t]
            if not rows.any():
                continue  # no steps logged at all
            wrong = np.diff(rows) <= 0 if repeats else np.diff(rows) < 0
            n = int(wrong.sum())
            first = int(np.flatnonzero(wrong)[0])
            what = "not after" if repeats else "before"
            out.append(
                Problem(
                    path,
                    None,
                    "step-order",
                    f"tag {names[t]!r}: {n} of {len(rows)} records have a step {what} the previous one "
                    f"(first: step {int(rows[first + 1])} after {int(rows[first])}); kept in the downloads",
                )
            )
    return out
