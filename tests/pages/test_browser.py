"""The example site in real headless Chromium over file://: charts render, sorting works."""
from __future__ import annotations

import json
from pathlib import Path

from tests.support import page_payload


def _run_pages(site: Path) -> list[Path]:
    return sorted((site / "runs").glob("*/index.html"))


def test_index_opens_and_sorts(page, example_site: Path):
    page.goto((example_site / "index.html").as_uri())
    rows = page.locator("#runs tbody tr")
    assert rows.count() == len(_run_pages(example_site))
    headers = page.locator("#runs thead th")
    texts = [headers.nth(i).inner_text().strip() for i in range(headers.count())]
    col = texts.index("Last step")
    button = headers.nth(col).locator("button")

    def column() -> list[float]:
        return [float(rows.nth(i).locator("td").nth(col).inner_text() or "nan") for i in range(rows.count())]

    busy = "#runs:not([aria-busy])"  # (a sort needs every row: it may load row shards first)
    button.click()
    page.wait_for_selector(busy, state="attached")
    up = column()
    assert up == sorted(up)
    button.click()
    page.wait_for_selector(busy, state="attached")
    down = column()
    assert down == sorted(up, reverse=True)
    assert headers.nth(col).get_attribute("aria-sort") == "descending"
    # filtering keeps only matching rows (the table is re-rendered from index-data.js)
    total = rows.count()
    page.fill("#run-filter", "gpt2")
    page.wait_for_selector("#runs:not([aria-busy])", state="attached")  # (a search may load row shards first)
    visible = [rows.nth(i).is_visible() for i in range(rows.count())]
    assert 0 < sum(visible) < total
    assert all("gpt2" in rows.nth(i).inner_text() for i in range(rows.count()))
    assert page.log.errors == []


def test_run_page_charts_render(page, example_site: Path):
    pages = _run_pages(example_site)
    assert pages
    for path in pages[:3]:
        page.goto(path.as_uri())
        page.wait_for_selector(".chart.drawn svg", timeout=15000)
        charts = page.locator(".chart[data-chart]")
        n = charts.count()
        assert n >= 3
        page.wait_for_function(f"document.querySelectorAll('.chart.drawn').length >= {min(n, 24)}", timeout=20000)
        marks = page.locator(".chart svg .mark-line path, .chart svg .mark-rect path, .chart svg .mark-symbol path")
        assert marks.count() > 0
        assert page.log.errors == [], page.log.errors
        assert all(u.startswith("file://") for u in page.log.requests), page.log.requests


def test_nan_is_visible_as_a_marker(page, example_site: Path):
    """The example has a NaN; its page draws a red rule for it instead of dropping it."""
    found = False
    for path in _run_pages(example_site):
        if "NaN / ±inf" not in path.read_text("utf-8"):
            continue
        if '"nan"' not in json.dumps(page_payload(path)):
            continue
        page.goto(path.as_uri())
        page.wait_for_selector(".chart.drawn svg", timeout=15000)
        page.wait_for_function("document.querySelectorAll('.chart svg .mark-rule line, .chart svg .mark-rule path').length > 0", timeout=15000)
        found = True
        break
    assert found, "no run page of the example shows a NaN marker"


def test_page_script_decodes_chart_columns_like_python(page, example_site: Path):
    """Every compact column (progressions, float32/float64 base64, run lengths) of the run and
    comparison pages decodes in Chromium to what ``sitegen.pages.charts.decode_numbers`` gives."""
    import math

    from sitegen.pages.charts import decode_numbers

    def same(a: list, b: list) -> bool:
        return len(a) == len(b) and all(x == y or (x is None and y is None) or
                                        (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
                                        for x, y in zip(a, b))

    kinds = set()
    pages = [p.parent for p in _run_pages(example_site)] + [example_site / "compare" / "all"]
    for folder in pages:
        data = page_payload(folder / "index.html")
        cols = []
        if data.get("kind") == "compare":
            cols = [part[k] for tg in data["tags"] for part in tg["parts"] for k in (1, 2, 3)]
        else:
            cols = [ch["rows"][c] for ch in data["charts"] if ch["kind"] == "scalar" for c in ("x", "y")]
        cols = [c for c in cols if isinstance(c, dict)]
        if not cols:
            continue
        page.goto((folder / "index.html").as_uri())
        got = page.evaluate("cols => cols.map(c => window.sitegenExpand(c))", cols)
        for col, js in zip(cols, got):
            kinds.update(col)
            assert same(js, decode_numbers(col)), (folder, col)
    assert {"ap", "f4"} <= kinds, kinds
    # every encoding, on values made for it: int32, progressions, float32, float64 with
    # non-finite values and -0.0
    import numpy as np

    from sitegen.pages.charts import numbers

    made = [numbers(np.array([5, -3, 2**31 - 1, -(2**31) + 1, 7])), numbers(np.arange(0, 3000, 3)),
            numbers(np.array([0.5, np.nan, np.inf, -np.inf, -0.0], np.float32).astype(np.float64)),
            numbers(np.array([0.1, np.nan, 1e300, -np.inf, -0.0])), numbers(np.array([2**40, 1, 2**40 + 5])),
            numbers(np.concatenate([1.7e9 + np.arange(300) * 0.37, [np.nan, -0.0, np.inf], 1.7e9 + 3000 + np.arange(100) * 0.1]))]
    assert [next(iter(c)) for c in made] == ["i4", "ap", "f4", "f8", "f8", "f8d"]
    got = page.evaluate("cols => cols.map(c => window.sitegenExpand(c))", made)
    for col, js in zip(made, got):
        assert same(js, decode_numbers(col)), col
