"""A summarised comparison page in Chromium under the site's strict CSP: bands drawn, a group's
runs loaded and drawn when it is ticked, the expanded groups kept in the address over a reload,
the parallel coordinates' brushes filtering a ticked group's runs (not its band), and no console
errors; both languages."""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.pages.test_charts_browser import Served

BAND = ".chart.overlay svg g.band_marks path"
SMOOTH = ".chart.overlay[data-tag-index='0'] svg g.smooth_marks path"


@pytest.fixture(scope="module", params=["en", "zh-CN"])
def site(request, tmp_path_factory) -> Path:
    from sitegen.config import CompareConfig, Config
    from sitegen.pipeline.build import BuildOptions, build
    from tests.support.eventgen import write_archive

    root = tmp_path_factory.mktemp("bands-" + request.param)
    write_archive(root / "archive", 36, steps=30, projects=3, models=2)
    cfg = Config(title="bands", language=request.param, compare=CompareConfig(summarise_above=10))
    build(root / "archive", root / "site", BuildOptions(config=cfg, use_cache=False))
    return (root / "site").resolve()


def _count(page, selector: str) -> int:
    return page.eval_on_selector_all(selector, "ps => ps.length")


def test_groups_expand_on_tick_and_stay_over_a_reload(browser, site: Path):
    s = Served(browser, site)
    try:
        s.open("compare/all/index.html")
        s.page.wait_for_selector(BAND, state="attached", timeout=20000)
        assert _count(s.page, ".group-toggle") == 3
        assert _count(s.page, ".chart.overlay[data-tag-index='0'] svg g.band_marks path") == 3  # a band per group
        before = _count(s.page, SMOOTH)
        assert before == 6  # each group's median and its best run
        assert s.page.locator("#summary-note").is_visible()
        s.page.check(".group-toggle[data-r='1']")
        s.page.wait_for_selector("li[data-loaded]", state="attached", timeout=20000)
        s.page.wait_for_function(f"document.querySelectorAll({SMOOTH!r}).length === {before + 12}", timeout=20000)
        assert "groups=project1-" in s.page.evaluate("location.hash")
        assert s.page.locator("#runs-shown").text_content() == "1 / 3"
        s.page.reload()
        s.settle()
        s.page.wait_for_function(f"document.querySelectorAll({SMOOTH!r}).length === {before + 12}", timeout=20000)
        assert s.page.is_checked(".group-toggle[data-r='1']") and not s.page.is_checked(".group-toggle[data-r='0']")
        s.page.uncheck(".group-toggle[data-r='1']")
        s.page.wait_for_function(f"document.querySelectorAll({SMOOTH!r}).length === {before}", timeout=20000)
        assert "groups=" not in s.page.evaluate("location.hash")
        s.clean()
    finally:
        s.ctx.close()


def test_a_project_page_summarises_by_model(browser, site: Path):
    s = Served(browser, site)
    try:
        page = next(p for p in site.glob("compare/project0-*/index.html") if "model" not in p.parent.name).relative_to(site).as_posix()
        s.open(page)
        s.page.wait_for_selector(BAND, state="attached", timeout=20000)
        names = s.page.eval_on_selector_all(".group-toggle", "ts => ts.map(t => t.closest('label').textContent.trim())")
        assert names == ["model0", "model1"]
        s.clean()
    finally:
        s.ctx.close()


# the series the first overlay chart draws (from its view's own data)
NAMES = """() => { const e = document.querySelector(".chart.overlay[data-tag-index='0']");
  return e && e._view ? Array.from(new Set(e._view.data('rows').map(r => r.s))).sort() : null; }"""


def _wait_names(page, want: list[str]) -> None:
    text = json.dumps(sorted(want), ensure_ascii=False, separators=(",", ":"))
    page.wait_for_function(f"() => JSON.stringify(({NAMES})()) === {json.dumps(text, ensure_ascii=False)}", timeout=30000)


def test_brushes_filter_the_runs_of_a_ticked_group_and_leave_its_band(browser, site: Path):
    from tests.support import brush_axis

    s = Served(browser, site)
    try:
        s.open("compare/all/index.html")
        s.page.wait_for_selector(BAND, state="attached", timeout=20000)
        assert s.page.locator("#pc-summary-note").is_visible()
        summary = s.page.evaluate(NAMES)
        assert len(summary) == 6  # each group's median and best run
        s.page.check(".group-toggle[data-r='1']")
        s.page.wait_for_selector("li[data-loaded]", state="attached", timeout=20000)
        s.page.wait_for_function(f"(({NAMES})() || []).length === {len(summary) + 12}", timeout=20000)
        runs = sorted(set(s.page.evaluate(NAMES)) - set(summary))
        # group 1 is project1: runs 1, 4, ..., 34 (write_archive), batch sizes 32 * (1 + i % 4)
        label = {i: next(r for r in runs if f"run{i:05d}" in r) for i in range(1, 36, 3)}
        brush_axis(s.page, "h:batch_size", 0.05, 0.45)
        lo, hi = next(json.loads(v)[1:] for k, v in parse_qsl(urlsplit(s.page.url).fragment) if k == "brush")
        inside = [label[i] for i in label if lo <= 32 * (1 + i % 4) <= hi]
        assert 0 < len(inside) < len(runs)
        _wait_names(s.page, summary + inside)  # the medians, bands and best runs stay
        assert s.page.locator(BAND).count() >= 3
        assert "groups=project1-" in s.page.evaluate("location.hash")
        s.page.click("#pc-clear")
        _wait_names(s.page, summary + runs)
        assert "brush=" not in s.page.evaluate("location.hash")
        s.clean()
    finally:
        s.ctx.close()
