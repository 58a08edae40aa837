"""The wheel ships the templates and static assets, and the installed CLI runs."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support import ROOT


def test_wheel_contains_templates(tmp_path: Path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )
    wheel = next(tmp_path.glob("sitegen-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in (p.relative_to(ROOT).as_posix() for p in (ROOT / "templates").rglob("*") if p.is_file()):
        assert f"sitegen/{rel}" in names, f"{rel} is missing from the wheel"
    for rel in (p.relative_to(ROOT).as_posix() for p in (ROOT / "sitegen").rglob("*.py")):
        assert rel in names, f"{rel} is missing from the wheel"


def test_python_m_sitegen_runs():
    out = subprocess.run([sys.executable, "-m", "sitegen", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("sitegen ")
