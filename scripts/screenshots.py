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


SHOTS: dict[str, Callable] = {"hparams-view": hparams_view}


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
