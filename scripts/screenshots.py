"""Make the README's screenshots from the example archive, so they can be made again when a page
changes: ``python scripts/screenshots.py [NAME ...]`` (from the repository root; no name: all).

It builds ``examples/archive`` into a temporary folder, opens pages in Debian's Chromium (the
tests' launcher settings, ``tests.support``) over ``file://`` and writes ``docs/<NAME>.png``.
Each shot is a function in ``SHOTS``: it gets the page and the site and returns what to capture.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import CHROMIUM, CHROMIUM_ARGS, EXAMPLE, brush_axis  # noqa: E402


def hparams_view(page, site: Path):
    """The NLP project's parallel coordinates, brushed on the learning rate and the optimizer,
    with the curves of the runs left above it."""
    page.goto((next(site.glob("compare/nlp-*/index.html"))).as_uri())
    page.wait_for_selector("#pc-chart .pc-axis", timeout=20000)
    brush_axis(page, "h:lr", 0.2, 0.9)
    opt = page.locator("#pc-chart .pc-axis[data-axis='h:optimizer'] .pc-tick-label", has_text="adamw")
    hit = page.locator("#pc-chart .pc-axis[data-axis='h:optimizer'] .pc-hit").bounding_box()
    label = opt.bounding_box()
    page.mouse.click(hit["x"] + hit["width"] / 2, label["y"] + label["height"] / 2)
    page.mouse.move(0, 0)
    page.wait_for_timeout(1500)
    return page.locator("#parallel")


class Clip:
    """A part of the page (boxes of several elements together, e.g. a chart and its tooltip)."""

    def __init__(self, page, *boxes: dict, pad: int = 8) -> None:
        self.page = page
        x0, y0 = min(b["x"] for b in boxes) - pad, min(b["y"] for b in boxes) - pad
        x1, y1 = max(b["x"] + b["width"] for b in boxes) + pad, max(b["y"] + b["height"] for b in boxes) + pad
        self.clip = {"x": max(0, x0), "y": max(0, y0), "width": x1 - max(0, x0), "height": y1 - max(0, y0)}

    def screenshot(self, path: str) -> None:
        self.page.screenshot(path=path, clip=self.clip)


def _nlp_page(page, site: Path):
    page.goto((next(site.glob("compare/nlp-*/index.html"))).as_uri())
    page.wait_for_selector(".chart.overlay.drawn svg", timeout=20000)
    page.wait_for_timeout(800)


def compare_page(page, site: Path):
    """The top of the vision/resnet18 comparison page as it opens: the toolbar, the run list, the
    first charts."""
    page.goto((next(site.glob("compare/vision-resnet18-*/index.html"))).as_uri())
    page.wait_for_selector(".chart.overlay.drawn svg", timeout=20000)
    page.wait_for_timeout(1500)
    return Clip(page, {"x": 0, "y": 0, "width": 1300, "height": 900}, pad=0)


def compare_tooltip(page, site: Path):
    """The NLP project's comparison page: the pointer over a chart, the rule at the nearest step and
    the tooltip listing every run's value there (smoothed and raw), the hovered run first."""
    _nlp_page(page, site)
    chart = page.locator(".chart.overlay.drawn").first
    chart.scroll_into_view_if_needed()
    box = chart.locator("svg").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.45, box["y"] + box["height"] * 0.35)
    page.wait_for_selector("#sg-tip:not([hidden])", timeout=5000)
    page.wait_for_timeout(300)
    card = chart.locator("xpath=ancestor::figure[1]").bounding_box()
    return Clip(page, card, page.locator("#sg-tip").bounding_box())


def compare_zoomed(page, site: Path):
    """The same page with "Ignore outliers" on and a step range dragged on one chart: every chart
    of the page zoomed to it (the toolbar's Reset zoom lit)."""
    _nlp_page(page, site)
    page.locator("#outliers").check()
    chart = page.locator(".chart.overlay.drawn").first
    chart.scroll_into_view_if_needed()
    box = chart.locator("svg").bounding_box()
    y = box["y"] + box["height"] * 0.4
    page.mouse.move(box["x"] + box["width"] * 0.35, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.55, y)
    page.mouse.move(box["x"] + box["width"] * 0.75, y)
    page.mouse.up()
    page.mouse.move(0, 0)
    page.wait_for_timeout(1500)
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_timeout(500)
    cards = page.locator("figure.card:not([hidden])")
    return Clip(page, page.locator("#chart-toolbar").bounding_box(), cards.nth(0).bounding_box(), cards.nth(1).bounding_box())


SHOTS: dict[str, Callable] = {"hparams-view": hparams_view, "compare-page": compare_page, "compare-tooltip": compare_tooltip, "compare-zoomed": compare_zoomed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help=f"shots to make, of {', '.join(SHOTS)} (default: all)")
    ap.add_argument("--language", default="en")
    args = ap.parse_args()
    unknown = [n for n in args.names if n not in SHOTS]
    if unknown:
        ap.error(f"no such shot: {', '.join(unknown)}")
    from playwright.sync_api import sync_playwright

    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build

    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        build(EXAMPLE, site, BuildOptions(config=Config(title="Example runs", language=args.language)))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1300, "height": 900}, device_scale_factor=1)
            for name in args.names or list(SHOTS):
                target = SHOTS[name](page, site.resolve())
                out = ROOT / "docs" / f"{name}.png"
                target.screenshot(path=str(out))
                print(out.relative_to(ROOT))
            browser.close()


if __name__ == "__main__":
    main()
