"""Comparison pages in real headless Chromium over file://: smoothing, axes, log scale, filters,
the config diff, and the page-data budget with many runs."""
from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support import page_payload

SMOOTH = ".chart.overlay svg g.smooth_marks path"
#: the chart these tests work on: a tag every TensorBoard run of the example has, with wall times
#: (the first tag by name may come from a format that logs neither, such as Lightning's "epoch")
TAG = "train/loss"


def _index(site: Path) -> int:
    return [t["tag"] for t in page_payload(site / "compare" / "all" / "index.html")["tags"]].index(TAG)


def _chart(site: Path) -> str:
    return f".chart.overlay[data-tag-index='{_index(site)}']"


def _open_all(page, site: Path):
    global CHART
    CHART = _chart(site)
    page.goto((site / "compare" / "all" / "index.html").as_uri())
    page.wait_for_selector(SMOOTH, timeout=20000)
    page.wait_for_function("document.querySelectorAll('.chart.overlay.drawn').length >= 2", timeout=20000)
    _show(page)


def _show(page):
    """Bring the chart on screen and wait until it is drawn: on a page of many charts, those far
    from the screen (or hidden by the tag filter) give their views up and are drawn again when near."""
    page.locator(CHART).scroll_into_view_if_needed()
    page.wait_for_selector(f"{CHART}.drawn:not([aria-busy]) svg", timeout=20000)


CHART = ".chart.overlay[data-tag-index='0']"  # set by _open_all


def _paths(page) -> list[str]:
    return page.eval_on_selector_all(f"{CHART} svg g.smooth_marks path", "ps => ps.map(p => p.getAttribute('d'))")


def _set(page, selector: str, value: str, event: str = "change"):
    page.eval_on_selector(selector, f"(e, v) => {{ e.value = v; e.dispatchEvent(new Event('{event}', {{bubbles: true}})); }}", value)


def _wait_change(page, before: list[str]):
    page.wait_for_function(
        "([chart, before]) => { const ps = Array.from(document.querySelectorAll(chart + ' svg g.smooth_marks path')).map(p => p.getAttribute('d')); return ps.length && JSON.stringify(ps) !== JSON.stringify(before); }",
        arg=[CHART, before], timeout=10000,
    )


def test_smoothing_slider_changes_the_plotted_path(page, example_site: Path):
    _open_all(page, example_site)
    before = _paths(page)
    assert before and all(before)
    _set(page, "#smoothing", "0.95", "input")
    _wait_change(page, before)
    after = _paths(page)
    assert after != before
    assert page.inner_text("#smoothing-value") == "0.95"
    _set(page, "#smoothing", "0", "input")
    _wait_change(page, after)
    assert page.log.errors == [], page.log.errors
    assert all(u.startswith("file://") for u in page.log.requests)


def test_x_axis_and_log_scale(page, example_site: Path):
    _open_all(page, example_site)
    before = _paths(page)
    _set(page, "#x-axis", "wall")
    _wait_change(page, before)
    titles = page.eval_on_selector_all(f"{CHART} svg .role-axis-title text", "ts => ts.map(t => t.textContent)")
    assert "wall time" in titles
    wall = _paths(page)
    _set(page, "#x-axis", "relative")
    _wait_change(page, wall)
    titles = page.eval_on_selector_all(f"{CHART} svg .role-axis-title text", "ts => ts.map(t => t.textContent)")
    assert "relative time (hours)" in titles
    rel = _paths(page)
    _set(page, "#y-scale", "log")
    _wait_change(page, rel)
    log_paths = _paths(page)
    assert log_paths != rel
    # a log axis labels powers of ten: check the scale really changed in the Vega view
    kind = page.evaluate("chart => document.querySelector(chart)._view.scale('y').type", CHART)
    assert kind == "log"
    assert page.log.errors == [], page.log.errors
    assert all(u.startswith(example_site.resolve().as_uri() if False else "file://") for u in page.log.requests)


def test_tag_and_run_filters(page, example_site: Path):
    _open_all(page, example_site)
    cards = page.locator("figure.card[data-tag]")
    total = cards.count()
    page.fill("#tag-filter", "^eval/")
    shown = [cards.nth(i).get_attribute("data-tag") for i in range(total) if cards.nth(i).is_visible()]
    assert shown and all(t.startswith("eval/") for t in shown) and len(shown) < total
    page.fill("#tag-filter", "(")
    assert page.locator("#filter-error").is_visible()
    page.fill("#tag-filter", "")
    _show(page)  # (hidden by the filter, the chart gave its view up)
    before = _paths(page)
    page.fill("#run-regex", "gpt2")  # (typing scrolls the page to the filter: the chart may go far)
    _show(page)
    _wait_change(page, before)
    runs = json.loads(page.evaluate("() => JSON.stringify(window.SITEGEN_PAGE.runs.map(r => r.n))"))
    expected = sum(1 for r in runs if "gpt2" in r)
    assert page.inner_text("#runs-shown") == f"{expected} / {len(runs)}"
    assert len(_paths(page)) == expected
    assert page.log.errors == [], page.log.errors


