"""The parallel coordinates of a comparison page (hparams.js) in Chromium under the site's strict
CSP, both languages: the chosen metric as the last axis past the axis cap, axis values, brushes on
number and text axes that take runs off the curves and the run list, the brushes in the URL."""
from __future__ import annotations

import json
import random
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit

import pytest

from tests.pages.test_charts_browser import Served
from tests.support import brush_axis

N_RUNS = 10
OPTIMIZERS = ("adam", "sgd", "lamb")
HPARAMS = 15  # more than the 11 hyperparameter axes that fit beside the metric


def _config(i: int) -> dict:
    rnd = random.Random(i)
    cfg: dict = {f"p{k:02d}": round(rnd.uniform(0, 10), 3) for k in range(HPARAMS - 2)}
    cfg["optimizer"] = OPTIMIZERS[i % 3]
    cfg["lr"] = 10.0 ** -(2 + i % 4)
    return cfg


@pytest.fixture(scope="module", params=["en", "zh-CN"])
def site(request, tmp_path_factory) -> Path:
    from sitegen.config import Config, IndexConfig
    from sitegen.pipeline.build import BuildOptions, build
    from tests.support.eventgen import write_run

    root = tmp_path_factory.mktemp("hparams-" + request.param)
    for i in range(N_RUNS):
        write_run(root / "logs" / "proj" / "model" / f"run{i:02d}", tags=["train/loss", "eval/accuracy"], steps=40, seed=i,
                  start=1.7e9 + i * 1000.0, config=json.dumps(_config(i)))
    # the first key metric no run logs: the page's metric is the first one present
    config = Config(title="hp", language=request.param, index=IndexConfig(key_metrics=("none/such", "eval/accuracy", "train/loss")))
    build(root / "logs", root / "site", BuildOptions(config=config))
    return (root / "site").resolve()


@pytest.fixture
def served(browser, site):
    s = Served(browser, site)
    yield s
    s.ctx.close()


PAGE = "compare/all/index.html"
AXES = "() => Array.from(document.querySelectorAll('#pc-chart .pc-axis')).map(a => a.dataset.axis)"
# per drawn overlay chart, the runs it draws (from the view's own data)
DRAWN = """() => Array.from(document.querySelectorAll('.chart.overlay.drawn')).filter(e => e._view).map(e =>
  Array.from(new Set(e._view.data('rows').map(r => r.s))).sort())"""
LISTED = "() => Array.from(document.querySelectorAll('.run-list li')).filter(li => !li.hidden).map(li => li.querySelector('label').textContent.trim())"


def _brushes(url: str) -> dict:
    pairs = parse_qsl(urlsplit(url).fragment)
    return {b[0]: b[1:] for b in (json.loads(v) for k, v in pairs if k == "brush")}


def _run(label: str) -> int:
    return int(label.rsplit("run", 1)[1])


def _expected(brushes: dict) -> list[str]:
    """The run labels inside every brush, from the configs the runs were written with."""
    out = []
    for i in range(N_RUNS):
        cfg, ok = _config(i), True
        for axis, b in brushes.items():
            kind, key = axis.split(":", 1)
            assert kind == "h", axis
            v = cfg[key]
            ok = ok and (v in b[0] if isinstance(b[0], list) else b[0] <= v <= b[1])
        if ok:
            out.append(f"proj/model/run{i:02d}")
    return out


def _wait_drawn(page, want: list[str]) -> list:
    """The overlay charts' runs once every chart draws ``want`` (or what they draw after 30 s)."""
    text = json.dumps(want, separators=(",", ":"))  # as JSON.stringify writes it
    page.wait_for_function(f"() => {{ const d = ({DRAWN})(); return d.length >= 2 && d.every(x => JSON.stringify(x) === {json.dumps(text)}); }}",
                           timeout=30000)
    return page.evaluate(DRAWN)


def _drag(page, axis: str, f0: float, f1: float) -> None:
    brush_axis(page, axis, f0, f1)
    page.wait_for_timeout(300)


def _click_category(page, axis: str, value: str) -> None:
    """A click on a text axis at the height of one of its values' labels."""
    a = page.locator(f"#pc-chart .pc-axis[data-axis='{axis}']")
    a.locator(".pc-hit").scroll_into_view_if_needed()
    label = a.locator(".pc-tick-label", has_text=value)
    lb, hb = label.bounding_box(), a.locator(".pc-hit").bounding_box()
    page.mouse.click(hb["x"] + hb["width"] / 2, lb["y"] + lb["height"] / 2)
    page.wait_for_timeout(300)


