"""``sitegen report RUN_OR_GROUP --site SITE --out FILE.md|.html`` on a site built from
tensorboardX logs: the run's metrics against its baselines, its gates and links; a model's
summary as one self-contained HTML file."""
from __future__ import annotations

import re
from pathlib import Path

from sitegen.config import Config, GatesConfig
from sitegen.pipeline.build import BuildOptions, build
from tests.support.cli import run_sitegen
from tests.support.corpus import write_metrics


def test_run_and_model_reports(tmp_path: Path):
    logs, out = tmp_path / "logs", tmp_path / "site"
    for i, seed in enumerate((2, 0, 4)):  # last train/loss 0.12, 0.10, 0.14 (steps 0-19)
        write_metrics(logs / "vision" / "resnet" / f"r{i}", 0, 20, seed=seed, start=1_700_000_000 + 3600 * i)
    (logs / "vision" / "resnet" / "r2" / "env.json").write_text('{"GITHUB_SHA": "3f786850e387550fdab836ed7e6dc881de23001b", "GITHUB_REF": "refs/tags/v1.2"}')
    gates = GatesConfig(rules=("*/*: train/loss <= best * 1.1",))
    build(logs, out, BuildOptions(config=Config(title="Nightly", gates=gates), cache=tmp_path / "cache"))
    config = tmp_path / "sitegen.toml"
    config.write_text('title = "Nightly"\nbase_url = "https://reports.example.org/reports/"\n')

    md = tmp_path / "r2.md"
    r = run_sitegen("report", "vision/resnet/r2", "--site", out, "--out", md, "--config", config)
    assert r.returncode == 0, r.stderr
    text = md.read_text("utf-8")
    assert text.startswith("# Run report: vision/resnet/r2\n")
    assert "(https://reports.example.org/reports/runs/vision-resnet-r2-" in text
    assert "- Commit: `3f786850e387550fdab836ed7e6dc881de23001b` v1.2\n" in text  # (recorded in its environment)
    # last 0.14 against the best of the 2 earlier runs (0.10) and their median (0.11)
    assert re.search(r"\| train/loss \| 0\.14 \| 0\.14 \| 0\.1 \| \+0\.04 \(\+40\.00%\) \| 0\.11 \| \+0\.03 \(\+27\.27%\) \|", text), text
    assert "| \\*/\\*: train/loss \\<= best \\* 1.1 | vision/resnet/r2 | 0.14 | FAIL |" in text

    page = tmp_path / "model.html"
    r = run_sitegen("report", "vision/resnet", "--site", out, "--out", page)
    assert r.returncode == 0, r.stderr
    html = page.read_text("utf-8")
    assert "<h1>Report: vision/resnet</h1>" in html and "<td>0.1 (vision/resnet/r1)</td>" in html
    assert "<script" not in html and " src=" not in html and "http" not in html  # one file, nothing fetched

    assert run_sitegen("report", "no/such", "--site", out, "--out", tmp_path / "x.md").returncode == 2
    assert run_sitegen("report", "vision/resnet", "--site", out, "--out", tmp_path / "x.pdf").returncode == 2
