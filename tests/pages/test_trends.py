"""Trend pages: the step detection, and a model's trend drawn in Chromium over file:// (English
and Chinese, no console error), by start time and by commit (over file:// and served with the
site's strict CSP, in dark mode), also with 1,000 runs."""
from __future__ import annotations

import json
import random
import re
import subprocess
import threading
from pathlib import Path

import pytest

from sitegen.config import Config
from sitegen.pages.trends import commit_rows
from sitegen.pipeline.build import BuildOptions, build
from sitegen.prepare.changes import RunState
from sitegen.prepare.trends import change_points, commit_trend, trend
from tests.support.corpus import write_metrics
from tests.support.trendgen import trend_site


def test_steps_are_found_and_noise_or_a_lone_outlier_is_not():
    rng = random.Random(7)
    noise = [rng.gauss(0.8, 0.01) for _ in range(40)]
    assert change_points(noise) == []
    assert change_points(noise[:20] + [v + 0.05 for v in noise[20:]]) == [20]
    assert change_points(noise[:20] + [0.5] + noise[21:]) == []  # one bad run is not a new level
    two = noise[:15] + [v - 0.1 for v in noise[15:30]] + [v + 0.1 for v in noise[30:]]
    assert change_points(two) == [15, 30]
    assert change_points([1.0] * 5 + [2.0] * 5) == [5] and change_points([1.0, 2.0, 3.0]) == []


def test_a_trend_band_is_the_last_level():
    states = [RunState(f"p/m/r{i:02d}", f"s{i}", "p/m", 1e9 + i, 1e9 + i + 1, 1, 1, None, {"acc": 0.5 if i < 6 else 0.8}, {"acc": 0.9})
              for i in range(12)]
    tr = trend("acc", states[::-1])  # (any order in: start order out)
    assert [s.name for s in tr.runs] == [f"p/m/r{i:02d}" for i in range(12)]
    assert tr.changes == [6] and tr.band == (1e9 + 6, pytest.approx(0.8), pytest.approx(0.8)) and tr.best == [0.9] * 12


@pytest.mark.parametrize("language, title", [("en", "Trend: vision/resnet"), ("zh-CN", "趋势：vision/resnet")])
def test_a_models_trend_page_draws_over_file(page, tmp_path: Path, language: str, title: str):
    logs, out = tmp_path / "logs", tmp_path / "site"
    for i in range(10):  # eval/acc steps up by 0.3 from the 6th run on
        write_metrics(logs / "vision" / "resnet" / f"r{i:02d}", 0, 5, seed=0 if i < 6 else 30, start=1_700_000_000 + 3600 * i)
    build(logs, out, BuildOptions(config=Config(language=language), cache=tmp_path / "cache"))
    site = out.resolve()
    pages = sorted(p.parent.name for p in site.glob("trends/*/index.html"))
    assert len(pages) == 2 and any(p.startswith("vision-resnet-") for p in pages)  # the model and the project
    html = next(site.glob("trends/vision-resnet-*/index.html"))
    text = html.read_text("utf-8")
    assert f"<h1>{title}</h1>" in text and "vision/resnet/r06" in text  # the change point, listed
    compare_page = next(site.glob("compare/vision-resnet-*/index.html")).read_text("utf-8")
    assert f'href="../../trends/{html.parent.name}/index.html"' in compare_page
    index = (site / "index.html").read_text("utf-8")
    linked = re.findall(r'<nav class="compare-links trend-links"[^>]*>(.*?)</nav>', index, re.S)[0]
    assert sorted(re.findall(r'href="trends/([^/"]+)/index.html"', linked)) == pages  # the model and the project, from the index
    page.goto(html.as_uri())
    page.wait_for_selector(".chart.drawn", timeout=30000)
    assert page.eval_on_selector_all(".chart", "cs => cs.length") == 2  # eval/acc and train/loss
    page.wait_for_function("document.querySelectorAll('.chart.drawn').length === 2", timeout=30000)
    dots = page.eval_on_selector(".chart.drawn", "c => c.querySelectorAll('path[role=graphics-symbol], .mark-symbol path').length")
    assert dots >= 10
    assert page.log.errors == []


