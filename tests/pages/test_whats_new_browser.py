"""The What's new panel, the "new" badge and a run page's gates in Chromium over file://, in
English and Chinese, with no console error."""
from __future__ import annotations

from pathlib import Path

import pytest

from sitegen.config import Config, GatesConfig
from sitegen.pipeline.build import BuildOptions, build
from tests.support.corpus import write_metrics


@pytest.mark.parametrize("language, fail, new", [("en", "FAIL", "new"), ("zh-CN", "未通过", "新")])
def test_panel_badge_and_run_gates(page, tmp_path: Path, language: str, fail: str, new: str):
    logs, out = tmp_path / "logs", tmp_path / "site"
    write_metrics(logs / "vision" / "resnet" / "r0", 0, 10, seed=0)
    write_metrics(logs / "vision" / "resnet" / "r1", 0, 10, seed=5)  # its loss is above r0's
    gates = GatesConfig(rules=("*/*: train/loss <= best",))
    build(logs, out, BuildOptions(config=Config(language=language, gates=gates), cache=tmp_path / "cache"))
    site = out.resolve()
    page.goto((site / "index.html").as_uri())
    page.wait_for_selector("#runs[data-ready]", state="attached", timeout=20000)
    assert page.is_visible("#whats-new") and page.is_visible(".gates-failed")
    badges = page.eval_on_selector_all("#runs td.fresh", "ts => ts.map(t => getComputedStyle(t, '::after').content)")
    assert badges == [f'"{new}"', f'"{new}"']
    page.fill("#run-filter", "r1")  # rows the page script draws carry the badge too
    page.wait_for_function("document.querySelectorAll('#runs tbody tr').length === 1")
    assert page.eval_on_selector("#runs tbody td.fresh", "t => t.getAttribute('data-badge')") == new
    run_page = next(site.glob("runs/vision-resnet-r1-*/index.html"))
    page.goto(run_page.as_uri())
    page.wait_for_selector("#gates:not([hidden])", timeout=20000)
    assert page.inner_text("#gates li.gate-fail strong") == fail
    assert "train/loss" in page.inner_text("#gates li.gate-fail code")
    page.goto(next(site.glob("runs/vision-resnet-r0-*/index.html")).as_uri())
    page.wait_for_selector("#gates li.gate-no_baseline", timeout=20000)  # the first run of its model
    assert page.log.errors == []
