"""Summarised comparison pages (sitegen.pages.bands): the quantile bands against a plain numpy
reference, on runs written by tensorboardX and built into a site, and the page's data budget."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from sitegen.pages import grid
from sitegen.pages.charts import decode_numbers
from sitegen.pages.grid import aligned, quantiles
from tests.support import page_payload

RUNS = {  # project/model/run -> (first step, last step); runs end at different steps
    f"p{p}/m{m}/r{k}": (k * 3, 40 + 7 * k + p)
    for p in range(2)
    for m in range(2)
    for k in range(4)
}
NAN_RUN = "p1/m0/r2"  # logs a NaN and an inf in train/loss


def _value(name: str, step: int) -> float:
    h = sum(map(ord, name))
    return 2.0 / (1 + 0.05 * step) + (h % 17) * 0.01 + math.sin(step * 0.3 + h) * 0.05


def test_quantiles_match_numpy():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(57, 31))
    v[rng.random(v.shape) < 0.3] = np.nan
    v[3, 4], v[7, 4], v[2, 9] = np.inf, -np.inf, np.inf
    v[:, 5] = np.nan  # a step no run has
    v[:-1, 6] = np.nan  # a step one run has
    got, n = quantiles(v)
    clean = np.where(np.isfinite(v), v, np.nan)
    for k, p in enumerate((0.1, 0.5, 0.9)):
        for j in range(v.shape[1]):
            col = clean[:, j][~np.isnan(clean[:, j])]
            if len(col):
                assert got[k, j] == pytest.approx(np.quantile(col, p), rel=1e-12, abs=1e-12)
            else:
                assert np.isnan(got[k, j])
    assert n.tolist() == np.isfinite(v).sum(axis=0).tolist()


def test_aligned_takes_each_runs_last_value_at_or_before_the_step():
    rng = np.random.default_rng(1)
    runs, parts = 9, []
    for r in range(runs):
        steps = np.sort(rng.choice(300, size=rng.integers(0, 40), replace=False)) + r
        parts.append((np.full(len(steps), r), steps, rng.normal(size=len(steps))))
    run_of, step, value = (np.concatenate(c) for c in zip(*parts))
    grid = np.array([0, 5, 17, 50, 120, 200, 299, 320])
    shuffle = rng.permutation(len(step))  # (the points' order does not matter)
    got, ok = aligned(run_of[shuffle], step[shuffle], value[shuffle], runs, grid)
    for r, (_, s, v) in enumerate(parts):
        for j, g in enumerate(grid):
            before = np.flatnonzero(s <= g)
            want = v[before[-1]] if len(before) and len(s) and g <= s[-1] else np.nan
            assert (np.isnan(want) and np.isnan(got[r, j]) and not ok[r, j]) or got[r, j] == want


@pytest.mark.parametrize("far", [False, True])
def test_aligned_takes_the_last_logged_of_equal_steps_and_steps_far_apart(far: bool):
    # (far: steps too far apart for one int64 key of run and step, so aligned ranks them)
    rng = np.random.default_rng(2)
    scale = 2**57 if far else 1  # (31 * 2**57 < 2**63; 5 runs * 31 * 2**57 > 2**62)
    runs, parts = 5, []
    for r in range(runs):
        steps = np.sort(rng.integers(0, 30, size=25)) * scale  # repeated steps
        parts.append((np.full(len(steps), r), steps, rng.normal(size=len(steps))))
    run_of, step, value = (np.concatenate(c) for c in zip(*parts))
    grid = np.array([0, 3, 10, 29, 31]) * scale
    got, ok = aligned(run_of, step, value, runs, grid)
    for r, (_, s, v) in enumerate(parts):
        for j, g in enumerate(grid):
            before = np.flatnonzero(s <= g)  # in logged order: the last of equal steps is the last here
            want = v[before[-1]] if len(before) and g <= s[-1] else np.nan
            assert (np.isnan(want) and np.isnan(got[r, j]) and not ok[r, j]) or got[r, j] == want


@pytest.fixture(scope="module")
def summarised(tmp_path_factory) -> Path:
    from tensorboardX import SummaryWriter

    from sitegen.config import CompareConfig, Config, IndexConfig
    from sitegen.pipeline.build import BuildOptions, build

    root = tmp_path_factory.mktemp("bands")
    for name, (first, last) in RUNS.items():
        w = SummaryWriter(str(root / "archive" / name))
        for step in range(first, last + 1):
            w.add_scalar("train/loss", _value(name, step), step, walltime=1.7e9 + step)
            w.add_scalar("eval/accuracy", 1 - _value(name, step) / 3, step, walltime=1.7e9 + step)
        if name == NAN_RUN:
            w.add_scalar("train/loss", float("nan"), last + 1, walltime=1.7e9 + last + 1)
            w.add_scalar("train/loss", float("inf"), last + 2, walltime=1.7e9 + last + 2)
        w.close()
    cfg = Config(title="bands", compare=CompareConfig(summarise_above=3), index=IndexConfig(key_metrics=("eval/accuracy",)))
    build(root / "archive", root / "site", BuildOptions(config=cfg, use_cache=False))
    return root / "site"


def _reference(names: list[str], tag: str, grid: list[int]) -> np.ndarray:
    """Per grid step, the 10/50/90 % quantiles of the runs' values there, one run at a time."""
    out = np.full((3, len(grid)), np.nan)
    for j, g in enumerate(grid):
        vals = []
        for name in names:
            first, last = RUNS[name]
            last_logged = last + (2 if name == NAN_RUN and tag == "train/loss" else 0)
            if first <= g <= last_logged:
                v = _value(name, min(g, last)) if g <= last else (math.nan if g == last + 1 else math.inf)
                v = float(np.float32(1 - np.float32(_value(name, min(g, last))) / 3)) if tag == "eval/accuracy" and g <= last else v
                vals.append(float(np.float32(v)) if tag == "train/loss" else v)
        vals = [v for v in vals if math.isfinite(v)]
        if vals:
            out[:, j] = np.quantile(vals, [0.1, 0.5, 0.9])
    return out


