"""Runs are found like TensorBoard finds them; sub-runs attach to their parent; loops end."""
from __future__ import annotations

import os
from pathlib import Path

from sitegen.ingest.scan import scan


def _touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


def test_runs_subruns_and_profile_placeholders(tmp_path: Path):
    _touch(tmp_path / "proj/model/run1/events.out.tfevents.1.host")
    _touch(tmp_path / "proj/model/run1/loss/train/events.out.tfevents.2.host")  # tensorboardX add_scalars
    _touch(tmp_path / "proj/model/run1/loss_val/events.out.tfevents.2.host.1.0")  # PyTorch add_scalars
    _touch(tmp_path / "proj/model/run1/1714641496.9/events.out.tfevents.3.host")  # add_hparams
    _touch(tmp_path / "proj/model/run2/events.out.tfevents.1.host")
    _touch(tmp_path / "proj/model/run2/events.out.tfevents.0.host")
    _touch(tmp_path / "keras/train/events.out.tfevents.1.host")
    _touch(tmp_path / "keras/validation/events.out.tfevents.1.host")
    _touch(tmp_path / "profile/plugins/events.out.tfevents.1.host.profile-empty")
    _touch(tmp_path / "notes/readme.txt")
    runs = scan(tmp_path)
    by_name = {r.name: r for r in runs}
    assert sorted(by_name) == [
        "keras/train", "keras/validation", "proj/model/run1", "proj/model/run1/1714641496.9",
        "proj/model/run1/loss/train", "proj/model/run1/loss_val", "proj/model/run2",
    ]
    assert by_name["proj/model/run1/loss/train"].parent == "proj/model/run1"
    assert by_name["proj/model/run1/1714641496.9"].parent == "proj/model/run1"
    assert by_name["keras/train"].parent is None and by_name["proj/model/run2"].parent is None
    assert [f.name for f in by_name["proj/model/run2"].files] == ["events.out.tfevents.0.host", "events.out.tfevents.1.host"]


def test_archive_itself_is_run_dot(tmp_path: Path):
    _touch(tmp_path / "events.out.tfevents.1.host")
    assert [r.name for r in scan(tmp_path)] == ["."]


def test_symlink_loop_ends(tmp_path: Path):
    _touch(tmp_path / "a/run/events.out.tfevents.1.host")
    os.symlink(tmp_path / "a", tmp_path / "a/run/loop")
    problems: list = []
    runs = scan(tmp_path, problems=problems)
    assert [r.name for r in runs] == ["a/run"]
    assert any(p.kind == "symlink-loop" for p in problems)


def test_include_exclude_globs_select_whole_families(tmp_path: Path):
    _touch(tmp_path / "vision/m/r1/events.out.tfevents.1.host")
    _touch(tmp_path / "vision/m/r1/loss/train/events.out.tfevents.1.host")
    _touch(tmp_path / "nlp/m/r1/events.out.tfevents.1.host")
    assert [r.name for r in scan(tmp_path, include=("vision/*",))] == ["vision/m/r1", "vision/m/r1/loss/train"]
    assert [r.name for r in scan(tmp_path, exclude=("vision/*",))] == ["nlp/m/r1"]


def test_readers_know_their_own_keys():
    """Every reader's ``FORMAT`` is its key in ``READERS``, in the scan's order."""
    from sitegen.ingest import READERS

    assert [(k, m.FORMAT) for k, m in READERS.items()] == [
        ("tfevents", "tfevents"), ("visualdl", "visualdl"), ("mlflow", "mlflow"), ("hftrainer", "hftrainer"),
        ("lightning", "lightning"), ("keras", "keras"), ("dvclive", "dvclive"), ("wandb", "wandb"),
        ("comet", "comet"), ("clearml", "clearml"), ("neptune", "neptune"), ("tabular", "tabular")]
