"""A build on worker processes makes the same site as one in this process, and draws the
comparison pages of finished groups while the workers still draw runs (``EarlyGroups``)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sitegen.pipeline import build as build_module, executors
from sitegen.pipeline.build import EarlyGroups, build
from sitegen.pages.compare import Group, group_slug, groups
from sitegen.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site"))
from eventgen import write_grid  # noqa: E402


class _Run:
    def __init__(self, name: str) -> None:
        self.parts, self.slug = tuple(name.split("/")), name.replace("/", "-")


def test_groups_are_drawn_once_the_next_run_leaves_them():
    names = ["p/a/r0", "p/a/r1", "p/b/r2", "q/c/r3", "q/c/r4"]
    drawn: list[tuple[tuple[str, ...], list[int]]] = []

    def draw(g: Group, members: list[int]) -> Group:
        g.runs = [runs[j] for j in members]
        drawn.append((g.key, members))
        return g

    runs = [_Run(n) for n in names]
    early = EarlyGroups(draw)
    for i, r in enumerate(runs):
        early.add(i, r)
        if i == 2:  # p/b/r2 closes p/a, not p
            assert drawn == [(("p", "a"), [0, 1])]
    assert sorted(drawn) == [(("p",), [0, 1, 2]), (("p", "a"), [0, 1]), (("p", "b"), [2])]  # q/c and q: still open
    final = {g.key: g for g in groups(runs)}  # (duck-typed runs: parts and slug are all it reads)
    assert [early.drawn(final[k]) for k in (("p", "a"), ("p", "b"), ("p",), ("q",), ("q", "c"), ())] == \
        [True, True, True, False, False, False]


def test_a_group_whose_runs_are_not_neighbours_is_not_taken_as_drawn():
    runs = [_Run(n) for n in ["p/a/r0", "p/b/r1", "p/a/r2", "z/z/r3"]]
    calls = []

    def draw(g: Group, members: list[int]) -> Group:
        g.runs = [runs[j] for j in members]
        calls.append((g.key, members))
        return g

    early = EarlyGroups(draw)
    for i, r in enumerate(runs):
        early.add(i, r)
    assert (("p", "a"), [0]) in calls and (("p", "a"), [2]) in calls  # met twice
    final = {g.key: g for g in groups(runs)}
    assert not early.drawn(final[("p", "a")])  # drawn with [r0] then [r2]: the build draws it again
    assert early.drawn(final[("p", "b")]) and early.drawn(final[("p",)])
    assert group_slug(("p", "a")) == final[("p", "a")].slug


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    return write_grid(tmp_path / "logs", projects=2, models=3, runs=3, steps=120)


def _files(site: Path) -> dict[str, bytes]:
    live = site.resolve()
    return {p.relative_to(live).as_posix(): p.read_bytes() for p in live.rglob("*") if p.is_file()}


@pytest.mark.parametrize("taken", [True, False])
def test_workers_and_early_pages_make_the_same_site(archive: Path, tmp_path: Path, monkeypatch, taken: bool):
    """``taken=False``: every page drawn early is refused at the end (as a group whose runs were
    not neighbours would be), taken back and drawn again: the same site all the same."""
    serial = build(archive, tmp_path / "one", BuildOptions(config=Config(), cache=tmp_path / "c1", source_date_epoch=1, executor=Serial()))
    monkeypatch.setattr(executors, "PARALLEL_MIN_BYTES", 0)  # worker processes for a small archive
    monkeypatch.setattr(build_module, "MIN_PARALLEL_RUNS", 1)
    seen: list[str] = []
    real = EarlyGroups._close

    def close(self, key):
        seen.append("/".join(key))
        return real(self, key)

    monkeypatch.setattr(EarlyGroups, "_close", close)
    if not taken:
        monkeypatch.setattr(EarlyGroups, "drawn", lambda self, group: False)
    parallel = build(archive, tmp_path / "two", BuildOptions(config=Config(), cache=tmp_path / "c2", source_date_epoch=1, executor=LocalPool(2)))
    assert (parallel.runs, parallel.files) == (serial.runs, serial.files) == (18, parallel.files)
    a, b = _files(tmp_path / "one"), _files(tmp_path / "two")
    assert set(a) == set(b)
    assert {k for k in a if a[k] != b[k]} <= {"manifest.json", "manifest.json.gz"}  # its cache paths differ
    # every group but the last project, its last model and the whole archive was drawn early
    assert sorted(seen) == sorted(["proj0/model0", "proj0/model1", "proj0/model2", "proj0", "proj1/model0", "proj1/model1"])
