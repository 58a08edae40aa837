#!/usr/bin/env python3
"""How the experiment browser (index) and comparison pages scale with many runs.

Generates an archive of N small runs (TensorBoard event files written directly: TFRecord framing
+ minimal Event protobufs, ~2 tags x 20 steps and a JSON config text each), builds the site, then
opens ``index.html`` over file:// in headless Chromium and reports:

- build time, sizes of index.html / index-data.js / the largest comparison page;
- time to open the index (navigation start -> table ready, i.e. index-data.js parsed and the
  page script initialised), and the latency of a search, a sort and a page flip;
- time to open the whole-archive comparison page until its first chart is drawn.

Usage: python benchmarks/bench_index.py [--runs 10000] [--steps 20] [--keep DIR]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from tests.support.eventgen import write_archive  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-index-"))
    archive, site = work / "archive", work / "site"
    try:
        if not archive.exists():
            t = time.perf_counter()
            write_archive(archive, args.runs, steps=args.steps, projects=10, models=10)
            print(f"generate {args.runs} runs: {time.perf_counter() - t:.1f} s")
        from sitegen.pipeline.build import BuildOptions, build
        from sitegen.config import Config

        t = time.perf_counter()
        build(archive, site, BuildOptions(config=Config(title="bench"), use_cache=False))
        print(f"build: {time.perf_counter() - t:.1f} s")
        site = site.resolve()
        index_html = (site / "index.html").stat().st_size
        index_js = (site / "index-data.js").stat().st_size
        compare_js = max(p.stat().st_size for p in (site / "compare").glob("*/index.html"))
        print(f"index.html: {_mb(index_html)}; index-data.js: {_mb(index_js)}; largest comparison page: {_mb(compare_js)}")
        measure(site, args.runs)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def measure(site: Path, runs: int) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        opens = []
        for _ in range(3):
            t = time.perf_counter()
            page.goto((site / "index.html").as_uri())
            page.wait_for_selector("#runs[data-ready]", state="attached", timeout=30000)
            wall = time.perf_counter() - t
            nav = page.evaluate("() => performance.now()")
            opens.append((wall, nav))
        best = min(opens)
        print(f"open index ({runs} runs): {best[0]:.2f} s wall (page clock {best[1] / 1000:.2f} s); all tries: "
              + ", ".join(f"{w:.2f}" for w, _ in opens))
        rows = page.locator("#runs tbody tr").count()
        t = time.perf_counter()
        page.fill("#run-filter", "run00999")
        page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 1", timeout=30000)
        print(f"search (first, builds the search text): {time.perf_counter() - t:.3f} s; rows on first page: {rows}")
        t = time.perf_counter()
        page.fill("#run-filter", "lr=0.001")
        page.wait_for_function("document.querySelectorAll('#runs tbody tr').length > 1", timeout=30000)
        print(f"search (again): {time.perf_counter() - t:.3f} s")
        page.fill("#run-filter", "")
        t = time.perf_counter()
        page.click("#runs thead th[data-col='last'] button")
        page.wait_for_selector("#runs thead th[aria-sort]")
        page.click("#runs thead th[data-col='m0'] button")
        page.wait_for_selector("#runs thead th[data-col='m0'][aria-sort]")
        print(f"two sorts over {runs} runs: {time.perf_counter() - t:.3f} s")
        t = time.perf_counter()
        page.click("#page-next")
        page.wait_for_function("document.getElementById('page-info').textContent.indexOf('2') !== -1")
        print(f"next page: {time.perf_counter() - t:.3f} s")
        t = time.perf_counter()
        page.goto((site / "compare" / "all" / "index.html").as_uri())
        page.wait_for_selector(".chart.overlay svg g.smooth_marks path", state="attached", timeout=60000)
        print(f"open whole-archive comparison, first chart drawn: {time.perf_counter() - t:.2f} s")
        print(f"page errors: {errors or 'none'}")
        browser.close()


if __name__ == "__main__":
    main()