def test_the_metric_is_the_last_axis_past_the_axis_cap_and_can_be_chosen(served):
    served.open(PAGE)
    page = served.page
    axes = page.evaluate(AXES)
    assert len(axes) == 12 and axes[-1] == "m:eval/accuracy"  # the first key metric present
    assert axes[:-1] == ["h:lr", "h:optimizer"] + [f"h:p{k:02d}" for k in range(9)]
    assert page.locator("#pc-axes-left").count() == 1
    # every axis shows its values: the range of a number axis, each value of a text axis
    opt = page.locator("#pc-chart .pc-axis[data-axis='h:optimizer'] .pc-tick-label").all_text_contents()
    assert sorted(opt) == sorted(OPTIMIZERS)
    lr = page.locator("#pc-chart .pc-axis[data-axis='h:lr'] .pc-tick-label").all_text_contents()
    assert lr[0] == "1e-5" and lr[-1] == "0.01"
    # the select is keyboard reachable: focus it and pick the other metric with the arrow keys
    page.locator("#pc-metric").focus()
    page.keyboard.press("ArrowDown")
    page.wait_for_timeout(300)
    assert page.evaluate(AXES)[-1] == "m:train/loss"
    assert dict(parse_qsl(urlsplit(page.url).fragment))["pc"] == "train/loss"
    page.reload()
    served.settle()
    assert page.evaluate(AXES)[-1] == "m:train/loss" and page.locator("#pc-metric").input_value() == "train/loss"
    served.clean()


def test_brushes_take_the_runs_outside_them_off_the_curves_and_survive_a_reload(served):
    served.open(PAGE)
    page = served.page
    everyone = [f"proj/model/run{i:02d}" for i in range(N_RUNS)]
    assert _wait_drawn(page, everyone)
    # a range on a number axis (lr, on a log scale: 1e-5 ... 1e-2)
    _drag(page, "h:lr", 0.2, 0.75)
    first = _brushes(page.url)
    assert list(first) == ["h:lr"]
    want = _expected(first)
    assert 0 < len(want) < N_RUNS
    assert all(d == want for d in _wait_drawn(page, want))
    assert page.evaluate(LISTED) == want
    assert page.locator("#pc-chart .pc-line.pc-out").count() == N_RUNS - len(want)
    one_brush = page.url
    # a value of a text axis: brushes on two axes combine
    _click_category(page, "h:optimizer", "sgd")
    both = _brushes(page.url)
    assert both["h:optimizer"] == [["sgd"]] and both["h:lr"] == first["h:lr"]
    want2 = _expected(both)
    assert want2 == [r for r in want if _config(_run(r))["optimizer"] == "sgd"] and want2
    assert all(d == want2 for d in _wait_drawn(page, want2))
    assert page.evaluate(LISTED) == want2
    # a reload restores the brushes and what the charts draw
    page.reload()
    served.settle()
    assert _brushes(page.url) == both
    assert all(d == want2 for d in _wait_drawn(page, want2))
    assert page.locator("#pc-chart .pc-brushed").count() == 2
    # Back: the one brush before
    page.go_back()
    assert all(d == want for d in _wait_drawn(page, want))
    assert page.url == one_brush and page.evaluate(LISTED) == want
    page.go_forward()
    assert all(d == want2 for d in _wait_drawn(page, want2))
    # double-click an axis: its brush goes; the keyboard's Clear: every brush goes
    hit = page.locator("#pc-chart .pc-hit[data-axis='h:optimizer']")
    hit.dblclick()
    assert _brushes(page.url) == first
    assert all(d == want for d in _wait_drawn(page, want))
    page.locator("#pc-clear").focus()
    page.keyboard.press("Enter")
    assert _brushes(page.url) == {}
    assert all(d == everyone for d in _wait_drawn(page, everyone))
    assert page.evaluate(LISTED) == everyone and page.locator("#pc-clear").is_disabled()
    served.clean()


def test_unticked_runs_stay_unticked_under_a_brush_and_the_count_says_so(served):
    served.open(PAGE)
    page = served.page
    page.locator("details.run-picker").evaluate("d => d.open = true")
    page.locator(".run-toggle[data-r='0']").uncheck()
    _click_category(page, "h:optimizer", "adam")  # runs 0, 3, 6, 9
    want = [f"proj/model/run{i:02d}" for i in (3, 6, 9)]
    assert all(d == want for d in _wait_drawn(page, want))
    assert page.locator("#runs-shown").inner_text() == f"3 / {N_RUNS}"
    page.locator("#pc-clear").click()
    rest = [f"proj/model/run{i:02d}" for i in range(1, N_RUNS)]
    assert all(d == rest for d in _wait_drawn(page, rest))  # the unticked run stays off
    served.clean()


