"""The line charts (charts.js) in Chromium, served under the site's strict CSP: the all-runs
hover tooltip, zoom, outliers, log scales, the view in the URL, run colours; both languages."""
from __future__ import annotations

import mimetypes
from pathlib import Path

import pytest

from sitegen.tools.serve import SECURITY_HEADERS

ORIGIN = "http://site.test/"
PROBE = """window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"""
POSITIONS = 240


@pytest.fixture(scope="module", params=["en", "zh-CN"])
def site(request, tmp_path_factory) -> Path:
    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build
    from tests.support import EXAMPLE

    out = tmp_path_factory.mktemp("charts-" + request.param) / "site"
    build(EXAMPLE, out, BuildOptions(config=Config(title="Example runs", language=request.param)))
    return out.resolve()


class Served:
    """A page of ``site`` at ORIGIN with the site's security headers; every request outside it,
    CSP violation and console error is kept."""

    def __init__(self, browser, site: Path, **context) -> None:
        self.ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, **context)
        self.ctx.add_init_script(PROBE)
        self.outside: list[str] = []
        self.errors: list[str] = []
        self.ctx.route("**/*", self._route)
        self.site = site
        self.page = self.ctx.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _route(self, r) -> None:
        url = r.request.url
        if not url.startswith(ORIGIN):
            self.outside.append(url)
            r.abort()
            return
        f = self.site / url[len(ORIGIN):].split("#")[0].split("?")[0]
        if not f.is_file():
            r.fulfill(status=404, body="")
            return
        kind = mimetypes.guess_type(f.name)[0] or "application/octet-stream"
        r.fulfill(status=200, body=f.read_bytes(), headers={**SECURITY_HEADERS, "Content-Type": kind})

    def open(self, rel: str) -> None:
        self.page.goto(ORIGIN + rel)
        self.settle()

    def settle(self) -> None:
        self.page.wait_for_function("document.querySelectorAll('.chart.overlay.drawn svg').length > 0", timeout=20000)
        self.page.wait_for_timeout(300)

    def clean(self) -> None:
        assert self.page.evaluate("window.__csp") == []
        assert self.outside == []
        assert self.errors == [], self.errors


@pytest.fixture
def served(browser, site):
    s = Served(browser, site)
    yield s
    s.ctx.close()


def _busiest_run(site: Path) -> str:
    """The run page with the most line charts."""
    pages = sorted(site.glob("runs/*/index.html"))
    best = max(pages, key=lambda p: p.read_text("utf-8").count('class="chart overlay"'))
    return best.relative_to(site).as_posix()


# the rows a chart draws, the x and y ranges and the scale types: what "the drawn data" is
ROW = """e => {
  const v = e._view, rows = v.data('rows');
  return {tag: e.closest('figure').dataset.tag, n: rows.length,
          rows: rows.map(r => [r.s, r.x, r.y === null ? null : +r.y.toPrecision(9), r.raw, r.k]),
          xd: v.signal('xd'), yd: v.signal('yd'), hl: v.signal('hl'), y: v.scale('y').type, x: v.scale('x').type};
}"""
# of the charts drawn now
DRAWN = "() => Array.from(document.querySelectorAll('.chart.overlay.drawn')).filter(e => e._view && !e.closest('figure').hidden).map(" + ROW + ")"

# every shown chart's, each scrolled into view in turn until it is drawn and settled (charts are
# drawn near the screen, and on a page of many, dropped far from it), then back to the top
# until the first is drawn again; ``i``: that chart alone, left in view; ``{first: n}``: the
# first n shown charts only
READY = """e => e._view && e.classList.contains('drawn') && !e.hasAttribute('aria-busy')"""
EACH_DRAWN = """async (i) => {
  const ready = """ + READY + """, row = """ + ROW + """, sleep = ms => new Promise(r => setTimeout(r, ms));
  const settled = async e => { let calm = 0; const t = Date.now();
    while (calm < 2 && Date.now() - t < 20000) { calm = ready(e) ? calm + 1 : 0; await sleep(50); } };
  let els = Array.from(document.querySelectorAll('figure.card:not([hidden]) .chart.overlay'));
  if (i !== null && typeof i === 'object') { els = els.slice(0, i.first); i = null; }
  if (i !== null) { els[i].scrollIntoView(); await settled(els[i]); return els[i]._view ? row(els[i]) : null; }
  const out = [];
  for (const e of els) { e.scrollIntoView(); await settled(e); out.push(row(e)); }
  window.scrollTo(0, 0);
  if (els.length) { await sleep(100); await settled(els[0]); }
  return out;
}"""

