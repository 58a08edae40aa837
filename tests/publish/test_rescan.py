"""A rebuild takes the last build's scan and run keys when the archive kept its shape
(:mod:`sitegen.pipeline.rescan`): its site is the one a scanning build makes, and anything that changes
the shape (files or folders added, removed or renamed, a non-log file changed, a symlinked
folder, other scan options) scans again."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from sitegen.pipeline import build as build_module
from sitegen.pipeline import stamp
from sitegen.cache import summary
from sitegen.pipeline.build import build
from sitegen.config import Config, RunsConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site"))
from eventgen import scalar_event, write_run  # noqa: E402

TAGS = ["loss", "acc"]


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for p in range(2):
        for i in range(3):
            write_run(root / f"proj{p}" / "model" / f"run{i}", tags=TAGS, steps=40, seed=10 * p + i, start=1.7e9 + i)
    write_run(root / "proj0" / "model" / "run0" / "sub", tags=["loss"], steps=20, seed=99, start=1.7e9)  # a sub-run
    (root / "proj1" / "model" / "run2" / "notes.md").write_text("# notes\n", "utf-8")
    return root


def _build(archive: Path, out: Path, cache: Path, config: Config | None = None, walk: bool = True):
    tree = None
    if walk:
        tree = stamp.Tree()
        assert stamp.inputs(archive, {}, None, tree)[0] is not None
    return build(archive, out, config=config or Config(), cache=cache, tree=tree, jobs=1)


def _site(out: Path) -> tuple[dict[str, bytes], dict[str, str]]:
    """Every file of the live build but the manifest, and the manifest's run keys."""
    live = out.resolve()
    files = {p.relative_to(live).as_posix(): p.read_bytes() for p in live.rglob("*") if p.is_file() and not p.name.startswith("manifest")}
    return files, json.loads((live / "manifest.json").read_bytes())["runs"]


@pytest.fixture()
def counted(monkeypatch) -> dict[str, int]:
    """How often the build scanned and computed a run key."""
    calls = {"scan": 0, "run_key": 0}
    scan, run_key = build_module.scan, summary.run_key

    def counting_scan(*a, **k):
        calls["scan"] += 1
        return scan(*a, **k)

    def counting_key(*a, **k):
        calls["run_key"] += 1
        return run_key(*a, **k)

    monkeypatch.setattr(build_module, "scan", counting_scan)
    monkeypatch.setattr(summary, "run_key", counting_key)
    return calls


def _append(log_dir: Path, steps: range) -> None:
    log = next(log_dir.glob("events.out.tfevents.*"))
    with log.open("ab") as f:
        for step in steps:
            for k, tag in enumerate(TAGS):
                f.write(scalar_event(tag, step, 1.7e9 + step, 0.5 + 0.01 * k))


def test_grown_logs_keep_the_scan_and_the_other_keys(archive: Path, tmp_path: Path, counted):
    cache = tmp_path / "cache"
    _build(archive, tmp_path / "site", cache)
    assert counted == {"scan": 1, "run_key": 6}
    _append(archive / "proj1" / "model" / "run1", range(40, 60))
    _append(archive / "proj0" / "model" / "run0" / "sub", range(20, 30))  # the sub-run: its family's key
    counted.update(scan=0, run_key=0)
    _build(archive, tmp_path / "site", cache)
    assert counted == {"scan": 0, "run_key": 2}
    # the very site (and keys) a build that scans makes
    _build(archive, tmp_path / "scanned", cache, walk=False)
    assert counted["scan"] == 1
    assert _site(tmp_path / "site") == _site(tmp_path / "scanned")
    # unchanged since: nothing is scanned, no key computed, the live build is kept
    live = (tmp_path / "site").resolve()
    counted.update(scan=0, run_key=0)
    _build(archive, tmp_path / "site", cache)
    assert counted == {"scan": 0, "run_key": 0} and (tmp_path / "site").resolve() == live


def _add_run(root: Path) -> None:
    write_run(root / "proj1" / "model" / "run9", tags=TAGS, steps=30, seed=9, start=1.7e9 + 9)


def _remove_run(root: Path) -> None:
    shutil.rmtree(root / "proj0" / "model" / "run2")


def _new_note(root: Path) -> None:
    (root / "proj0" / "model" / "run1" / "README.md").write_text("hello\n", "utf-8")


def _edited_note(root: Path) -> None:
    note = root / "proj1" / "model" / "run2" / "notes.md"
    note.write_text("# other notes, longer\n", "utf-8")


def _renamed_log(root: Path) -> None:
    log = next((root / "proj0" / "model" / "run1").glob("events.out.tfevents.*"))
    log.rename(log.with_name(log.name + ".2"))


def _replaced_log(root: Path) -> None:
    log = next((root / "proj1" / "model" / "run0").glob("events.out.tfevents.*"))
    data = log.read_bytes()
    log.unlink()
    log.write_bytes(data[: len(data) // 2])  # (a new inode, shorter: its run is read again)


@pytest.mark.parametrize("change", [_add_run, _remove_run, _new_note, _edited_note, _renamed_log])
def test_a_changed_shape_scans_again(archive: Path, tmp_path: Path, counted, change):
    cache = tmp_path / "cache"
    _build(archive, tmp_path / "site", cache)
    change(archive)
    counted.update(scan=0, run_key=0)
    _build(archive, tmp_path / "site", cache)
    assert counted["scan"] == 1
    _build(archive, tmp_path / "scanned", cache, walk=False)
    assert _site(tmp_path / "site") == _site(tmp_path / "scanned")


def test_a_replaced_log_keeps_the_scan_and_redraws_its_run(archive: Path, tmp_path: Path, counted):
    cache = tmp_path / "cache"
    _build(archive, tmp_path / "site", cache)
    _replaced_log(archive)
    counted.update(scan=0, run_key=0)
    _build(archive, tmp_path / "site", cache)
    assert counted == {"scan": 0, "run_key": 1}
    _build(archive, tmp_path / "scanned", cache, walk=False)
    assert _site(tmp_path / "site") == _site(tmp_path / "scanned")


def test_symlinked_folders_and_other_options_scan_again(archive: Path, tmp_path: Path, counted):
    cache = tmp_path / "cache"
    _build(archive, tmp_path / "site", cache)
    counted.update(scan=0, run_key=0)
    _build(archive, tmp_path / "site", cache, config=Config(runs=RunsConfig(exclude=("proj1/*",))))
    assert counted["scan"] == 1
    os.symlink(tmp_path / "elsewhere", archive / "proj0" / "linked")
    write_run(tmp_path / "elsewhere" / "runX", tags=TAGS, steps=10, seed=5, start=1.7e9)
    for _ in range(2):  # a tree with a symlinked folder is never recorded
        counted.update(scan=0, run_key=0)
        _build(archive, tmp_path / "site", cache)
        assert counted["scan"] == 1 and counted["run_key"] == 7
