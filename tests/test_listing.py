"""The archive's one walk: each folder listed once however many links reach it, and the scan
and the run keys read from it exactly what they would find walking the tree themselves."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sitegen.cache import keys
from sitegen.config import Config
from sitegen.fileio import real_roots
from sitegen.ingest.scan import scan
from sitegen.listing import Stat, walk
from sitegen.pipeline.plan import make_plan


def _log(path: Path, size: int = 10) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def test_links_do_not_multiply_the_walk(tmp_path: Path):
    # ten levels, each holding three links to the next: 3**9 paths, 10 folders
    for i in range(10):
        (tmp_path / f"d{i}").mkdir()
        _log(tmp_path / f"d{i}" / f"events.out.tfevents.{i}.h")
    for i in range(9):
        for k in range(3):
            os.symlink(f"../d{i + 1}", tmp_path / f"d{i}" / f"l{k}")
    got = walk(str(tmp_path))
    assert sum(f.listed for f in got.values()) == 11  # the top and d0..d9
    assert len(got) < 11 + 10 * 3


def test_walk_records_stats_and_errors(tmp_path: Path):
    _log(tmp_path / "run" / "events.out.tfevents.1.h", 7)
    os.symlink("/nonexistent/x", tmp_path / "run" / "dangling")
    got = walk(str(tmp_path))
    run = got[str(tmp_path / "run")]
    log = run.files["events.out.tfevents.1.h"]
    assert isinstance(log, Stat) and stat.S_ISREG(log.mode) and log.size == 7
    assert isinstance(run.files["dangling"], int) and "dangling" in run.links


def test_a_folder_first_reached_through_a_skipped_path_is_still_scanned(tmp_path: Path):
    # ".a" sorts first and is never entered by the scan, but the walk lists p/m through its link
    _log(tmp_path / "p" / "m" / "run1" / "events.out.tfevents.1.h")
    (tmp_path / ".a").mkdir()
    os.symlink("../p/m", tmp_path / ".a" / "link")
    roots = real_roots(tmp_path)
    shared = scan(tmp_path, roots=roots, listing=walk(str(tmp_path), roots))
    assert [(s.name, [f.name for f in s.files]) for s in shared] == [("p/m/run1", ["events.out.tfevents.1.h"])]


def test_keys_from_the_shared_walk_equal_keys_from_each_runs_own(tmp_path: Path):
    archive = tmp_path / "logs"
    _log(archive / "p" / "m" / "run1" / "events.out.tfevents.1.h")
    _log(archive / "p" / "m" / "run1" / "notes.md", 3)
    _log(archive / "p" / "m" / "run1" / "art" / "deep" / "x.bin", 5)
    os.symlink("art", archive / "p" / "m" / "run1" / "artlink")  # not entered by the keys
    _log(archive / "p" / "m" / "run1" / "sub" / "events.out.tfevents.2.h")  # a sub-run
    _log(archive / "p" / "m" / "run2" / "events.out.tfevents.3.h")
    os.symlink("p/m/run2", archive / "alias")
    plan = make_plan(archive, tmp_path / "site", None, config=Config(), verify=False, source_date_epoch=None)
    assert [j.family[0].name for j in plan.jobs] == ["alias", "p/m/run1"]  # (run2 is reached as alias first)
    assert plan.keys == [keys.run_key(j) for j in plan.jobs]
    before = plan.keys
    _log(archive / "p" / "m" / "run1" / "art" / "deep" / "x.bin", 6)  # an artifact grew
    again = make_plan(archive, tmp_path / "site", None, config=Config(), verify=False, source_date_epoch=None)
    changed = [j.family[0].name for j, a, b in zip(again.jobs, before, again.keys) if a != b]
    assert changed == ["p/m/run1"]