def test_summary_bands_match_a_reference(summarised: Path):
    data = page_payload(summarised / "compare" / "all" / "index.html")
    sm = data["summary"]
    assert [g["n"] for g in sm["groups"]] == ["p0", "p1"]
    assert data["runs"] == [] and data["pieces"] == []
    by_tag = {t["tag"]: t for t in data["tags"]}
    assert sorted(by_tag) == ["eval/accuracy", "train/loss"]
    for tag, tg in by_tag.items():
        grid = decode_numbers(tg["x"])
        for b in tg["bands"]:
            g = sm["groups"][b[0]]
            names = [n for n in RUNS if n.startswith(g["n"] + "/")]
            ref = _reference(names, tag, grid)
            for k, col in enumerate((b[2], b[1], b[3])):  # low, median, high
                got = np.array([math.nan if v is None else v for v in decode_numbers(col)], dtype=float)
                np.testing.assert_allclose(got, ref[k], rtol=1e-6, atol=1e-6, equal_nan=True)
            if tag == "train/loss" and g["n"] == "p1":  # the NaN and inf steps are marked, not in the band
                assert [grid[j] for j in b[5]] == [RUNS[NAN_RUN][1] + 1, RUNS[NAN_RUN][1] + 2]
            else:
                assert b[5] == []
    p1 = sm["groups"][1]
    assert p1["bad"] == 1 and sm["groups"][0]["bad"] == 0
    html = (summarised / "compare" / "all" / "index.html").read_text("utf-8")
    assert 'id="summary-nonfinite"' in html and "16 runs in 2 groups" in html


def test_best_run_is_the_best_last_value(summarised: Path):
    data = page_payload(summarised / "compare" / "all" / "index.html")
    sm = data["summary"]
    assert sm["metric"] == "eval/accuracy"
    for g in sm["groups"]:
        names = [n for n in RUNS if n.startswith(g["n"] + "/")]
        finals = {n: 1 - _value(n, RUNS[n][1]) / 3 for n in names}
        assert g["best"] == max(finals, key=finals.get)
        assert g["bh"].startswith("../../runs/")