def test_every_line_belongs_to_its_run(page, example_site: Path):
    """The curves come in parts of a few runs each (their run indices count from the part's
    first run): in the page, every line's run is the run it is named after."""
    _open_all(page, example_site)
    assert len(page_payload(example_site / "compare" / "all" / "index.html")["tags"][_index(example_site)]["parts"]) > 1
    wrong = page.evaluate("""() => { const p = window.SITEGEN_PAGE, bad = [];
        p.tags.forEach(tg => tg.lines.forEach(ln => { const n = p.runs[ln.r].n;
            if (ln.s !== n && !ln.s.startsWith(n + " · ")) bad.push([tg.tag, ln.s, n]); }));
        return bad.concat(p.tags.filter(tg => !tg.lines.length).map(tg => [tg.tag])); }""")
    assert wrong == []
    assert page.log.errors == [], page.log.errors


def test_legend_click_highlights_a_run(page, example_site: Path):
    _open_all(page, example_site)
    chart = f"{CHART} svg"
    page.locator(f"{chart} .role-legend-label text").first.click()
    page.wait_for_function(
        f"() => Array.from(document.querySelectorAll(\"{chart} g.smooth_marks path\")).some(p => Number(p.getAttribute('opacity') || p.style.opacity || 1) < 0.5)",
        timeout=10000,
    )
    assert page.log.errors == [], page.log.errors


def test_config_diff_lists_exactly_the_differing_keys(page, example_site: Path):
    (bert,) = (example_site / "compare").glob("nlp-bert-base-*/index.html")  # its two runs
    page.goto(bert.as_uri())
    page.wait_for_selector(SMOOTH, timeout=20000)
    page.wait_for_selector("#hp-table", state="attached", timeout=20000)  # (put in after the first charts)
    picks = page.locator("input.diff-pick")
    assert picks.count() >= 2
    assert "two or more" in page.inner_text("#config-diff")
    picks.nth(0).check()
    picks.nth(1).check()
    configs = json.loads(page.evaluate("() => JSON.stringify(window.SITEGEN_PAGE.configs)"))
    a, b = configs[0], configs[1]
    expected = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    shown = page.eval_on_selector_all("#config-diff tr[data-key]", "rs => rs.map(r => r.getAttribute('data-key'))")
    assert shown == expected
    # the two bert-base runs of the example differ in learning rate and seed, not in the dataset
    assert "lr" in shown and "seed" in shown and "dataset" not in shown
    assert page.log.errors == [], page.log.errors


def test_hparam_table_marks_best_and_collapses_constants(example_site: Path):
    html = (example_site / "compare" / "all" / "index.html").read_text("utf-8")
    assert 'class="num best"' in html or "best" in html
    nlp = [p for p in (example_site / "compare").glob("nlp-*/index.html")]
    assert nlp
    text = nlp[0].read_text("utf-8")
    assert "same in all runs" in text  # e.g. project = nlp is collapsed


def test_comparison_pages_are_linked(example_site: Path):
    index = (example_site / "index.html").read_text("utf-8")
    assert 'href="compare/all/index.html"' in index
    run = next((example_site / "runs").glob("*/index.html")).read_text("utf-8")
    assert "../../compare/all/index.html" in run
    assert re.search(r'href="\.\./\.\./compare/[a-z0-9-]+-[0-9a-f]{10}/index.html"', run)


def test_comparison_page_data_stays_within_budget(many_runs_site: Path):
    pages = sorted((many_runs_site / "compare").glob("*/index.html"))
    assert len(pages) == 1 + 4 + 20  # all, projects, project/model
    biggest = max(len(json.dumps(page_payload(p), separators=(",", ":"))) for p in pages)
    assert biggest < 2_000_000, biggest
    payload = page_payload(many_runs_site / "compare" / "all" / "index.html")
    assert len(payload["runs"]) == 200  # every run still drawn, each line thinned
    assert payload["thinned"] and payload["points"] < 600
    html = (many_runs_site / "compare" / "all" / "index.html").read_text("utf-8")
    assert 'id="thinned-note"' in html
    assert len(payload["configs"]) == 200 and "model.depth" in payload["configs"][0]


def test_the_hparam_table_comes_after_the_first_charts_and_sorts_and_filters(page, example_site: Path):
    """The table is a <template> in the page (parsed, not laid out) until the charts had their first
    frame or it comes near the screen; then it is the page's table, sortable and filterable."""
    html = example_site / "compare" / "all" / "index.html"
    rows = html.read_text("utf-8").split('<template id="hp-table-later">', 1)[1].split("</template>", 1)[0].count("<tr")
    # (text_content: the table is laid out only near the screen, and innerText reads the layout)
    for url in (html.as_uri(), html.as_uri() + "#hparams"):  # (the second: scrolled to the table at once)
        page.goto("about:blank")
        page.goto(url)
        page.wait_for_selector("#hp-table", state="attached", timeout=20000)
        assert page.locator("#hp-table-later").count() == 0
        assert page.locator("#hp-table tr").count() == rows
        body = page.locator("#hp-table tbody tr")
        total = body.count()
        assert page.text_content("#hp-count").startswith(f"{total} ")
        first_run = body.nth(0).locator("td").nth(1).text_content()
        page.fill("#hp-filter", first_run)
        shown = [body.nth(i).is_visible() for i in range(total)]
        assert 1 <= sum(shown) < total and shown[0], (url, first_run, shown)
        page.fill("#hp-filter", "")
        run_head = page.locator("#hp-table thead th[data-type='text'] button")
        run_head.click()
        names = [body.nth(i).locator("td").nth(1).text_content() for i in range(total)]
        run_head.click()
        assert [body.nth(i).locator("td").nth(1).text_content() for i in range(total)] == names[::-1]
    assert page.log.errors == [], page.log.errors
