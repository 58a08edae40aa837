"""Fixtures for the publishing tests: the example archive built once, a session cache."""
from __future__ import annotations

from pathlib import Path

import pytest

from _publish_helpers import EXAMPLE, run_sitegen


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, cache_dir) -> Path:
    """The example archive published to <tmp>/www/reports (a symlink), as nginx would serve it."""
    www = tmp_path_factory.mktemp("www")
    out = www / "reports"
    r = run_sitegen("build", EXAMPLE, "--out", out, "--cache", cache_dir)
    assert r.returncode == 0, r.stderr
    assert out.is_symlink()
    return out