def test_group_scripts_hold_their_runs(summarised: Path):
    page = summarised / "compare" / "all"
    sm = page_payload(page / "index.html")["summary"]
    for g in sm["groups"]:
        text = (page / g["file"]).read_text("utf-8")
        head = f'window.SITEGEN_PIECES["{g["file"]}"]='
        assert head in text
        got = json.loads(text.split(head, 1)[1].rstrip().rstrip(";"))
        assert sorted(r["n"] for r in got["runs"]) == sorted(n for n in RUNS if n.startswith(g["n"] + "/"))
        assert g["drawn"] == len(got["runs"]) == g["runs"]
    # a model page of runs in no sub-folder: one group, named after the model
    model = page_payload(next((summarised / "compare").glob("p0-m1-*/index.html")))
    assert [g["n"] for g in model["summary"]["groups"]] == ["m1"] and model["summary"]["groups"][0]["h"] is None


def test_summarised_page_stays_within_budget(tmp_path: Path):
    from types import SimpleNamespace as NS

    from sitegen.pages import bands, compare

    rng = np.random.default_rng(2)
    runs = []
    for i in range(3000):
        lines = []
        for t in range(40):
            step = np.arange(0, 5000, 7, dtype=np.int64)
            value = rng.normal(size=len(step))
            series = NS(step=step, wall_time=step.astype(float), value=value, levels=None, thinned=False,
                        stats=NS(last_value=float(value[-1]), min_value=float(value.min()), max_value=float(value.max())))
            lines.append(NS(tag=f"tag{t:02d}", label="", series=series))
        name = f"g{i % 50}/run{i}"
        runs.append(NS(name=name, slug=f"r{i}", title=name, parts=tuple(name.split("/")), lines=lines, start_time=0.0))
    group = compare.Group((), "all", runs)
    text, sm = bands.summary_data(group, compare.labels(group), ["tag00"], ("all", "other"), budget=400_000, group_budget=100_000)
    assert len(text) <= 400_000
    assert len(sm.members) == bands.MAX_GROUPS and sm.members[-1].key == bands.OTHER
    assert sm.tags_left > 0 or sm.grid < bands.GRID  # it said what it left out
    assert all(m.drawn <= bands.EXPAND_RUNS for m in sm.members) and sm.members[-1].drawn < len(sm.members[-1].runs)
    assert all(len(f) <= 200_000 * 1.1 for f in sm.files.values())  # (overlay_data: 200 kB at least)


