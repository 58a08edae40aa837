"""The site in a real Chromium (issue 23, items 4, 7 and 9): a phone-wide layout without sideways
scrolling, dark mode that follows the system and a remembered switch, visible keyboard focus,
the running badge and ticked runs opened as a comparison; no console error, CSP violation or
request outside the site, in English and Chinese."""
from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import unquote

import pytest

SDE = 1_700_100_000
CSP_PROBE = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', e => window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));
"""
DARK_BG = "rgb(20, 23, 28)"  # --bg of the dark theme (site.css)


def _archive(root: Path) -> Path:
    from tests.support.eventgen import write_run

    arch = root / "archive"
    tags = ["train/loss", "eval/loss", "eval/accuracy", "grad_norm/a-very-long-tag-name-that-must-wrap-on-a-phone", "lr"]
    for i, name in enumerate(["projA/m1/r1", "projA/m1/r2", "projA/m2/r3", "projB/m1/r4"]):
        write_run(arch / name, tags=tags, steps=60, seed=i, start=1.6e9 + i * 1000, config=f"lr: {0.1 / (i + 1)}\nbatch_size: {16 * (i + 1)}\n")
    live = write_run(arch / "projB" / "m1" / "live", tags=["train/loss"], steps=20, seed=7, start=SDE - 900)
    with open(live, "ab") as f:
        f.write(b"\x07garb")  # a record still being written
    return arch


@pytest.fixture(scope="module")
def ux_sites(tmp_path_factory) -> dict[str, Path]:
    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build

    root = tmp_path_factory.mktemp("ux")
    arch = _archive(root)
    out = {}
    for lang in ("en", "zh-CN"):
        out[lang] = root / f"site-{lang}"
        build(arch, out[lang], BuildOptions(config=Config(title="ux", language=lang), use_cache=False, source_date_epoch=SDE))
    return out


@pytest.fixture
def served(ux_sites):
    """Each language's site over HTTP with the site's headers (its strict CSP among them)."""
    from sitegen.tools.serve import SiteServer

    servers = {lang: SiteServer(site.resolve(), 0, quiet=True) for lang, site in ux_sites.items()}
    for s in servers.values():
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield {lang: f"http://127.0.0.1:{s.server_address[1]}/" for lang, s in servers.items()}
    for s in servers.values():
        s.shutdown()
        s.server_close()


def _context(browser, **kw):
    ctx = browser.new_context(**kw)
    ctx.add_init_script(CSP_PROBE)
    return ctx


def _watch(page) -> list[str]:
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    return problems


def _rel_pages(site: Path) -> list[str]:
    site = site.resolve()
    run = next(p for p in sorted(site.glob("runs/*/index.html")) if p.parent.name.startswith("proja-m1-r1-"))
    compare = next(p for p in sorted(site.glob("compare/*/index.html")) if p.parent.name.startswith("proja-"))
    return ["index.html", run.relative_to(site).as_posix(), compare.relative_to(site).as_posix(), "compare/all/index.html"]


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_phone_width_without_sideways_scrolling_under_the_csp(browser, served, ux_sites, lang):
    base = served[lang]
    ctx = _context(browser, viewport={"width": 390, "height": 844}, color_scheme="dark")
    try:
        page = ctx.new_page()
        problems = _watch(page)
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        for rel in _rel_pages(ux_sites[lang]):
            page.goto(base + rel, wait_until="load")
            if page.locator(".chart").count():
                page.wait_for_selector(".chart svg", timeout=20_000)
                page.wait_for_timeout(300)
            widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert widths[0] <= widths[1] == 390, f"{rel}: {widths}"
            if "/runs/" in rel:  # one column of charts, each within the screen
                boxes = page.eval_on_selector_all("figure.card", "fs => fs.map(f => f.getBoundingClientRect()).map(r => [r.left, r.right])")
                assert boxes and all(0 <= left and right <= 390 for left, right in boxes), boxes
                assert len({round(left) for left, _ in boxes}) == 1
            assert page.evaluate("window.__cspViolations") == [], rel
            assert page.evaluate("getComputedStyle(document.body).backgroundColor") == DARK_BG  # the system's choice
        assert problems == []
        assert requests and all(r.startswith(base) for r in requests), [r for r in requests if not r.startswith(base)]
    finally:
        ctx.close()


def test_dark_mode_switch_is_remembered_and_themes_the_charts(browser, ux_sites):
    site = ux_sites["en"].resolve()
    run_page, index = (site / _rel_pages(site)[1]).as_uri(), (site / "index.html").as_uri()
    ctx = _context(browser, viewport={"width": 1200, "height": 900}, color_scheme="light")
    try:
        page = ctx.new_page()
        problems = _watch(page)
        page.goto(run_page)
        page.wait_for_selector(".chart svg", timeout=20_000)
        toggle = page.locator("#theme-toggle")
        assert toggle.is_visible() and toggle.get_attribute("aria-pressed") == "false"
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"
        label = ".chart svg .role-axis-label text"
        light_fill = page.evaluate(f"getComputedStyle(document.querySelector('{label}')).fill")
        toggle.click()
        assert page.evaluate("document.documentElement.dataset.theme") == "dark" and toggle.get_attribute("aria-pressed") == "true"
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == DARK_BG
        dark_fill = page.evaluate(f"getComputedStyle(document.querySelector('{label}')).fill")
        assert dark_fill != light_fill and page.evaluate("getComputedStyle(document.querySelector('.chart svg')).backgroundColor") in (
            "rgba(0, 0, 0, 0)", "transparent")
        assert page.evaluate(f"document.querySelector('{label}').getAttribute('fill')") == "#6b7385"  # drawn light
        page.goto(index)  # another page of the site: the choice is remembered
        assert page.evaluate("document.documentElement.dataset.theme") == "dark"
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == DARK_BG
        page.goto(run_page)  # and the charts are drawn in the dark theme's colours (any renderer)
        page.wait_for_selector(".chart svg", timeout=20_000)
        assert page.evaluate(f"document.querySelector('{label}').getAttribute('fill')") == "#9aa3b5"
        page.goto(index)
        page.reload()
        page.locator("#theme-toggle").click()
        page.reload()
        assert page.evaluate("document.documentElement.dataset.theme") == "light"
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"
        assert problems == []
    finally:
        ctx.close()


def test_keyboard_focus_is_visible(browser, ux_sites):
    site = ux_sites["en"].resolve()
    ctx = _context(browser, viewport={"width": 1200, "height": 900})
    try:
        page = ctx.new_page()
        page.goto((site / "index.html").as_uri())
        page.wait_for_selector("#runs[data-ready]", state="attached")
        seen = []
        for _ in range(40):
            page.keyboard.press("Tab")
            tag, cls, outline = page.evaluate(
                "(() => { const e = document.activeElement, s = getComputedStyle(e); return [e.tagName, e.className, s.outlineStyle + ' ' + s.outlineWidth]; })()"
            )
            seen.append((tag, cls))
            if tag in ("A", "BUTTON", "INPUT", "SELECT"):
                assert outline == "solid 2px", (tag, cls, outline)
        kinds = {t for t, _ in seen}
        assert {"A", "BUTTON", "INPUT"} <= kinds, seen  # links, sort buttons, the search and the ticks
    finally:
        ctx.close()


def test_running_badge_and_ticked_runs_open_as_a_comparison(browser, ux_sites):
    site = ux_sites["en"].resolve()
    ctx = _context(browser, viewport={"width": 1200, "height": 900})
    try:
        page = ctx.new_page()
        problems = _watch(page)
        page.goto((site / "index.html").as_uri())
        page.wait_for_selector("#runs[data-ready]", state="attached")
        badges = page.locator("#runs a.running")
        assert badges.count() == 1 and badges.first.inner_text() == "live"
        assert page.evaluate("getComputedStyle(document.querySelector('#runs a.running'), '::after').content") == '"running"'
        link = page.locator("#compare-ticked")
        assert link.is_hidden()
        rows = page.locator("#runs tbody tr")
        names = [rows.nth(i).locator("td").nth(3).inner_text() for i in range(rows.count())]
        for name in ("r1", "r3"):  # two models of one project
            rows.nth(names.index(name)).locator("input.run-tick").check()
        assert link.is_visible() and "(2)" in link.inner_text()
        href = link.get_attribute("href")
        slugs = sorted(unquote(href.split("#runs=", 1)[1]).split(","))
        assert href.startswith("compare/proja-") and len(slugs) == 2  # the project's page, not all runs
        page.fill("#run-filter", "r3")  # re-rendered rows keep their ticks
        page.wait_for_selector("#runs:not([aria-busy])", state="attached")  # (a search may load row shards first)
        assert page.locator("#runs tbody input.run-tick:checked").count() == 1
        link.click()
        page.wait_for_selector(".chart.overlay svg", timeout=20_000)
        assert page.url.endswith(href.split("/", 1)[1].split("#")[0] + "#" + href.split("#", 1)[1])
        ticked = page.eval_on_selector_all(
            ".run-toggle", "ts => ts.filter(t => t.checked).map(t => window.SITEGEN_PAGE.runs[Number(t.dataset.r)].h.split('/').slice(-2)[0])"
        )
        assert sorted(ticked) == slugs
        assert page.locator("#runs-shown").inner_text().startswith("2 / ")
        assert page.locator(".adhoc-note").is_visible()
        page.wait_for_timeout(300)
        drawn = page.evaluate("Array.from(new Set(document.querySelector('.chart.overlay')._view.data('rows').map(r => r.s))).sort()")
        assert len(drawn) == 2, drawn  # only the ticked runs' lines
        assert problems == []
    finally:
        ctx.close()
