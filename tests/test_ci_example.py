"""``examples/ci/cron-publish.sh`` end to end, without a web host: it builds, gates, verifies and
posts the changes to a webhook (a recording server) once per new build; a failed gate is exit 5
with the site published; a night with nothing new posts nothing."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT
from tests.support.cli import child_env
from tests.support.corpus import write_metrics
from tests.support.webhook import Recorder

SCRIPT = ROOT / "examples" / "ci" / "cron-publish.sh"


def test_the_nightly_script_builds_gates_and_notifies(tmp_path: Path):
    logs, work = tmp_path / "logs", tmp_path / "work"
    write_metrics(logs / "vision" / "resnet" / "r0", 0, 20, seed=1)
    config = tmp_path / "sitegen.toml"
    config.write_text('base_url = "https://reports.example.org/reports/"\n'
                      '[gates]\nrules = ["*/*: train/loss <= best * 1.05"]\n')
    wrapper = tmp_path / "sitegen"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m sitegen "$@"\n')
    wrapper.chmod(0o755)
    with Recorder() as hook:
        env = child_env(ARCHIVE=str(logs), WORK=str(work), SITEGEN_CACHE=str(tmp_path / "cache"), SITEGEN=str(wrapper),
                        CONFIG=str(config), NOTIFY_KIND="slack", SITEGEN_WEBHOOK=hook.url())

        def night() -> subprocess.CompletedProcess:
            return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)

        first = night()
        assert first.returncode == 0, first.stderr + first.stdout
        assert len(hook.requests) == 1 and "New run vision/resnet/r0" in json.loads(hook.requests[0][2])["text"]
        assert night().returncode == 0 and len(hook.requests) == 1  # nothing new: nothing posted
        write_metrics(logs / "vision" / "resnet" / "r1", 0, 20, seed=9)  # a regression: 0.19 > 0.11 * 1.05
        third = night()
        assert third.returncode == 5, third.stderr + third.stdout
        assert "a gate failed" in third.stdout and os.path.islink(work / "reports")
        text = json.loads(hook.requests[-1][2])["text"]
        assert len(hook.requests) == 2 and "1 gate(s) FAILED" in text and "Gate failed on vision/resnet/r1" in text
        assert "<https://reports.example.org/reports/runs/vision-resnet-r1-" in text


def test_the_readmes_in_ci_snippet_posts_on_a_new_build_and_fails_on_a_gate(tmp_path: Path):
    """The shell lines of the README's "In CI" section, run as they are: a new build is posted,
    a night with nothing new is not, a failed gate (exit 5) is published, posted and fails the job."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme.split("### In CI", 1)[1]
    snippet = section.split("```sh\n", 1)[1].split("```", 1)[0]
    logs, bin_dir = tmp_path / "logs", tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sitegen").write_text(f'#!/bin/sh\nexec {sys.executable} -m sitegen "$@"\n')
    (bin_dir / "sitegen").chmod(0o755)
    (tmp_path / "sitegen.toml").write_text('[gates]\nrules = ["*/*: train/loss <= best * 1.05"]\n[notify]\nkind = "generic"\n')
    write_metrics(logs / "vision" / "resnet" / "r0", 0, 20, seed=1)
    with Recorder() as hook:
        env = child_env(ARCHIVE=str(logs), SITE=str(tmp_path / "site"), CACHE=str(tmp_path / "cache"), SITEGEN_WEBHOOK=hook.url(),
                        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

        def night() -> int:
            return subprocess.run(["bash", "-c", snippet], env=env, cwd=tmp_path, capture_output=True, timeout=300).returncode

        assert night() == 0 and len(hook.requests) == 1
        assert night() == 0 and len(hook.requests) == 1  # nothing new: nothing posted
        write_metrics(logs / "vision" / "resnet" / "r1", 0, 20, seed=9)  # a regression
        assert night() == 5 and len(hook.requests) == 2
        assert json.loads(hook.requests[-1][2])["counts"]["added"] == 1


def test_the_readme_shows_the_panel_and_a_trend_page_and_has_an_in_ci_section():
    """Done when of issue 24: the README's "In CI" section names the nightly job's files, and its
    screenshots of the What's new panel and of trend pages are PNG files of the repository."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme.split("### In CI", 1)[1].split("\n## ", 1)[0]
    assert "examples/ci/cron-publish.sh" in section and "examples/ci/nightly.yml" in section
    shots = dict((alt, path) for alt, path in re.findall(r"!\[([^\]]*)\]\((docs/[^)]+\.png)\)", readme))
    wanted = [p for a, p in shots.items() if "What's new" in a or "trend page" in a]
    assert len(wanted) == 3 and all(p in shots.values() for p in ("docs/whats-new.png", "docs/trend-page.png", "docs/trend-commit.png"))
    assert all((ROOT / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in wanted)