# for the tooltip on screen: how many runs the drawn data has at its step (those whose points
# reach that far on both sides), from the view's own data, not from charts.js's
EXPECTED = """(el) => {
  const tip = document.getElementById('sg-tip');
  if (!tip || tip.hidden) return [false, 0, 0];
  const x = Number(tip.dataset.x), ext = {};
  for (const r of el._view.data('rows')) {
    const e = ext[r.s] || (ext[r.s] = [Infinity, -Infinity]);
    e[0] = Math.min(e[0], r.x); e[1] = Math.max(e[1], r.x);
  }
  const want = Object.values(ext).filter(e => e[0] <= x && x <= e[1]).length;
  return [true, tip.querySelectorAll('tr').length - 1, want];
}"""

PLOT = """(el) => {
  const v = el._view, svg = el.querySelector('svg'), r = svg.getBoundingClientRect();
  const k = r.width / Number(svg.getAttribute('width')), o = v.origin(), p = v.padding();
  return {x: r.left + (o[0] + p.left) * k, y: r.top + (o[1] + p.top) * k, w: v.width() * k, h: v.height() * k};
}"""


def _sweep(page, chart) -> tuple[int, int]:
    """Points the pointer at POSITIONS places spread over the chart's plot area; how many showed
    the tooltip with every run drawn at that step."""
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(100)
    handle = chart.element_handle()
    box = page.evaluate(PLOT, handle)
    hits = 0
    for i in range(POSITIONS):
        fx = (i + 0.5) / POSITIONS
        fy = ((i * 7) % 23 + 0.5) / 23
        page.mouse.move(box["x"] + 1 + fx * (box["w"] - 2), box["y"] + 1 + fy * (box["h"] - 2))
        shown, rows, want = page.evaluate(EXPECTED, handle)
        hits += shown and rows == want and want > 0
    page.mouse.move(0, 0)
    return hits, POSITIONS


def _hit_rate(served: Served, rel: str, charts: int = 4) -> float:
    served.open(rel)
    page = served.page
    hits = total = 0
    els = page.locator(".chart.overlay")
    for i in range(min(charts, els.count())):
        el = els.nth(i)
        el.scroll_into_view_if_needed()
        page.wait_for_function("e => e.classList.contains('drawn') && e._view && e.querySelector('svg')", arg=el.element_handle(), timeout=20000)
        h, n = _sweep(page, el)
        hits += h
        total += n
    rate = hits / total
    print(f"tooltip hit rate {rel}: {hits}/{total} = {rate:.3f}")
    served.clean()
    return rate


def test_hover_tooltip_lists_every_run_on_the_comparison_page(served):
    assert _hit_rate(served, "compare/all/index.html") >= 0.95


def test_hover_tooltip_on_a_run_page(served, site):
    assert _hit_rate(served, _busiest_run(site)) >= 0.95


def test_hover_highlights_the_run_in_every_chart(served):
    served.open("compare/all/index.html")
    page = served.page
    # the drawn chart of the most runs (a run of it is likely drawn in another chart too)
    busiest = page.evaluate("""() => { const els = Array.from(document.querySelectorAll('.chart.overlay.drawn'));
      const n = e => new Set(e._view.data('rows').map(r => r.s)).size;
      return els.indexOf(els.reduce((a, b) => n(b) > n(a) ? b : a)); }""")
    chart = page.locator(".chart.overlay.drawn").nth(busiest)
    chart.scroll_into_view_if_needed()
    box = page.evaluate(PLOT, chart.element_handle())
    page.mouse.move(box["x"] + box["w"] * 0.6, box["y"] + box["h"] * 0.5)
    near = page.locator("#sg-tip tr.near td.name").inner_text()
    drawn = page.evaluate(DRAWN)
    with_run = [d for d in drawn if any(r[0] == near for r in d["rows"])]
    assert len(with_run) >= 2 and all(d["hl"] == near for d in with_run)
    assert all(d["hl"] == "" for d in drawn if d not in with_run)
    page.mouse.move(0, 0)
    assert all(d["hl"] == "" for d in page.evaluate(DRAWN))
    served.clean()


