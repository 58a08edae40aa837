"""Fixtures of the page tests: a generated archive of many small runs, built once."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def many_runs_site(tmp_path_factory) -> Path:
    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build
    from tests.support.eventgen import write_archive

    root = tmp_path_factory.mktemp("many")
    write_archive(root / "archive", 200, tags=["train/loss", "train/lr", "eval/accuracy", "eval/loss"], steps=600)
    out = root / "site"
    build(root / "archive", out, BuildOptions(config=Config(title="many"), use_cache=False))
    return out
