"""A reader installed as a package (entry point ``sitegen.readers``) reads its format into the same
site and the same scalars table as ours; a broken one costs one problem line, never the build.
The package is installed with pip into a folder of its own, and sitegen runs in a fresh process
with that folder on its path, as a team's plug-in would be installed and used."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CRASHY = """
FORMAT = "crashy"
def claims(filename):
    return filename.endswith(".crashy")
def read(source, options):
    raise RuntimeError("boom")
"""
TAKEN = """
FORMAT = "tfevents"
def claims(filename):
    return True
def read(source, options):
    raise AssertionError("never used")
"""


def documented_example() -> str:
    """The plug-in reader of docs/readers.md, as printed there."""
    text = (ROOT / "docs" / "readers.md").read_text(encoding="utf-8")
    return text.split("<!-- plugin-example -->", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("plugin-src")
    (src / "sitegen_demo_reader.py").write_text(documented_example())
    (src / "sitegen_broken_reader.py").write_text("raise ImportError('the vendor library is not installed')\n")
    (src / "sitegen_crashy_reader.py").write_text(CRASHY)
    (src / "sitegen_taken_reader.py").write_text(TAKEN)
    (src / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=70"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "sitegen-test-readers"
            version = "0.1"
            [tool.setuptools]
            py-modules = ["sitegen_demo_reader", "sitegen_broken_reader", "sitegen_crashy_reader", "sitegen_taken_reader"]
            [project.entry-points."sitegen.readers"]
            demo = "sitegen_demo_reader"
            broken = "sitegen_broken_reader"
            crashy = "sitegen_crashy_reader"
            tfevents = "sitegen_taken_reader"
            """
        )
    )
    target = tmp_path_factory.mktemp("plugin-site-packages")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(src)], check=True)
    return target


def _python(target: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH", "")) if p))
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300)


def _archive(root: Path) -> Path:
    from tensorboardX import SummaryWriter

    logs = root / "logs"
    demo = logs / "team" / "demo-model" / "run1"
    demo.mkdir(parents=True)
    (demo / "metrics.demo.tsv").write_bytes(b"loss\t0\t1.5\nloss\t1\t1.25\nnot a row\nacc\t1\t0.5\nloss\t2\tnan\n")
    crashy = logs / "team" / "crashy-model" / "run2"
    crashy.mkdir(parents=True)
    (crashy / "x.crashy").write_bytes(b"anything")
    w = SummaryWriter(str(logs / "team" / "tb-model" / "run3"))
    for step in range(3):
        w.add_scalar("loss", 2.0 - step, step)
    w.close()
    return logs


def test_an_installed_reader_builds_into_the_site(installed: Path, tmp_path: Path):
    logs = _archive(tmp_path)
    site = tmp_path / "site"
    got = _python(installed, "-m", "sitegen", "build", str(logs), "--out", str(site), "--cache", str(tmp_path / "cache"), "--quiet")
    assert got.returncode == 0, got.stderr
    assert "Traceback" not in got.stderr
    report = json.loads((site / "build-report.json").read_text())
    lines = {(p["kind"], p["path"].split(" = ")[0] if p["kind"] == "plugin" else Path(p["path"]).name, p["offset"]) for p in report["items"]}
    assert ("plugin", "broken", None) in lines  # cannot be imported
    assert ("plugin", "tfevents", None) in lines  # a built-in format's name: not used
    assert ("bad-line", "metrics.demo.tsv", 23) in lines  # the documented reader's own problem line
    assert ("reader-error", "x.crashy", None) in lines  # read() raised: one line, the build went on
    assert any("boom" in p["message"] for p in report["items"] if p["kind"] == "reader-error")
    # every run has its page, the plug-in's and TensorBoard's side by side in one index
    pages = {p.parent.name for p in (site / "runs").glob("*/index.html")}
    assert len(pages) == 3
    index = (site / "index-data.js").read_text() + "".join(p.read_text() for p in (site / "index").glob("*.js"))
    assert "demo-model" in index and "tb-model" in index and "crashy-model" in index


def test_read_scalars_returns_the_plugin_values(installed: Path, tmp_path: Path):
    logs = _archive(tmp_path)
    code = "import json, sys, sitegen; t = sitegen.read_scalars(sys.argv[1]); print(json.dumps(t.to_pylist()))"
    got = _python(installed, "-c", code, str(logs))
    assert got.returncode == 0, got.stderr
    rows = json.loads(got.stdout.replace("NaN", '"nan"'))
    demo = [(r["tag"], r["step"], r["value"]) for r in rows if r["run"] == "team/demo-model/run1"]
    assert demo[:3] == [("loss", 0, 1.5), ("loss", 1, 1.25), ("acc", 1, 0.5)]
    assert demo[3][:2] == ("loss", 2) and demo[3][2] == "nan"
    tb = [(r["tag"], r["step"], r["value"]) for r in rows if r["run"] == "team/tb-model/run3"]
    assert tb == [("loss", 0, 2.0), ("loss", 1, 1.0), ("loss", 2, 0.0)]
    assert not math.isnan(sum(r[2] for r in tb))


def test_without_the_package_the_format_is_not_read(tmp_path: Path):
    logs = _archive(tmp_path)
    got = _python(tmp_path, "-c", "import sys, sitegen; print(sorted({r['run'] for r in sitegen.read_scalars(sys.argv[1]).to_pylist()}))", str(logs))
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "['team/tb-model/run3']"


def test_hostile_strings_from_a_plugin_are_escaped(installed: Path, tmp_path: Path):
    """A plug-in's run names and tags reach the pages as ours do: escaped everywhere."""
    logs = tmp_path / "logs"
    run = logs / "team" / '"><img src=x onerror="window.__xss=2">'
    run.mkdir(parents=True)
    tags = ("<script>window.__xss=1</script>", "</script><script>window.__xss=4</script>", "a\u2028b")
    (run / "m.demo.tsv").write_text("".join(f"{t}\t{s}\t{s * 0.5}\n" for t in tags for s in range(3)), encoding="utf-8")
    site = tmp_path / "site"
    got = _python(installed, "-m", "sitegen", "build", str(logs), "--out", str(site), "--cache", str(tmp_path / "cache"), "--quiet")
    assert got.returncode == 0, got.stderr
    pages = [p for p in site.resolve().rglob("*") if p.suffix in (".html", ".js") and "assets" not in p.relative_to(site.resolve()).parts]
    assert any(p.parent.parent.name == "runs" for p in pages)
    assert sum("window.__xss=1" in p.read_text("utf-8") for p in pages) >= 2  # the tag reached the pages (escaped)
    for p in pages:
        text = p.read_text("utf-8").lower()
        assert "<script>window.__xss" not in text and "<img src=x onerror" not in text, p
        if p.suffix == ".js":
            assert "\u2028" not in text and "</script" not in text, p
