"""Trend pages: the step detection, and a model's trend drawn in Chromium over file:// (English
and Chinese, no console error), also with 1,000 runs (timed)."""
from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from sitegen.config import Config
from sitegen.pages.assets import assets
from sitegen.pages.trends import trend_files
from sitegen.pipeline.build import BuildOptions, build
from sitegen.prepare.changes import RunState
from sitegen.prepare.trends import change_points, trend
from tests.support.corpus import write_metrics


def test_steps_are_found_and_noise_or_a_lone_outlier_is_not():
    rng = random.Random(7)
    noise = [rng.gauss(0.8, 0.01) for _ in range(40)]
    assert change_points(noise) == []
    assert change_points(noise[:20] + [v + 0.05 for v in noise[20:]]) == [20]
    assert change_points(noise[:20] + [0.5] + noise[21:]) == []  # one bad run is not a new level
    two = noise[:15] + [v - 0.1 for v in noise[15:30]] + [v + 0.1 for v in noise[30:]]
    assert change_points(two) == [15, 30]
    assert change_points([1.0] * 5 + [2.0] * 5) == [5] and change_points([1.0, 2.0, 3.0]) == []


def test_a_trend_band_is_the_last_level():
    states = [RunState(f"p/m/r{i:02d}", f"s{i}", "p/m", 1e9 + i, 1e9 + i + 1, 1, 1, None, {"acc": 0.5 if i < 6 else 0.8}, {"acc": 0.9})
              for i in range(12)]
    tr = trend("acc", states[::-1])  # (any order in: start order out)
    assert [s.name for s in tr.runs] == [f"p/m/r{i:02d}" for i in range(12)]
    assert tr.changes == [6] and tr.band == (1e9 + 6, pytest.approx(0.8), pytest.approx(0.8)) and tr.best == [0.9] * 12


@pytest.mark.parametrize("language, title", [("en", "Trend: vision/resnet"), ("zh-CN", "趋势：vision/resnet")])
def test_a_models_trend_page_draws_over_file(page, tmp_path: Path, language: str, title: str):
    logs, out = tmp_path / "logs", tmp_path / "site"
    for i in range(10):  # eval/acc steps up by 0.3 from the 6th run on
        write_metrics(logs / "vision" / "resnet" / f"r{i:02d}", 0, 5, seed=0 if i < 6 else 30, start=1_700_000_000 + 3600 * i)
    build(logs, out, BuildOptions(config=Config(language=language), cache=tmp_path / "cache"))
    site = out.resolve()
    pages = sorted(p.parent.name for p in site.glob("trends/*/index.html"))
    assert len(pages) == 2 and any(p.startswith("vision-resnet-") for p in pages)  # the model and the project
    html = next(site.glob("trends/vision-resnet-*/index.html"))
    text = html.read_text("utf-8")
    assert f"<h1>{title}</h1>" in text and "vision/resnet/r06" in text  # the change point, listed
    compare_page = next(site.glob("compare/vision-resnet-*/index.html")).read_text("utf-8")
    assert f'href="../../trends/{html.parent.name}/index.html"' in compare_page
    page.goto(html.as_uri())
    page.wait_for_selector(".chart.drawn", timeout=30000)
    assert page.eval_on_selector_all(".chart", "cs => cs.length") == 2  # eval/acc and train/loss
    page.wait_for_function("document.querySelectorAll('.chart.drawn').length === 2", timeout=30000)
    dots = page.eval_on_selector(".chart.drawn", "c => c.querySelectorAll('path[role=graphics-symbol], .mark-symbol path').length")
    assert dots >= 10
    assert page.log.errors == []


def test_a_thousand_runs_draw_in_a_second(page, tmp_path: Path):
    """The trend of a model with 1,000 runs (two levels) in headless Chromium: the time from
    opening the page to its chart drawn, measured (the floor is 1 s)."""
    logs, out = tmp_path / "logs", tmp_path / "site"
    write_metrics(logs / "p" / "m" / "r0", 0, 3, seed=0)
    build(logs, out, BuildOptions(config=Config(), cache=tmp_path / "cache"))  # (the site's assets)
    site = out.resolve()
    rng = random.Random(3)
    states = [RunState(f"p/m/run-{i:04d}", f"run-{i:04d}", "p/m", 1.6e9 + 3600 * i, 1.6e9 + 3600 * i + 60, 10, 10, None,
                       {"eval/acc": rng.gauss(0.8 if i < 600 else 0.85, 0.01)}, {"eval/acc": 0.9}) for i in range(1000)]
    tr = trend("eval/acc", states)
    assert tr.changes == [600]
    files = trend_files(("p", "bench"), 1000, [tr], Config(), assets("en", lambda name, make: make()))
    ((rel, data),) = files.items()
    (site / rel).parent.mkdir(parents=True)
    (site / rel).write_bytes(data)
    draws, loads = [], []
    for _ in range(2):  # the second, with the bundle in the browser's cache
        start = time.perf_counter()
        page.goto((site / rel).as_uri())
        page.wait_for_selector(".chart.drawn", timeout=30000)
        loads.append(time.perf_counter() - start)
        ready, drawn = page.evaluate("[performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd, performance.now()]")
        draws.append((drawn - ready) / 1000)  # from the page parsed (Vega's bundle loaded) to the chart drawn
    print(f"trend of 1,000 runs: chart drawn {draws[0]:.2f} s / {draws[1]:.2f} s after the page was parsed; "
          f"page opened and drawn in {loads[0]:.2f} s / {loads[1]:.2f} s")
    assert page.eval_on_selector(".chart.drawn", "c => c.querySelectorAll('path').length") >= 1000
    assert min(draws) <= 1.0, draws
    assert page.log.errors == []