@pytest.mark.parametrize("most", [12, 200])
def test_grid_stays_put_as_the_runs_grow(most: int):
    """Past ``most`` steps the grid is the first and last step and the multiples of a power of
    two between them: a run that grows adds steps at the end and keeps the others."""
    from sitegen.pages.grid import grid_of

    rng = np.random.default_rng(3)
    steps = np.unique(rng.integers(7, 100_000, size=5000))
    grid = grid_of(steps, most)
    inner = grid[1:-1]
    stride = int(np.diff(inner).min())
    assert len(grid) <= most and grid[0] == steps.min() and grid[-1] == steps.max()
    assert stride & (stride - 1) == 0 and (inner % stride == 0).all() and (np.diff(inner) == stride).all()
    grown = grid_of(np.concatenate([steps, [steps.max() + stride // 3]]), most)
    assert set(grid[:-1]) <= set(grown)  # only the last step moved
    assert grid_of(np.arange(50), most).tolist() == (list(range(50)) if most >= 50 else grid_of(np.arange(50), most).tolist())


def test_a_rebuild_keeps_the_bands_of_groups_whose_runs_did_not_change(tmp_path: Path, monkeypatch):
    """A summarised page keeps each group's band in the cache: after one run grew, the groups
    without it compute only the aligned steps the grid gained, and the page is the one a build
    from scratch draws."""
    from sitegen.config import CompareConfig, Config
    from sitegen.pages import bands
    from sitegen.pipeline.build import BuildOptions, build
    from sitegen.pipeline.executors import Serial
    from tests.support.eventgen import write_run

    root = tmp_path / "logs"
    for p in range(3):
        for k in range(4):
            write_run(root / f"p{p}" / "m" / f"r{k}", tags=["loss", "acc"], steps=300 + 40 * k, seed=10 * p + k, start=1.7e9 + k)
    cfg = Config(title="bands", compare=CompareConfig(summarise_above=3))
    calls: list[tuple[bool, int, int]] = []  # per group and tag: kept band?, aligned steps, steps computed
    real = bands._banded

    def banded(f, n_runs, grid, old, span):
        calls.append((old is not None, len(grid), len(grid) - (int(np.isin(grid, old[0]).sum()) if old is not None else 0)))
        return real(f, n_runs, grid, old, span)

    monkeypatch.setattr(bands, "_banded", banded)
    out, cache = tmp_path / "site", tmp_path / "cache"
    build(root, out, BuildOptions(config=cfg, cache=cache, executor=Serial(), source_date_epoch=5))
    assert calls and not any(kept for kept, _, _ in calls)
    write_run(root / "p1" / "m" / "r3", tags=["loss", "acc"], steps=500, seed=13, start=1.7e9 + 3)  # grows past every run
    calls.clear()
    build(root, out, BuildOptions(config=cfg, cache=cache, executor=Serial(), source_date_epoch=5))
    page = out / "compare" / "all" / "index.html"
    # on the whole-archive page, groups p0 and p2 kept their bands (2 tags each) and computed
    # only the steps the grid gained; p1's band and its own pages' were computed again
    kept = [(n, todo) for was, n, todo in calls if was]
    assert len(kept) == 4 and all(todo < n / 2 for n, todo in kept), calls
    assert any(not was and todo == n for was, n, todo in calls)
    fresh = tmp_path / "fresh"
    build(root, fresh, BuildOptions(config=cfg, use_cache=False, executor=Serial(), source_date_epoch=5))
    assert page.read_bytes() == (fresh / "compare" / "all" / "index.html").read_bytes()
    # it grows again: the unchanged groups' bands (kept once, not written again: the steps they
    # lacked were past their own) still serve
    write_run(root / "p1" / "m" / "r3", tags=["loss", "acc"], steps=560, seed=13, start=1.7e9 + 3)
    calls.clear()
    from sitegen.cache.store import Store
    from sitegen.pages.compare import group_slug

    saved: list[str] = []
    put = Store.put_gathered
    monkeypatch.setattr(Store, "put_gathered", lambda self, slug, name, doc, arrays: saved.append(name) or put(self, slug, name, doc, arrays))
    build(root, out, BuildOptions(config=cfg, cache=cache, executor=Serial(), source_date_epoch=5))
    assert group_slug(("p1",)) + bands.BANDS in saved
    assert not {group_slug((p,)) + bands.BANDS for p in ("p0", "p2")} & set(saved)
    kept = [(n, todo) for was, n, todo in calls if was]
    assert len(kept) == 4 and all(todo < n / 2 for n, todo in kept), calls
    build(root, fresh, BuildOptions(config=cfg, use_cache=False, executor=Serial(), source_date_epoch=5))
    assert page.read_bytes() == (fresh / "compare" / "all" / "index.html").read_bytes()


@pytest.mark.parametrize("most", [12, 60, 200])
def test_grid_of_digests_is_the_grid_of_the_steps(most: int):
    """The grid a page draws from its groups' digests (first, last, distinct steps up to
    ``GRID``) is :func:`grid_of` of all their steps, whether the steps are few or many."""
    rng = np.random.default_rng(5)
    for trial in range(40):
        groups = []
        for _ in range(int(rng.integers(1, 5))):
            few = rng.random() < 0.5
            hi = int(rng.integers(30, 80)) if few else int(rng.integers(300, 100_000))
            lo = int(rng.integers(0, 20))
            groups.append(rng.integers(lo, hi, size=int(rng.integers(1, 400))).astype(np.int64))
        spans = []
        for steps in groups:
            u = grid.distinct(steps)
            spans.append((int(steps.min()), int(steps.max()), u if len(u) <= grid.GRID else None))
        want = grid.grid_of(np.concatenate(groups), most)
        got = grid.grid_of_spans([None, *spans], most)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), trial