def _drag(page, chart, f0: float, f1: float) -> None:
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(100)
    box = page.evaluate(PLOT, chart.element_handle())
    y = box["y"] + box["h"] / 2
    page.mouse.move(box["x"] + box["w"] * f0, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["w"] * (f0 + f1) / 2, y)
    page.mouse.move(box["x"] + box["w"] * f1, y)
    page.mouse.up()
    page.mouse.move(0, 0)  # (the hover highlight is not part of the view)
    page.wait_for_timeout(400)




def _state(page) -> dict:
    """The toolbar, which charts are shown, and the drawn data of the first 8 of them (every
    control acts on all charts alike or on the first one; reading all 41 of the example's
    comparison page took 2 of CI's 20 minutes)."""
    drawn = page.evaluate(EACH_DRAWN, {"first": 8})
    controls = page.evaluate("""() => ({smoothing: document.getElementById('smoothing').value,
      shown: Array.from(document.querySelectorAll('figure.card:not([hidden]) .chart.overlay')).map(e => e.closest('figure').dataset.tag),
      label: document.getElementById('smoothing-value').textContent, x: document.getElementById('x-axis').value,
      y: document.getElementById('y-scale').value, outliers: document.getElementById('outliers').checked,
      link: document.getElementById('zoom-link').checked, tags: document.getElementById('tag-filter').value,
      runs: (document.getElementById('run-regex') || {}).value,
      ticked: Array.from(document.querySelectorAll('.run-toggle')).map(t => t.checked),
      log: Array.from(document.querySelectorAll('.chart-log')).map(b => b.getAttribute('aria-pressed'))})""")
    return {"controls": controls, "drawn": drawn}


def _set(page, selector: str, value) -> None:
    page.evaluate("""([s, v]) => { const e = document.querySelector(s);
      if (e.type === 'checkbox') e.checked = v; else e.value = v;
      e.dispatchEvent(new Event(e.tagName === 'SELECT' || e.type === 'checkbox' ? 'change' : 'input', {bubbles: true})); }""", [selector, value])
    page.wait_for_timeout(400)


def _steps(page, is_compare: bool):
    """Each control of the toolbar, set in turn (a function per step)."""
    chart = lambda: page.locator(".chart.overlay.drawn").first  # noqa: E731
    steps = [
        ("smoothing", lambda: _set(page, "#smoothing", "0.9")),
        ("outliers", lambda: _set(page, "#outliers", True)),
        ("log", lambda: page.locator(".chart-log").first.click()),
        ("zoom", lambda: _drag(page, chart(), 0.2, 0.7)),
        ("y", lambda: _set(page, "#y-scale", "log")),
        ("x", lambda: _set(page, "#x-axis", "relative")),
        ("link", lambda: _set(page, "#zoom-link", False)),
        ("tags", lambda: _set(page, "#tag-filter", "loss|acc")),
    ]
    if is_compare:
        steps += [
            ("untick", lambda: _set(page, ".run-toggle[data-r='1']", False)),
            ("runs", lambda: _set(page, "#run-regex", "bert|vision")),
        ]
    return steps


@pytest.mark.timeout(900)  # a loaded machine draws slowly
@pytest.mark.parametrize("kind", ["compare", "run"])
def test_every_control_round_trips_through_the_url(served, site, kind):
    rel = "compare/all/index.html" if kind == "compare" else _busiest_run(site)
    served.open(rel)
    page = served.page
    history = [(page.url, _state(page))]
    for name, do in _steps(page, kind == "compare"):
        do()
        page.wait_for_timeout(300)
        now = _state(page)
        assert now != history[-1][1], f"{name} changed nothing"
        assert page.url != history[-1][0], f"{name} is not in the URL"
        history.append((page.url, now))
        page.reload()
        served.settle()
        again = _state(page)
        assert again["controls"] == now["controls"], f"{name}: controls"
        assert [d["tag"] for d in again["drawn"]] == [d["tag"] for d in now["drawn"]], f"{name}: charts"
        assert again == now, f"{name} did not survive a reload"
    # back and forward show what was shown before
    for url, want in reversed(history[-4:-1]):
        page.go_back()
        page.wait_for_timeout(500)
        assert page.url == url
        assert _state(page) == want
    page.go_forward()
    page.wait_for_timeout(500)
    assert _state(page) == history[-3][1]
    served.clean()


