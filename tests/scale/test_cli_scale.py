"""``sitegen build --executor dask --scheduler ADDR`` and URL arguments on the command line."""
from __future__ import annotations

from pathlib import Path

import pytest

import scale_helpers as H
from testpaths import EXAMPLE


def test_cli_builds_on_a_dask_scheduler(cluster, reference_site, tmp_path, monkeypatch):
    from sitegen.cli import main

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    captured = {}
    import sitegen.pipeline.build as B

    real = B.build

    def spy(*a, **kw):
        captured.update(kw)
        kw["config"] = H.CONFIG  # the reference site's title
        return real(*a, **kw)

    monkeypatch.setattr(B, "build", spy)
    cl, _client = cluster
    code = main(["build", str(EXAMPLE), "--out", str(tmp_path / "site"), "--cache", str(tmp_path / "cache"),
                 "--executor", "dask", "--scheduler", cl.scheduler_address, "--quiet"])
    assert code == 0
    assert captured["executor"] == "dask" and captured["scheduler"] == cl.scheduler_address
    H.assert_same_site(reference_site, tmp_path / "site")


def test_cli_keeps_urls_as_strings_and_scheduler_implies_dask(tmp_path, monkeypatch):
    """``Path("s3://b/k")`` would be ``s3:/b/k``: URLs reach build() untouched."""
    from sitegen.cli import main
    import sitegen.pipeline.build as B

    seen = {}

    def fake_build(archive, out, **kw):
        seen.update(kw, archive=archive, out=out)
        return B.BuildResult(Path(out), 0, 0, [])

    monkeypatch.setattr(B, "build", fake_build)
    assert main(["build", "s3://bucket/logs", "--out", str(tmp_path / "s"), "--cache", "s3://bucket/cache",
                 "--scheduler", "tcp://10.0.0.5:8786", "--quiet"]) == 0
    assert seen["archive"] == "s3://bucket/logs" and seen["cache"] == "s3://bucket/cache"
    assert seen["executor"] == "dask" and seen["scheduler"] == "tcp://10.0.0.5:8786"
    seen.clear()
    assert main(["build", str(EXAMPLE), "--out", str(tmp_path / "s"), "--quiet"]) == 0
    assert isinstance(seen["archive"], Path) and "executor" not in seen  # the default: build()'s own


def test_cli_scheduler_with_local_executor_is_a_usage_error(tmp_path, capsys):
    from sitegen.cli import EXIT_USAGE, main

    code = main(["build", str(EXAMPLE), "--out", str(tmp_path / "s"), "--executor", "local", "--scheduler", "tcp://127.0.0.1:1"])
    assert code == EXIT_USAGE
    assert "--scheduler needs --executor dask" in capsys.readouterr().err


def test_executor_section_of_sitegen_toml_is_the_default_and_flags_win():
    import argparse
    from types import SimpleNamespace

    from sitegen.cli import _executor

    config = SimpleNamespace(executor=SimpleNamespace(kind="dask", scheduler="tcp://10.0.0.5:8786"))
    args = argparse.Namespace(executor=None, scheduler=None)
    assert _executor(args, config) == {"executor": "dask", "scheduler": "tcp://10.0.0.5:8786"}
    args = argparse.Namespace(executor="local", scheduler=None)
    assert _executor(args, config) == {}  # --executor local overrides the file (and its scheduler)
    args = argparse.Namespace(executor=None, scheduler="tcp://other:8786")
    assert _executor(args, config) == {"executor": "dask", "scheduler": "tcp://other:8786"}
    assert _executor(argparse.Namespace(executor=None, scheduler=None), SimpleNamespace()) == {}
