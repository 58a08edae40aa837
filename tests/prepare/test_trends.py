"""A metric's trend against commits: commits in the order of their first run, one median per
commit, change points and the band over those medians, short hashes merged with the full one."""

from __future__ import annotations

import hashlib
import random
import statistics

import pytest

from sitegen.prepare.changes import RunState
from sitegen.prepare.trends import canonical, change_points, commit_trend


def state(i: int, commit: str | None, value: float, *, start: float | None = None, tag: str | None = None) -> RunState:
    return RunState(f"p/m/r{i:03d}", f"s{i}", "p/m", 1e9 + 60 * i if start is None else start, None, 5, 5, None,
                    {"eval/acc": value}, {"eval/acc": value + 0.01}, commit, tag, None)  # fmt: skip


def sha(n: int) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()


def test_commits_in_the_order_of_their_first_run_with_their_median_and_a_step():
    rng = random.Random(5)
    states = []
    for c in range(12):  # 12 commits, 3 runs each; the level steps up from commit 7 on
        for k in range(3):
            states.append(state(3 * c + k, sha(100 - c), rng.gauss(0.7 if c < 7 else 0.8, 0.005)))
    states.append(state(99, None, 0.1))  # no commit: not on the commit chart
    states.append(state(98, sha(100), 0.75, start=1e9 + 60 * 200))  # a later run of the first commit
    ct = commit_trend("eval/acc", states[::-1])
    assert ct.commits == [sha(100 - c) for c in range(12)]  # (not hash order: first run's start)
    assert [len(r) for r in ct.runs] == [4] + [3] * 11
    assert ct.values[0] == statistics.median([s.metrics["eval/acc"] for s in states if s.commit == sha(100)])
    assert ct.changes == [7] == change_points(ct.values)
    first, low, high = ct.band
    last = ct.values[7:]
    assert first == 7 and low == pytest.approx(statistics.fmean(last) - statistics.pstdev(last))
    assert high == pytest.approx(statistics.fmean(last) + statistics.pstdev(last))
    assert ct.labels == [c[:7] for c in ct.commits] and len(set(ct.labels)) == 12


def test_labels_are_tags_or_as_many_hex_digits_as_tell_commits_apart():
    a, b = "1234567aaaa" + "0" * 29, "1234567bbbb" + "0" * 29
    ct = commit_trend("eval/acc", [state(0, a, 0.5), state(1, b, 0.5, tag="v1.0"), state(2, "fe" * 20, 0.5, tag="v1.0")])
    assert ct.labels == ["1234567a", "v1.0", "v1.0 fefefefe"]


def test_a_short_hash_joins_the_full_one_it_abbreviates():
    full = "89abcdef" * 5
    assert canonical({full, full[:7], "0123456"}) == {full: full, full[:7]: full, "0123456": "0123456"}
    both = {"abcdef1" + "0" * 33, "abcdef1" + "1" * 33, "abcdef1"}
    assert canonical(both)["abcdef1"] == "abcdef1"  # two commits it could be: left alone
    ct = commit_trend("eval/acc", [state(0, full[:7], 0.5), state(1, full, 0.6), state(2, "0123456", 0.7)])
    assert ct.commits == [full, "0123456"] and [len(r) for r in ct.runs] == [2, 1]
