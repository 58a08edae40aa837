#!/usr/bin/env python3
"""How the experiment browser (index) and comparison pages scale with many runs.

Generates an archive of N small runs (TensorBoard event files written directly: TFRecord framing
+ minimal Event protobufs, ~2 tags x 20 steps and a JSON config text each), builds the site, then
opens ``index.html`` over file:// in headless Chromium (/usr/bin/chromium) and reports:

- build time; sizes of index.html, of the index's first data file (index-data.js: the whole
  index before issue 26, its head since) and of its shards (index/*.js);
- first rows visible (first contentful paint: the first page of rows is in the HTML) and the
  page ready for input (the page script initialised), with the bytes loaded until then, over
  three opens (min / median / max);
- a search for a run that only a late shard holds (shards loaded on demand, as a user waits),
  then searches once every shard is there (the time the page itself takes, min / median / max);
- a group filter (a model: the shards it loads), two sorts, a page flip;
- time to open the whole-archive comparison page until its first chart is drawn (three opens),
  its bytes, and on a summarised page (issue 26) the time to expand a group.

``--code DIR`` builds with the sitegen of another checkout (e.g. main's, side by side);
``--keep DIR`` works in DIR and keeps it (the archive is generated once and reused).

Usage: python benchmarks/bench_index.py [--runs 10000] [--steps 20] [--keep DIR] [--code DIR]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import FIRST_FRAME

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]


def _mb(n: int) -> str:
    return f"{n / 1e6:.3f} MB"


def _spread(xs: list[float], unit: str = "s", digits: int = 3) -> str:
    return f"{min(xs):.{digits}f} / {statistics.median(xs):.{digits}f} / {max(xs):.{digits}f} {unit}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it")
    ap.add_argument("--code", type=Path, default=ROOT, help="the sitegen checkout to build with")
    ap.add_argument("--site", default="site", help="the site folder's name inside the work folder")
    ap.add_argument("--no-build", action="store_true", help="measure the site already built there")
    ap.add_argument("--index-only", action="store_true",
                    help="draw only the index (and the assets) of N runs made in memory: no archive, no run or comparison pages")
    ap.add_argument("--compare-only", action="store_true",
                    help="draw only the whole-archive comparison page (and the assets) of N runs made in memory, then open it")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(args.code.resolve()))  # (its sitegen first)
    from tests.support.eventgen import write_archive

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-index-"))
    archive, site = work / "archive", work / args.site
    out: dict = {"runs": args.runs, "code": str(args.code)}
    try:
        if args.compare_only:
            if not args.no_build:
                out["compare_draw_s"] = draw_compare_only(site, args.runs, args.steps)
            site = site.resolve()
            from playwright.sync_api import sync_playwright

            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                errors: list[str] = []
                measure_compare(browser, site, out, errors)
                out["errors"] = errors
                browser.close()
            print(f"page errors: {errors or 'none'}")
            print("RESULT " + json.dumps(out))
            return
        if args.index_only and not args.no_build:
            out["index_s"] = draw_index_only(site, args.runs)
        elif not archive.exists():
            t = time.perf_counter()
            write_archive(archive, args.runs, steps=args.steps, projects=10, models=10)
            print(f"generate {args.runs} runs: {time.perf_counter() - t:.1f} s")
        if not args.no_build and not args.index_only:
            from sitegen.config import Config
            from sitegen.pipeline.build import BuildOptions, build

            import sitegen

            print(f"building with {Path(sitegen.__file__).parent}")
            t = time.perf_counter()
            build(archive, site, BuildOptions(config=Config(title="bench"), use_cache=False, source_date_epoch=1_700_000_000))
            out["build_s"] = round(time.perf_counter() - t, 1)
            print(f"build: {out['build_s']} s")
        site = site.resolve()
        shards = sorted((site / "index").glob("*.js"))
        out["index_html"] = (site / "index.html").stat().st_size
        out["first_data"] = (site / "index-data.js").stat().st_size
        out["shards"] = len(shards)
        out["shard_bytes"] = sum(p.stat().st_size for p in shards)
        out["largest_shard"] = max((p.stat().st_size for p in shards), default=0)
        print(f"index.html: {_mb(out['index_html'])}; index-data.js (first data file): {_mb(out['first_data'])}; "
              f"{len(shards)} shards, {_mb(out['shard_bytes'])} in all, largest {_mb(out['largest_shard'])}")
        measure(site, args.runs, out)
        print("RESULT " + json.dumps(out))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _made_runs(n: int, lines_of) -> tuple[list, list[dict]]:
    """``n`` runs as ``write_archive`` names them (10 projects x 10 models), made in memory, and
    their configs, in the order a build lists them; ``lines_of(start)`` gives a run's lines, its
    end time and its last step."""
    from types import SimpleNamespace as NS

    from sitegen.model import slug

    runs, hps = [], []
    for i in range(n):
        p, m = i % 10, (i // 10) % 10
        name = f"project{p}/model{m}/run{i:05d}"
        start = 1.7e9 + i * 1000.0
        lines, end, last = lines_of(start)
        runs.append(NS(name=name, slug=slug(name), title=name, parts=tuple(name.split("/")), lines=lines, start_time=start,
                       end_time=end, last_step=last))
        hps.append({"lr": 10 ** -(2 + i % 3), "batch_size": 32 * (1 + i % 4), "seed": i, "model.depth": 8 + m, "model.width": 256})
    runs.sort(key=lambda r: r.name)
    return runs, [hps[int(r.name[-5:])] for r in runs]


def _write_site(site: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)


def draw_index_only(site: Path, n: int) -> float:
    """The index of ``n`` runs (two tags, a config each), drawn from runs made in memory with the
    code under test; its time."""
    import random
    from types import SimpleNamespace as NS

    from sitegen.config import Config
    from sitegen.pages import compare
    from sitegen.pages.assets import assets
    from sitegen.pages.index import index_files

    shutil.rmtree(site, ignore_errors=True)
    rnd = random.Random(0)

    def lines_of(start: float) -> tuple[list, float, int]:
        return [NS(tag=t, label="", series=NS(stats=NS(last_value=rnd.random()))) for t in ("train/loss", "eval/accuracy")], start + 9.5, 19

    runs, hps = _made_runs(n, lines_of)
    a = assets("en")
    t = time.perf_counter()
    files = dict(index_files(runs, hps, compare.groups(runs), Config(title="bench"), a, []))
    took = time.perf_counter() - t
    _write_site(site, {**a.files, **files})
    print(f"drew the index of {n} runs (in memory, no archive): {took:.1f} s")
    return round(took, 2)


def draw_compare_only(site: Path, n: int, steps: int) -> float:
    """The whole-archive comparison page of ``n`` runs (two tags of ``steps`` float32 points, a
    config each), made in memory and drawn with the code under test (as a build draws it without
    a cache); its time."""
    import random
    from types import SimpleNamespace as NS

    import numpy as np

    from sitegen.config import Config
    from sitegen.pages import compare
    from sitegen.pages.assets import assets
    from sitegen.pages.comparepage import compare_files

    shutil.rmtree(site, ignore_errors=True)
    rnd = random.Random(0)
    step = np.arange(steps, dtype=np.int64)

    def lines_of(start: float) -> tuple[list, float, int]:
        lines = []
        for t, sign in (("train/loss", -1.0), ("eval/accuracy", 1.0)):
            value = (1.0 + sign * step / steps * (0.5 + rnd.random()) + np.array([rnd.gauss(0, 0.05) for _ in step])).astype(np.float32).astype(np.float64)
            stats = NS(last_value=float(value[-1]), min_value=float(value.min()), max_value=float(value.max()))
            series = NS(step=step, wall_time=start + step * 0.5, value=value, levels=None, thinned=False, stats=stats)
            lines.append(NS(tag=t, label="", series=series))
        return lines, start + steps * 0.5, steps - 1

    runs, hps = _made_runs(n, lines_of)
    a = assets("en")
    group = compare.groups(runs)[0]
    t = time.perf_counter()
    files = compare_files(group, hps, Config(title="bench"), a)
    took = time.perf_counter() - t
    _write_site(site, {**a.files, **files})
    print(f"drew the whole-archive comparison page of {n} runs (in memory, no archive): {took:.1f} s")
    return round(took, 2)


def _settle(page) -> None:
    page.wait_for_selector("#runs:not([aria-busy])", state="attached", timeout=120_000)


def measure_compare(browser, site: Path, out: dict, errors: list[str]) -> None:
    """The whole-archive comparison page over three opens (a new page each): time to its first
    chart drawn (navigation start to the first line in the DOM), the page's own bytes and the
    bytes loaded until then; on a summarised page, then the time to expand its first group."""
    html = site / "compare" / "all" / "index.html"
    first, loaded, painted = [], [], []
    for k in range(3):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda e: errors.append(str(e)))
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.add_init_script(FIRST_FRAME)
        t = time.perf_counter()
        page.goto(html.as_uri())
        page.wait_for_selector(".chart.overlay svg g.smooth_marks path", state="attached", timeout=120_000)
        first.append(time.perf_counter() - t)
        page.wait_for_function("window.__firstChart", timeout=120_000)
        painted.append(page.evaluate("window.__firstChart") / 1000)
        local = [Path(u[len("file://"):].split("#")[0]) for u in requests if u.startswith("file://")]
        loaded.append(sum(q.stat().st_size for q in local if q.is_file()))
        if k == 2 and page.locator(".group-toggle").count():
            t = time.perf_counter()
            page.check(".group-toggle[data-r='0']")
            page.wait_for_selector("li[data-loaded]", state="attached", timeout=120_000)
            out["compare_expand_s"] = round(time.perf_counter() - t, 3)
        page.close()
    out["compare_first_frame"] = [round(x, 3) for x in painted]
    out["compare_all_s"] = round(min(first), 2)
    out["compare_first_chart"] = [round(x, 3) for x in first]
    out["compare_html"] = html.stat().st_size
    out["compare_bytes_to_chart"] = max(loaded)
    summarised = "compare_expand_s" in out
    print(f"open whole-archive comparison ({'summarised' if summarised else 'every run a line'}), first chart drawn: "
          f"{_spread(first)} (min/median/max of 3); page {_mb(out['compare_html'])}, "
          f"{_mb(max(loaded))} loaded until the first chart (with the site's scripts)")
    print(f"  read in the page (bench_pages' way: the first frame that paints a chart): {_spread(painted)}")
    if summarised:
        print(f"expand the first group (load its runs' script, draw them): {out['compare_expand_s']:.3f} s")


def measure(site: Path, runs: int, out: dict) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        errors: list[str] = []
        fcp, ready, loaded = [], [], []
        for _ in range(3):  # a new page each time: nothing cached in the page
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda e: errors.append(str(e)))
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto((site / "index.html").as_uri())
            page.wait_for_selector("#runs[data-ready]", state="attached", timeout=120_000)
            got = page.evaluate("""() => [performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? NaN,
                                         performance.now()]""")
            fcp.append(got[0] / 1000)
            ready.append(got[1] / 1000)
            local = [Path(u[len("file://"):]) for u in requests if u.startswith("file://")]
            loaded.append(sum(q.stat().st_size for q in local if q.is_file()))
            if _ != 2:
                page.close()
        out.update(fcp=fcp, ready=ready, bytes_to_ready=loaded)
        print(f"first rows visible (first contentful paint), {runs} runs: {_spread(fcp)} (min/median/max of 3)")
        print(f"ready for input: {_spread(ready)}; bytes loaded until then: {_mb(max(loaded))}")
        requests.clear()
        target = f"run{runs - 1:05d}"  # the last run: in a late shard (project 9, the last in name order)
        t = time.perf_counter()
        page.fill("#run-filter", target)
        _settle(page)
        page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 1", timeout=120_000)
        out["search_cold_s"] = round(time.perf_counter() - t, 3)
        out["search_cold_shards"] = sum(1 for u in requests if "/index/" in u)
        print(f"search for {target} (loads the shards it needs): {out['search_cold_s']:.3f} s, {out['search_cold_shards']} shards loaded")
        warm = []
        for q in ("lr=0.001", "model3 run0", "eval/accuracy", "run00042", "project7/model2"):
            warm.append(page.evaluate("""(q) => { const i = document.getElementById('run-filter'); const t0 = performance.now();
                i.value = q; i.dispatchEvent(new Event('input')); document.body.offsetHeight;
                return (performance.now() - t0) / 1000; }""", q))
        out["search_warm"] = warm
        print(f"search once the shards are loaded (5 queries, in-page time to rows drawn): {_spread(warm)}")
        page.fill("#run-filter", "")
        _settle(page)
        t = time.perf_counter()
        page.click("#runs thead th[data-col='last'] button")
        _settle(page)
        page.click("#runs thead th[data-col='m0'] button")
        _settle(page)
        out["two_sorts_s"] = round(time.perf_counter() - t, 3)
        print(f"two sorts over {runs} runs: {out['two_sorts_s']:.3f} s")
        t = time.perf_counter()
        page.click("#page-next")
        page.wait_for_function("document.getElementById('page-info').textContent.indexOf('2') !== -1")
        print(f"next page: {time.perf_counter() - t:.3f} s")
        if page.locator("#group-filter").count():  # since issue 26: a model's runs alone
            gpage = browser.new_page(viewport={"width": 1400, "height": 1000})
            requests = []
            gpage.on("request", lambda r: requests.append(r.url))
            gpage.goto((site / "index.html").as_uri())
            gpage.wait_for_selector("#runs[data-ready]", state="attached")
            t = time.perf_counter()
            gpage.select_option("#group-filter", "project9/model9")
            _settle(gpage)
            out["group_s"] = round(time.perf_counter() - t, 3)
            out["group_shards"] = sum(1 for u in requests if "/index/" in u)
            rows = gpage.locator("#runs tbody tr").count()
            print(f"group filter project9/model9: {out['group_s']:.3f} s, {rows} rows, {out['group_shards']} of "
                  f"{len(list((site / 'index').glob('*.js')))} shards loaded")
            gpage.close()
        if not (site / "compare" / "all" / "index.html").exists():  # (--index-only)
            out["errors"] = errors
            print(f"page errors: {errors or 'none'}")
            browser.close()
            return
        measure_compare(browser, site, out, errors)
        out["errors"] = errors
        print(f"page errors: {errors or 'none'}")
        browser.close()


if __name__ == "__main__":
    main()
