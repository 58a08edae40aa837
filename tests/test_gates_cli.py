"""``sitegen build --gate`` and ``sitegen check`` on logs written by tensorboardX: a failed gate
is exit code 5 (not 1, "built with problems"), the site is still published, the results are in
changes.json, on the index and for the run page, and in the GitHub Actions step summary."""
from __future__ import annotations

import json
from pathlib import Path

from sitegen.cli import EXIT_GATES, EXIT_OK, EXIT_USAGE, EXIT_WARNINGS
from tests.support.cli import run_sitegen
from tests.support.corpus import write_metrics

CONFIG = """title = "Gated"
[gates]
baseline = "best"
rules = [
  "vision/*: eval/acc >= 0.5",
  "*/*: train/loss <= baseline * 1.05",
]
"""


def test_a_failed_gate_exits_5_and_is_reported_everywhere(tmp_path: Path):
    logs, out, cache, config = tmp_path / "logs", tmp_path / "site", tmp_path / "cache", tmp_path / "sitegen.toml"
    config.write_text(CONFIG)
    write_metrics(logs / "vision" / "resnet" / "r0", 0, 20, seed=1)  # last loss 0.11
    write_metrics(logs / "vision" / "resnet" / "r1", 0, 20, seed=0)  # 0.10 <= 0.11 * 1.05
    summary = tmp_path / "summary.md"
    args = ["build", logs, "--out", out, "--cache", cache, "--config", config, "--gate"]
    first = run_sitegen(*args, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert first.returncode == EXIT_OK, first.stderr
    gates = json.loads((out / "changes.json").read_text("utf-8"))["gates"]
    assert gates["counts"] == {"pass": 3, "fail": 0, "missing": 0, "no_baseline": 1} and gates["failed"] == 0
    text = summary.read_text("utf-8")
    assert text.startswith("# What's new\n") and "## Gates" in text and text.count("| pass |") == 3

    again = run_sitegen(*args, env={"GITHUB_STEP_SUMMARY": str(summary)})  # nothing changed: the live site is kept
    assert again.returncode == EXIT_OK and "no new run to gate" in again.stderr
    assert summary.read_text("utf-8").endswith("Nothing changed since the last build.\n")

    write_metrics(logs / "vision" / "resnet" / "r2", 0, 20, seed=5)  # 0.15 > 0.10 * 1.05
    live = out.resolve()
    failed = run_sitegen(*args)
    assert failed.returncode == EXIT_GATES == 5 and EXIT_GATES not in (EXIT_WARNINGS, EXIT_USAGE, 3, 4)
    assert out.resolve() != live  # published all the same
    assert ("gate failed: vision/resnet/r2: */*: train/loss <= baseline * 1.05 (sitegen.toml line 6): "
            "train/loss = 0.15 not <= 0.105 (best so far)") in failed.stderr
    doc = json.loads((out / "changes.json").read_text("utf-8"))
    assert doc["gates"]["evaluated"] == ["vision/resnet/r2"] and doc["gates"]["failed"] == 1
    index = (out / "index.html").read_text("utf-8")
    assert 'class="gates gates-failed"' in index and "Gates: 1 passed, 1 failed, 0 with a missing metric." in index
    script = (out / "gates.js").read_text("utf-8")
    assert script.startswith("window.SITEGEN_GATES={") and '"fail","train/loss = 0.15 not \\u003c= 0.105 (best so far)"' in script
    run_page = next((out / "runs").glob("vision-resnet-r2-*/index.html")).read_text("utf-8")
    assert '<script src="../../gates.js"></script>' in run_page and 'id="gates"' in run_page

    checked = run_sitegen("check", out)
    assert checked.returncode == EXIT_GATES and "gate failed: vision/resnet/r2" in checked.stderr
    lenient = tmp_path / "lenient.toml"
    lenient.write_text('[gates]\nrules = ["*/*: train/loss <= best * 1.6", "*/*: eval/missing >= 1"]\nmissing = "skip"\n')
    ok = run_sitegen("check", out, "--config", lenient)
    assert ok.returncode == EXIT_OK, ok.stderr
    assert run_sitegen("check", tmp_path).returncode == EXIT_USAGE  # no changes.json there