def test_zoom_applies_to_every_chart_and_double_click_resets(served):
    served.open("compare/all/index.html")
    page = served.page
    before = page.evaluate(DRAWN)
    _drag(page, page.locator(".chart.overlay.drawn").nth(1), 0.25, 0.6)
    zoomed = page.evaluate(DRAWN)
    xd = zoomed[0]["xd"]
    assert all(d["xd"] == xd for d in zoomed) and xd != before[0]["xd"]
    assert all(r[1] >= xd[0] - 1e9 for d in zoomed for r in d["rows"])
    assert sum(d["n"] for d in zoomed) < sum(d["n"] for d in before)
    box = page.evaluate(PLOT, page.locator(".chart.overlay.drawn").first.element_handle())
    page.mouse.dblclick(box["x"] + box["w"] / 2, box["y"] + box["h"] / 2)
    page.wait_for_timeout(400)
    # by tag: a chart may have been drawn since (charts are drawn as they near the screen)
    after = {d["tag"]: d["xd"] for d in page.evaluate(DRAWN)}
    assert {d["tag"]: after.get(d["tag"]) for d in before} == {d["tag"]: d["xd"] for d in before}
    assert all(x != xd for x in after.values())  # and none is left zoomed
    served.clean()


def test_y_range_follows_the_smoothed_lines_and_ignores_outliers(served):
    served.open("compare/all/index.html")
    page = served.page
    _set(page, "#smoothing", "0.95")
    for d in page.evaluate(DRAWN):
        ys = [r[2] for r in d["rows"] if r[2] is not None]
        raws = [r[3] for r in d["rows"] if r[3] is not None]
        if not ys:
            continue
        lo, hi = d["yd"]
        assert lo <= min(ys) and max(ys) <= hi  # every smoothed point is in range
        span = (max(ys) - min(ys)) or abs(max(ys)) or 1
        assert hi - lo <= span * 1.2 + 1e-12  # and the range is theirs, not the raw lines'
        if max(raws) > max(ys) + span:  # a spike of the raw data stays outside
            assert hi < max(raws)
    _set(page, "#outliers", True)
    for d in page.evaluate(DRAWN):
        ys = sorted(r[2] for r in d["rows"] if r[2] is not None)
        if len(ys) > 10:
            assert d["yd"][0] >= ys[0] - (ys[-1] - ys[0]) * 0.1 and d["yd"][1] <= ys[-1] + (ys[-1] - ys[0]) * 0.1
    served.clean()


def test_unticking_runs_then_filtering_tags_keeps_the_ticks(served):
    served.open("compare/all/index.html")
    page = served.page
    page.locator("details.run-picker").evaluate("d => d.open = true")
    page.locator(".run-toggle").nth(0).uncheck()
    page.locator(".run-toggle").nth(2).uncheck()
    ticked = page.evaluate("Array.from(document.querySelectorAll('.run-toggle')).map(t => t.checked)")
    page.locator("#tag-filter").fill("loss")
    page.wait_for_timeout(300)
    assert page.evaluate("Array.from(document.querySelectorAll('.run-toggle')).map(t => t.checked)") == ticked
    assert not ticked[0] and not ticked[2]
    names = page.evaluate("Array.from(document.querySelectorAll('.run-toggle')).map(t => t.parentNode.textContent.trim())")
    for d in page.evaluate(DRAWN):
        assert not any(r[0] in (names[0], names[2]) for r in d["rows"])
    served.clean()


