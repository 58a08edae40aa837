"""sitegen.toml: typed, every problem reported at once, unknown keys only warned about."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sitegen.config import Config, load_config
from sitegen.errors import ConfigError


def test_defaults_without_a_file():
    assert load_config(None) == Config()


def test_values_are_read_into_dataclasses(tmp_path: Path):
    p = tmp_path / "sitegen.toml"
    p.write_text(
        'title = "Team runs"\nlanguage = "zh-CN"\n[runs]\ninclude = ["vision/*"]\nexclude = ["*/tmp"]\n'
        '[tags]\nexclude = ["^debug/"]\n[index]\nkey_metrics = ["eval/acc"]\n[charts]\npoints_per_chart = 500\n',
        "utf-8",
    )
    cfg = load_config(p)
    assert cfg.title == "Team runs" and cfg.language == "zh-CN"
    assert cfg.runs.include == ("vision/*",) and cfg.runs.exclude == ("*/tmp",)
    assert cfg.index.key_metrics == ("eval/acc",) and cfg.charts.points_per_chart == 500
    assert cfg.tag_selected("train/loss") and not cfg.tag_selected("debug/x")


def test_every_problem_is_reported_at_once(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    p = tmp_path / "sitegen.toml"
    p.write_text('language = "fr"\ncolour = "red"\n[charts]\npoints_per_chart = "many"\n[tags]\ninclude = ["("]\n', "utf-8")
    with caplog.at_level(logging.WARNING), pytest.raises(ConfigError) as err:
        load_config(p)
    message = str(err.value)
    assert "language" in message and "charts.points_per_chart" in message and "tags.include" in message
    assert str(p) in message
    assert any("colour" in r.getMessage() for r in caplog.records)


def test_bad_toml_names_the_file(tmp_path: Path):
    p = tmp_path / "sitegen.toml"
    p.write_text("title = ", "utf-8")
    with pytest.raises(ConfigError, match="sitegen.toml: not valid TOML"):
        load_config(p)


def test_find_config_prefers_the_archive_root_then_the_current_folder(tmp_path):
    from sitegen.config import find_config

    archive, here = tmp_path / "archive", tmp_path / "here"
    archive.mkdir()
    here.mkdir()
    assert find_config(archive, here) is None
    (here / "sitegen.toml").write_text("")
    assert find_config(archive, here) == here / "sitegen.toml"
    assert find_config("s3://bucket/logs", here) == here / "sitegen.toml"  # a URL archive: the current folder only
    (archive / "sitegen.toml").mkdir()  # not a file: passed over
    assert find_config(archive, here) == here / "sitegen.toml"
    (archive / "sitegen.toml").rmdir()
    (archive / "sitegen.toml").write_text("")
    assert find_config(archive, here) == archive / "sitegen.toml"
