#!/usr/bin/env python3
"""What pages cost a browser (issue 23's floors), in headless Chromium over file://:

- a run page of 46 charts (46 tags x 10,000 steps), scrolled from top to bottom chart by chart
  and back: JS heap after a forced garbage collection and DOM nodes (DevTools protocol
  ``Performance.getMetrics``), at the top, at the bottom and back at the top;
- a comparison page of 450 runs: time from navigation to the first frame that paints a chart
  (measured in the page; the chart must be on the screen).

Usage: python benchmarks/bench_pages.py [--tries 5] [--out benchmarks/results/pages.txt]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import FIRST_FRAME, write_events  # noqa: E402

from tests.support import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

GROUPS = ["train", "eval", "grad_norm", "lr", "sys"]


def _tags(n: int) -> list[str]:
    return [f"{GROUPS[i % len(GROUPS)]}/metric_{i:02d}" for i in range(n)]


def write_run(folder: Path, tags: list[str], steps: int, seed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    x = np.arange(steps)
    values = [np.float32(np.exp(-x / (steps / (2 + k % 5))) + rng.normal(0, 0.02, steps)) for k in range(len(tags))]
    walls = [1.7e9 + seed * 1e5 + x * 0.5 for _ in tags]
    write_events(folder / f"events.out.tfevents.{1700000000 + seed}.bench", tags, x, values, walls, file_wall=1.7e9 + seed * 1e5)


def build_site(archive: Path, site: Path) -> None:
    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build

    build(archive, site, BuildOptions(config=Config(title="pages"), use_cache=False, source_date_epoch=1))


def heap_and_nodes(page, cdp) -> tuple[float, int]:
    cdp.send("HeapProfiler.collectGarbage")
    got = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return got["JSHeapUsedSize"] / 1e6, int(got["Nodes"])


SCROLL = """async () => {
  const els = Array.from(document.querySelectorAll('.chart'));
  for (const e of els) {
    e.scrollIntoView();
    const t = Date.now();
    while (!(e.dataset.drawn || e.classList.contains('drawn')) && Date.now() - t < 10000) await new Promise(r => setTimeout(r, 20));
    await new Promise(r => setTimeout(r, 30));
  }
  await new Promise(r => setTimeout(r, 500));
  return els.length;
}"""


def run_page(browser, site: Path, tries: int) -> list[dict]:
    page_path = next(site.glob("runs/*/index.html"))
    out = []
    for _ in range(tries):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.goto(page_path.as_uri())
        page.wait_for_selector(".chart.drawn", timeout=60000)
        page.wait_for_timeout(500)
        top = heap_and_nodes(page, cdp)
        charts = page.evaluate(SCROLL)
        bottom = heap_and_nodes(page, cdp)
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_timeout(1000)
        back = heap_and_nodes(page, cdp)
        live = page.evaluate("document.querySelectorAll('.chart svg, .chart canvas').length")
        out.append({"charts": charts, "top": top, "bottom": bottom, "back": back, "views_at_end": live})
        page.close()
    return out




def compare_page(browser, site: Path, tries: int) -> list[float]:
    html = site / "compare" / "all" / "index.html"
    got = []
    for _ in range(tries):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.add_init_script(FIRST_FRAME)
        page.goto(html.as_uri(), wait_until="commit")
        page.wait_for_function("window.__firstChart", timeout=120000)
        in_view = page.evaluate("document.querySelector('.chart.overlay').getBoundingClientRect().top < innerHeight")
        if not in_view:
            raise SystemExit("the first chart is not on the screen when the page opens")
        got.append(page.evaluate("window.__firstChart") / 1000)
        page.close()
    return got


def _spread(xs: list[float], unit: str = "") -> str:
    return f"median {statistics.median(xs):.2f}{unit} (min {min(xs):.2f}, max {max(xs):.2f}, {len(xs)} tries)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=5)
    ap.add_argument("--runs", type=int, default=450)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pages.txt")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        one, many = Path(tmp) / "one", Path(tmp) / "many"
        write_run(one / "archive" / "proj" / "model" / "run", _tags(46), 10_000, 0)
        for i in range(args.runs):
            write_run(many / "archive" / f"project{i % 3}" / f"model{i % 5}" / f"run{i:04d}", _tags(6), 2_000, i)
        t = time.perf_counter()
        build_site(one / "archive", one / "site")
        build_site(many / "archive", many / "site")
        lines.append(f"sites built in {time.perf_counter() - t:.1f} s")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            got = run_page(browser, one / "site", args.tries)
            lines.append(f"run page of {got[0]['charts']} charts (46 tags x 10,000 steps), after a forced GC:")
            for where in ("top", "bottom", "back"):
                heap = [g[where][0] for g in got]
                nodes = [g[where][1] for g in got]
                lines.append(f"  {where:6s} JS heap {_spread(heap, ' MB')}; DOM nodes {_spread(nodes)}")
            lines.append(f"  chart views alive at the end: {[g['views_at_end'] for g in got]}")
            first = compare_page(browser, many / "site", args.tries)
            lines.append(f"comparison page of {args.runs} runs, navigation to first chart drawn: {_spread(first, ' s')}")
            browser.close()
    lines.append(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; floors: heap <= 50 MB, "
                 "DOM <= 5,000 nodes fully scrolled; first chart <= 1 s")
    text = "\n".join(lines)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    print(json.dumps({"written": str(args.out)}))


if __name__ == "__main__":
    main()