def test_non_finite_values_are_marked_and_never_bridged_on_comparison_pages(served, site):
    found = 0
    for path in sorted(site.glob("compare/*/index.html")):
        served.open(path.relative_to(site).as_posix())
        page = served.page
        for i in range(page.locator("figure.card:not([hidden]) .chart.overlay").count()):
            d = page.evaluate(EACH_DRAWN, i)
            gaps = [r for r in d["rows"] if r[4] != ""]
            if not gaps:
                continue
            found += 1
            assert all(r[2] is None and r[3] is None for r in gaps)
            fig = page.locator(f"figure.card[data-tag='{d['tag']}']")
            assert fig.locator(".mark-rule line, .mark-rule path").count() >= len({r[1] for r in gaps})
            # the line of the run with the gap is cut there: its path starts anew after it
            paths = fig.locator("g.mark-line path").evaluate_all("ps => ps.map(p => (p.getAttribute('d') || '').split('M').length - 1)")
            assert max(paths) >= 2
        if found:
            break
    assert found, "the example has no NaN on a comparison page"
    served.clean()


def _fnv(text: str) -> int:
    """FNV-1a over UTF-16 code units: charts.js's colour hash, written a second time."""
    h, data = 0x811C9DC5, text.encode("utf-16-le")
    for i in range(0, len(data), 2):
        h = ((h ^ int.from_bytes(data[i : i + 2], "little")) * 0x01000193) & 0xFFFFFFFF
    return h


def test_a_run_has_one_colour_on_every_page(served, site):
    served.open("compare/all/index.html")
    page = served.page
    palette = page.evaluate("window.SITEGEN_CHARTS.palette")
    assert len(palette) >= 20 and len(set(palette)) == len(palette)
    assert palette[:6] == ["#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9"]  # Okabe-Ito
    # the colour of each run on the comparison page: from the drawn view's colour scale
    on_compare = page.evaluate("""() => {
      const out = {};
      document.querySelectorAll('.chart.overlay.drawn').forEach(e => {
        const v = e._view, d = v.scale('color').domain();
        d.forEach(n => { out[n] = v.scale('color')(n); });
      });
      return out;
    }""")
    runs = page.evaluate("window.SITEGEN_PAGE.runs.map(r => [r.n, r.h.split('/')[3]])")
    slugs = {n: slug for n, slug in runs}
    checked = 0
    for name, colour in on_compare.items():
        if name not in slugs:
            continue  # a sub-run's line
        slug = slugs[name]
        assert colour == palette[_fnv(slug) % len(palette)], name  # the function, by a second hand
        served.open(f"runs/{slug}/index.html")
        run_colours = page.evaluate("""() => Array.from(document.querySelectorAll('.chart.overlay.drawn')).map(e => {
          const ch = window.SITEGEN_PAGE.charts[Number(e.dataset.chart)], v = e._view;
          const i = ch.ks.indexOf(ch.ks.find(k => !k.includes(' · ')));
          return i < 0 ? null : v.scale('color')(v.scale('color').domain()[i]);
        }).filter(Boolean)""")
        assert run_colours and set(run_colours) == {colour}, slug
        checked += 1
        if checked >= 3:
            break
    assert checked == 3
    page.goto(ORIGIN + "index.html")
    page.wait_for_selector("#runs tbody .swatch")
    swatches = page.evaluate("""() => Array.from(document.querySelectorAll("#runs tbody a[href^='runs/']")).map(a =>
      [a.getAttribute('href').split('/')[1], a.previousElementSibling.style.backgroundColor])""")
    assert len(swatches) == len(list(site.glob("runs/*/index.html")))

    def rgb(c: str) -> str:
        return f"rgb({int(c[1:3], 16)}, {int(c[3:5], 16)}, {int(c[5:7], 16)})"

    assert all(bg == rgb(palette[_fnv(slug) % len(palette)]) for slug, bg in swatches)
    # two visible runs of one colour: the second is dashed
    keys = page.evaluate("""() => { const C = window.SITEGEN_CHARTS, seen = {}, out = [];
      for (let i = 0; out.length < 2 && i < 500; i++) { const k = 'run-' + i, c = C.colour(k);
        if (seen[c]) out.push(seen[c], k); seen[c] = k; } return C.styles(out.slice(0, 2)); }""")
    assert keys[0]["colour"] == keys[1]["colour"] and keys[0]["dash"] != keys[1]["dash"]
    served.clean()