def test_a_thousand_runs_draw_by_time_and_by_commit(page, tmp_path: Path):
    """The trend of a model with 1,000 runs (two levels), each with its own commit, in headless
    Chromium: both views draw every run, with the step found in each; how long they take is
    measured by ``benchmarks/bench_trends.py`` (the floor is 1 s)."""
    html = trend_site(tmp_path, 1000)
    text = html.read_text("utf-8")
    assert "p/m/run-0600" in text and "1000 of 1000 runs record a commit." in text
    page.goto(html.as_uri())
    page.wait_for_selector(".chart.by-time.drawn", timeout=30000)
    assert page.eval_on_selector(".chart.by-time.drawn", "c => c.querySelectorAll('[aria-roledescription=circle]').length") == 1000
    page.select_option("#trend-x", "commit")
    page.wait_for_selector(".chart.by-commit.drawn", timeout=30000)
    assert page.eval_on_selector(".chart.by-commit.drawn", "c => c.querySelectorAll('[aria-roledescription=circle]').length") == 1000
    assert page.locator(".by-commit .change-points li").count() == 1
    assert page.log.errors == []


def git_commits(folder: Path, n: int) -> list[str]:
    """A git repository with ``n`` commits; their hashes, oldest first."""
    folder.mkdir(parents=True)
    git = ["git", "-C", str(folder), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "."], check=True)
    for i in range(n):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"c{i}"], check=True)
    out = subprocess.run([*git, "log", "--reverse", "--format=%H"], check=True, capture_output=True, text=True).stdout
    return out.split()


