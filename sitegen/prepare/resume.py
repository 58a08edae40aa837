"""Resumed runs: a job restarted from a checkpoint at step S writes S, S+1, ... again, so the
charts and statistics show its newest records from S on (TensorBoard's rule); downloads keep all."""

from __future__ import annotations

import numpy as np

#: formats whose resumed runs go on rather than rewind: W&B keeps a run's steps increasing (its
#: SDK drops a step below the current one; an offline resume restarts ``_step`` at 0, and
#: ``wandb sync`` numbers those rows after the earlier ones), so no record there is superseded
CONTINUES = frozenset({"wandb"})
#: formats that keep several values at one step by design (MLflow, e.g. a metric logged without a
#: step): there only a step going back is a restart, and a repeated step supersedes nothing
REPEATS = frozenset({"mlflow"})


def superseded(
    step: np.ndarray, bounds: np.ndarray, rows: np.ndarray | None, restarts: list[tuple[int, int]], *, repeats: bool = False
) -> np.ndarray | None:
    """Which records are superseded (a mask; None: none): by a later record of their tag at a step
    at or below theirs (the data server's preemption) or a later SessionLog START (EventAccumulator)."""
    # step: the records grouped by tag (bounds: where tags start), each tag's in write order;
    # rows: each record's place in write order (None: already in it); restarts: (records written
    # before it, its step) of each announced restart; repeats: a later record at the same step
    # supersedes nothing. A run that never went back costs one compare pass.
    n = len(step)
    mask = None
    back = np.flatnonzero(step[1:] < step[:-1] if repeats else step[1:] <= step[:-1]) + 1  # a step going back
    if len(back):
        back = back[~np.isin(back, bounds)]  # (not across two tags)
    if len(back):
        # Only the tags that go back: a record survives when its step is below every later
        # step of its tag (a minimum accumulated from the tag's end), one pass per such tag.
        mask = np.zeros(n, dtype=bool)
        for t in np.unique(np.searchsorted(bounds, back, "right") - 1).tolist():
            a, b = int(bounds[t]), int(bounds[t + 1])
            seg = step[a:b]
            after = np.minimum.accumulate(seg[::-1])[::-1]
            mask[a : b - 1] = seg[:-1] > after[1:] if repeats else seg[:-1] >= after[1:]
    if restarts:
        at = np.array([r for r, _ in restarts], dtype=np.int64)
        by = np.argsort(at, kind="stable")
        at = at[by]
        floor = np.minimum.accumulate(np.array([s for _, s in restarts], dtype=np.int64)[by][::-1])[::-1]
        # by place in write order: the smallest step a later restart announced (none: no limit)
        limit = np.repeat(np.append(floor, np.iinfo(np.int64).max), np.diff(np.concatenate([[0], np.clip(at, 0, n), [n]])))
        hit = step >= (limit if rows is None else limit[rows])
        mask = hit if mask is None else mask | hit
    return mask if mask is not None and mask.any() else None


def superseded_reference(tags: list, steps: list[int], restarts: list[tuple[int, int]], *, repeats: bool = False) -> list[bool]:
    """The obvious loop over records in write order, the tests' oracle: a record drops what its tag
    kept from its step on (after it, with ``repeats``), a restart what every tag kept from its step on."""
    kept: dict = {}
    dropped = [False] * len(steps)

    def drop(row: list[int], at: int, after: bool = False) -> None:
        for j in [j for j in row if steps[j] > at or (steps[j] == at and not after)]:
            dropped[j] = True
            row.remove(j)

    marks = sorted(restarts)
    for i in range(len(steps) + 1):
        while marks and marks[0][0] <= i:
            for row in kept.values():
                drop(row, marks[0][1])
            marks.pop(0)
        if i < len(steps):
            drop(kept.setdefault(tags[i], []), steps[i], repeats)
            kept[tags[i]].append(i)
    return dropped


def newest_items(items: list) -> list:
    """``items`` (histograms, curves, images, audio or texts, in write order) without those a later
    item of their tag at a step at or below theirs supersedes (the data server's preemption)."""
    rows: dict[tuple[str, str], list[int]] = {}
    for i, item in enumerate(items):
        rows.setdefault((getattr(item, "kind", ""), item.tag), []).append(i)
    gone: list[int] = []
    for idx in rows.values():
        steps = np.array([items[i].step for i in idx], dtype=np.int64)
        if len(steps) > 1 and not bool(np.all(steps[1:] > steps[:-1])):
            after = np.minimum.accumulate(steps[::-1])[::-1]
            gone += [i for i, old in zip(idx[:-1], (steps[:-1] >= after[1:]).tolist()) if old]
    if not gone:
        return items
    dropped = set(gone)
    return [item for i, item in enumerate(items) if i not in dropped]