def test_the_view_survives_a_reload_over_file_urls(page, site):
    page.goto((site / "compare" / "all" / "index.html").as_uri())
    page.wait_for_function("document.querySelectorAll('.chart.overlay.drawn svg').length > 0", timeout=20000)
    _set(page, "#smoothing", "0.3")
    _set(page, "#y-scale", "log")
    assert "smoothing=0.30" in page.url and "y=log" in page.url
    # every shown chart, each drawn in turn (how many are drawn at a moment depends on timing)
    before = page.evaluate(EACH_DRAWN, None)
    page.reload()
    page.wait_for_function("document.querySelectorAll('.chart.overlay.drawn svg').length > 0", timeout=20000)
    assert len(before) > 1 and page.evaluate(EACH_DRAWN, None) == before
    assert page.locator("#smoothing-value").inner_text() == "0.30"
    assert page.log.errors == []


DARK_BG, LIGHT_BG = "rgb(20, 23, 28)", "rgb(255, 255, 255)"  # --bg of each theme (site.css)
THEMED = """() => { const g = e => getComputedStyle(e), tip = document.getElementById('sg-tip');
  // a swatch and a line in the palette's darkest colour, as charts.js paints and Vega draws them
  const sw = window.SITEGEN_CHARTS.paint(document.body.appendChild(document.createElement('span')), '#333333');
  sw.className = 'swatch';
  const svg = document.querySelector('.chart.overlay svg'), path = document.createElementNS('http://www.w3.org/2000/svg', 'path');
  path.setAttribute('stroke', '#333333');
  svg.appendChild(path);
  const out = {body: g(document.body).backgroundColor, tip: g(tip).backgroundColor, tipText: g(tip).color,
    near: g(tip.querySelector('tr.near td')).backgroundColor, filter: g(document.getElementById('tag-filter')).backgroundColor,
    reset: g(document.getElementById('zoom-reset')).backgroundColor, swatch: g(sw).backgroundColor, line: g(path).stroke};
  sw.remove(); path.remove();
  return out;
}"""


def test_tooltip_toolbar_and_palette_follow_dark_mode(browser, site):
    s = Served(browser, site, color_scheme="dark")
    try:
        s.open("compare/all/index.html")
        page = s.page

        def hover() -> dict:
            chart = page.locator(".chart.overlay.drawn").first
            chart.scroll_into_view_if_needed()
            box = page.evaluate(PLOT, chart.element_handle())
            page.mouse.move(box["x"] + box["w"] * 0.5, box["y"] + box["h"] * 0.5)
            page.wait_for_selector("#sg-tip:not([hidden]) tr.near")
            return page.evaluate(THEMED)

        dark = hover()
        assert dark["body"] == dark["tip"] == dark["filter"] == dark["reset"] == DARK_BG, dark
        assert dark["tipText"] == "rgb(223, 227, 234)" and dark["near"] not in (LIGHT_BG, DARK_BG), dark
        assert dark["swatch"] == dark["line"] == "rgb(187, 187, 187)", dark  # #333333 lightened
        page.mouse.move(0, 0)
        page.locator("#theme-toggle").click()  # the switch: light at once, without a redraw
        light = hover()
        assert light["body"] == light["tip"] == light["filter"] == light["reset"] == LIGHT_BG, light
        assert light["swatch"] == light["line"] == "rgb(51, 51, 51)", light
        s.clean()
    finally:
        s.ctx.close()


def test_charts_far_from_the_screen_give_their_views_up_and_come_back_the_same(served):
    """A page of many charts keeps the views near the screen only (a 46-chart run page drawn whole
    held 150 MB of heap); a chart dropped is drawn again, the same, when it comes back."""
    served.open("compare/all/index.html")
    page = served.page
    n = page.locator("figure.card:not([hidden]) .chart.overlay").count()
    assert n > 24, n  # (a page of 24 charts or fewer draws them all at once and keeps them)
    first = page.evaluate(EACH_DRAWN, 0)
    last = page.evaluate(EACH_DRAWN, n - 1)
    height = page.evaluate("document.documentElement.scrollHeight")
    assert first is not None and last is not None
    alive = page.evaluate("document.querySelectorAll('.chart.overlay svg').length")
    assert 0 < alive < n / 2, (alive, n)
    assert page.evaluate("() => { const e = document.querySelector('.chart.overlay'); return !e._view && !e.querySelector('svg') && !e.dataset.drawn; }")
    assert page.evaluate(EACH_DRAWN, 0) == first
    assert page.evaluate("document.documentElement.scrollHeight") == height  # a dropped chart keeps its place
    served.clean()
