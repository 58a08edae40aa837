"""The experiment browser over file://: search across names, tags and hparams, sort, group, page."""
from __future__ import annotations

from pathlib import Path

from tests.support.sites import index_data


def _open(page, site: Path):
    page.goto((site / "index.html").as_uri())
    page.wait_for_selector("#runs[data-ready]", state="attached", timeout=20000)


def _index_data(site: Path) -> dict:
    return index_data(site)


def _settled(page) -> None:
    """The view drawn: the rows' shards load as scripts, after the action that needs them."""
    page.wait_for_selector("#runs:not([aria-busy])", state="attached", timeout=20000)


def _run_names(page) -> list[str]:
    _settled(page)
    return page.eval_on_selector_all("#runs tbody tr:not(.group-row) td:nth-child(4)", "ts => ts.map(t => t.textContent)")


def test_search_finds_runs_by_name_tag_and_hparam(page, many_runs_site: Path):
    _open(page, many_runs_site)
    assert page.locator("#runs tbody tr").count() == 200
    page.fill("#run-filter", "run00042")
    assert _run_names(page) == ["run00042"]
    page.fill("#run-filter", "lr=0.001 project1")
    names = _run_names(page)
    expected = [f"run{i:05d}" for i in range(200) if i % 3 == 1 and i % 4 == 1]
    assert sorted(names) == expected
    page.fill("#run-filter", "eval/accuracy")
    _settled(page)
    assert page.locator("#runs tbody tr").count() == 200
    page.fill("#run-filter", "no-such-thing")
    _settled(page)
    assert page.locator("#runs tbody tr").count() == 0
    assert "No run" in page.inner_text("#run-count")
    assert page.log.errors == [], page.log.errors
    assert all(u.startswith("file://") for u in page.log.requests)


def test_sort_group_and_page(page, many_runs_site: Path):
    _open(page, many_runs_site)
    data = _index_data(many_runs_site)
    m = data["metrics"].index("train/loss")
    page.click(f"#runs thead th[data-col='m{m}'] button")
    _settled(page)
    values = page.eval_on_selector_all(f"#runs tbody tr td.num:nth-of-type({data['depth'] + 6 + m})", "ts => ts.map(t => parseFloat(t.textContent))")
    assert len(values) == 200 and values == sorted(values)
    best = data["best"][m]  # run index -> "p" (best of its project) or "m" (of its model)
    assert sorted(best.values()).count("p") == 4  # one per project (many_runs_site has 4)
    assert "★" in page.locator("#runs tbody tr").first.inner_text()  # lowest loss first, best of its project
    page.select_option("#group-by", "0")
    _settled(page)
    groups = page.locator("#runs tbody tr.group-row")
    assert groups.count() == 4
    href = groups.first.locator("a").get_attribute("href")
    assert href.startswith("compare/") and (many_runs_site / href).is_file()
    page.select_option("#group-by", "-1")
    page.evaluate("() => { window.SITEGEN_INDEX.pageRows = 50; }")
    page.click("#runs thead th[data-col='run'] button")
    _settled(page)
    assert page.locator("#runs tbody tr").count() == 50
    assert page.is_visible("#pager")
    first = _run_names(page)
    page.click("#page-next")
    second = _run_names(page)
    assert first == [f"run{i:05d}" for i in range(50)] and second == [f"run{i:05d}" for i in range(50, 100)]
    assert page.log.errors == [], page.log.errors


def test_index_data_is_a_classic_script_within_budget(many_runs_site: Path):
    text = (many_runs_site / "index-data.js").read_text("utf-8")
    assert text.startswith("window.SITEGEN_INDEX=") and "<" not in text
    assert len(text.encode()) < 5_000_000 * 200 / 10_000  # scales to 10,000 runs within 5 MB
    html = (many_runs_site / "index.html").read_text("utf-8")
    assert '<script src="index-data.js"></script>' in html
