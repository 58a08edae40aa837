#!/usr/bin/env python3
"""How long a trend page of 1,000 runs (each with its own commit) takes to draw its chart in
headless Chromium over file://, by start time and by commit (the issue's floor: <= 1 s).

Each try opens the page afresh (``#x=time`` or ``#x=commit``) and reports the time from the page
parsed (DOMContentLoaded: Vega's bundle loaded) to the chart drawn, and from navigation to drawn.

Usage: python benchmarks/bench_trends.py [--runs 1000] [--tries 7] [--out benchmarks/results/trends-1000-runs.txt]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support.trendgen import trend_site  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--tries", type=int, default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "trends-1000-runs.txt")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        html = trend_site(Path(tmp), args.runs)
        lines.append(f"trend page of {args.runs} runs ({args.runs} commits): {html.stat().st_size / 1e6:.2f} MB")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for view in ("time", "commit"):
                draws, loads, errors = [], [], []
                for _ in range(args.tries):
                    page = browser.new_page()
                    page.on("pageerror", lambda e: errors.append(str(e)))
                    start = time.perf_counter()
                    page.goto(f"{html.as_uri()}#x={view}")
                    page.wait_for_selector(f".chart.by-{view}.drawn", timeout=60000)
                    loads.append(time.perf_counter() - start)
                    ready, drawn = page.evaluate("[performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd, performance.now()]")
                    draws.append((drawn - ready) / 1000)
                    page.close()
                lines.append(
                    f"by {view}: chart drawn after the page was parsed: median {statistics.median(draws):.2f} s "
                    f"(min {min(draws):.2f}, max {max(draws):.2f}); opened and drawn: median {statistics.median(loads):.2f} s "
                    f"(min {min(loads):.2f}, max {max(loads):.2f}); {len(draws)} tries; page errors: {len(errors)}"
                )
            browser.close()
    lines.append(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; floor: <= 1 s")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    args.out.write_text(text)


if __name__ == "__main__":
    main()