def test_brushes_over_file_urls(page, site):
    page.goto((site / PAGE).as_uri() + "#brush=" + quote('["h:optimizer",["lamb"]]'))
    want = [f"proj/model/run{i:02d}" for i in (2, 5, 8)]
    assert all(d == want for d in _wait_drawn(page, want))
    # a drag over a text axis keeps the values in its range: lamb and sgd (sorted: adam at the bottom)
    _drag(page, "h:optimizer", 0.0, 0.6)
    assert _brushes(page.url) == {"h:optimizer": [["lamb", "sgd"]]}
    want = _expected(_brushes(page.url))
    assert want == [f"proj/model/run{i:02d}" for i in range(N_RUNS) if i % 3]
    assert all(d == want for d in _wait_drawn(page, want))
    assert page.log.errors == []


def test_brushes_from_the_keyboard_and_a_resized_window(served):
    """Tab to an axis: the arrows make and move a brush on a number axis (Shift widens it), move
    over the values of a text axis (Space takes one in); Escape clears; a press held makes one
    history entry. A window made narrower draws the plot again to its width, the brush kept."""
    served.open(PAGE)
    page = served.page
    everyone = [f"proj/model/run{i:02d}" for i in range(N_RUNS)]
    assert _wait_drawn(page, everyone)
    hit = page.locator("#pc-chart .pc-hit[data-axis='h:p00']")
    assert hit.get_attribute("tabindex") == "0" and "p00" in hit.get_attribute("aria-label")
    hit.focus()
    depth = page.evaluate("history.length")
    page.keyboard.press("ArrowUp")  # a first press: the middle fifth
    first = _brushes(page.url)["h:p00"]
    values = sorted(_config(i)["p00"] for i in range(N_RUNS))
    span = values[-1] - values[0]
    assert first[0] < first[1] and abs((first[1] - first[0]) - 0.2 * span) < 0.01 * span
    for _ in range(3):
        page.keyboard.press("ArrowUp")
    moved = _brushes(page.url)["h:p00"]
    assert abs((moved[0] - first[0]) - 0.15 * span) < 0.01 * span and abs((moved[1] - moved[0]) - (first[1] - first[0])) < 0.01 * span
    page.keyboard.press("Shift+ArrowUp")
    wider = _brushes(page.url)["h:p00"]
    assert wider[0] < moved[0] and wider[1] > moved[1]
    assert page.evaluate("history.length") == depth + 1  # the presses in a row: one entry
    want = _expected(_brushes(page.url))
    assert all(d == want for d in _wait_drawn(page, want)) and page.evaluate(LISTED) == want
    # a text axis: the cursor moves over the values (sorted: adam at the bottom), Space takes one
    page.locator("#pc-chart .pc-hit[data-axis='h:optimizer']").focus()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    assert page.locator("#pc-chart .pc-axis[data-axis='h:optimizer'] .pc-cursor").get_attribute("visibility") == "visible"
    page.keyboard.press("Space")
    both = _brushes(page.url)
    assert both["h:optimizer"] == [["lamb"]] and both["h:p00"] == wider
    want2 = _expected(both)
    assert all(d == want2 for d in _wait_drawn(page, want2))
    # a narrower window: the plot is drawn again to its width, brushes and focus kept
    before = page.evaluate("document.querySelector('#pc-chart svg').getAttribute('width')")
    page.set_viewport_size({"width": 700, "height": 900})
    page.wait_for_function("w => document.querySelector('#pc-chart svg').getAttribute('width') !== w", arg=before, timeout=10000)
    assert page.locator("#pc-chart .pc-brushed").count() == 2
    assert page.evaluate("document.activeElement.getAttribute('data-axis')") == "h:optimizer"
    # Escape clears the focused axis's brush only
    page.keyboard.press("Escape")
    assert _brushes(page.url) == {"h:p00": wider}
    page.locator("#pc-chart .pc-hit[data-axis='h:p00']").focus()
    page.keyboard.press("Delete")
    assert _brushes(page.url) == {}
    assert all(d == everyone for d in _wait_drawn(page, everyone))
    served.clean()