@pytest.fixture(scope="module")
def commit_sites(tmp_path_factory) -> dict:
    """A model of 13 runs, 12 of which record one of 6 commits (two runs each, in CI's
    environment: GITHUB_SHA, GITHUB_REF), whose eval/acc steps up from the 4th commit on."""
    root = tmp_path_factory.mktemp("commits")
    shas = git_commits(root / "repo", 6)
    logs = root / "logs"
    for i in range(13):
        run = logs / "vision" / "resnet" / f"r{i:02d}"
        write_metrics(run, 0, 5, seed=(0 if i < 6 else 30) + i % 2, start=1_700_000_000 + 3600 * i)
        if i < 12:
            ref = "refs/tags/v1.0" if i // 2 == 0 else HOSTILE_BRANCH if i // 2 == 5 else "refs/heads/main"
            (run / "env.json").write_text(json.dumps({"GITHUB_SHA": shas[i // 2], "GITHUB_REF": ref}))
    sites = {}
    for language in ("en", "zh-CN"):
        sites[language] = root / f"site-{language}"
        build(logs, sites[language], BuildOptions(config=Config(language=language), cache=root / "cache"))
    return {"shas": shas, **sites}


HOSTILE_BRANCH = "refs/heads/<img src=x onerror=alert(1)>"


def watch(page) -> list[str]:
    """Console errors and warnings (Vega's among them), page errors, dialogs (a branch name
    from a log run as markup would open one)."""
    problems: list[str] = []
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    return problems


CSP_PROBE = """window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"""


@pytest.mark.parametrize("language, recorded, by_commit", [("en", "12 of 13 runs record a commit.", "commit"),
                                                           ("zh-CN", "13 个运行中有 12 个记录了提交。", "提交")])  # fmt: skip
def test_the_trend_by_commit(browser, commit_sites, language: str, recorded: str, by_commit: str):
    shas, site = commit_sites["shas"], commit_sites[language].resolve()
    html = next(site.glob("trends/vision-resnet-*/index.html"))
    text = html.read_text("utf-8")
    assert recorded in text and f'<option value="commit">{by_commit}</option>' in text
    project = next(site.glob("trends/vision-[0-9a-f]*/index.html")).read_text("utf-8")
    assert recorded in project  # (the project's page counts the same runs)
    ctx = browser.new_context(viewport={"width": 1200, "height": 1000}, color_scheme="light")
    try:
        page = ctx.new_page()
        problems = watch(page)
        page.goto(html.as_uri())
        page.wait_for_function("document.querySelectorAll('.chart.by-time.drawn').length === 2", timeout=30000)
        assert page.eval_on_selector_all(".chart.by-commit.drawn", "cs => cs.length") == 0  # drawn when asked for
        page.select_option("#trend-x", "commit")
        page.wait_for_function("document.querySelectorAll('.chart.by-commit.drawn').length === 2", timeout=30000)
        assert page.evaluate("location.hash") == "#x=commit"
        assert page.eval_on_selector_all(".chart.by-time", "cs => cs.every(c => c.hidden)")
        chart = page.locator(".chart.by-commit").first
        labels = chart.locator("g.role-axis[aria-label^='X-axis'] .role-axis-label text").all_text_contents()
        assert labels == ["v1.0", *(h[:7] for h in shas[1:])]  # commits in the order of their first run
        dots = chart.locator("[aria-roledescription=circle]")
        assert dots.count() == 12
        described = dots.evaluate_all("ds => ds.map(d => d.getAttribute('aria-label'))")
        assert all(any(h in d for h in shas) for d in described) and any("vision/resnet/r07" in d for d in described)
        dot = dots.nth(7)  # the run of commit 4 (r07), its full hash in the tooltip
        dot.hover()
        page.wait_for_selector("#vg-tooltip-element.visible", timeout=5000)
        tip = page.inner_text("#vg-tooltip-element")
        assert "vision/resnet/r07" in tip and shas[3] in tip and "main" in tip
        dots.nth(11).hover()  # (its branch is markup: shown as text)
        page.wait_for_function("document.querySelector('#vg-tooltip-element').textContent.includes('vision/resnet/r11')", timeout=5000)
        assert "<img src=x onerror=alert(1)>" in page.inner_text("#vg-tooltip-element")
        assert page.eval_on_selector_all("#vg-tooltip-element img", "imgs => imgs.length") == 0
        steps = page.locator(".by-commit .change-points li").first.inner_text()
        assert shas[3][:7] in steps  # the change point: at the 4th commit
        dot.click()
        page.wait_for_url("**/runs/vision-resnet-r07-*/index.html", timeout=10000)
        page.go_back()
        page.wait_for_function("document.querySelectorAll('.chart.by-commit.drawn').length === 2", timeout=30000)
        assert page.eval_on_selector("#trend-x", "s => s.value") == "commit"  # (from the hash)
        assert problems == []
    finally:
        ctx.close()


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_trend_by_commit_served_with_the_csp_in_dark_mode(browser, commit_sites, language: str):
    from sitegen.tools.serve import SiteServer

    site = commit_sites[language].resolve()
    server = SiteServer(site, 0, quiet=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ctx = browser.new_context(viewport={"width": 1200, "height": 1000}, color_scheme="dark")
    ctx.add_init_script(CSP_PROBE)
    try:
        page = ctx.new_page()
        problems = watch(page)
        rel = next(site.glob("trends/vision-resnet-*/index.html")).relative_to(site)
        response = page.goto(f"http://127.0.0.1:{server.server_address[1]}/{rel.as_posix()}#x=commit")
        assert "script-src 'self'" in response.headers["content-security-policy"]
        page.wait_for_function("document.querySelectorAll('.chart.by-commit.drawn').length === 2", timeout=30000)
        label = ".chart.by-commit svg .role-axis-label text"
        assert page.evaluate(f"document.querySelector('{label}').getAttribute('fill')") == "#9aa3b5"  # the dark theme's --muted
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(20, 23, 28)"
        assert page.evaluate("window.__csp") == [] and problems == []
    finally:
        ctx.close()
        server.shutdown()
        server.server_close()


def test_commit_rows_name_the_runs_of_a_commit_and_place_the_band_and_steps():
    states = [RunState(f"p/m/r{i:02d}", f"s{i}", "p/m", 1e9 + i, None, 1, 1, None, {"acc": 0.5 if i < 21 else 0.8}, {"acc": 0.9},
                       f"{i // 7:x}" * 40, "v1" if i < 7 else None, "main") for i in range(42)]  # fmt: skip
    ct = commit_trend("acc", states)
    cols = commit_rows(ct)
    rows = [dict(zip(cols, vals)) for vals in zip(*cols.values())]
    levels = [r for r in rows if r["k"] == "level"]
    assert [r["c"] for r in levels] == ct.labels == ["v1", "1111111", "2222222", "3333333", "4444444", "5555555"]
    assert levels[0]["s"] == "p/m/r00, p/m/r01, p/m/r02, p/m/r03, p/m/r04, … (+2)" and levels[0]["g"] == "v1 · main"
    assert [r["c"] for r in rows if r["k"] == "change"] == ["3333333"]
    (band,) = [r for r in rows if r["k"] == "band"]
    assert (band["c"], band["c2"]) == ("3333333", "5555555") and band["y"] == pytest.approx(0.8) == band["y2"]
    finals = [r for r in rows if r["k"] == "final"]
    assert len(finals) == 42 and finals[8]["h"] == "1" * 40 and finals[8]["u"] == "../../runs/s8/index.html"
