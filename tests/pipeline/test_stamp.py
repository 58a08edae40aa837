"""The command line's quick answer for an archive that did not change (sitegen.pipeline.stamp): no scan,
no numpy or pyarrow; and any change it cannot vouch for takes the normal path."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sitegen.publish.live import list_builds
from tests.support.cli import child_env
from tests.support.eventgen import write_run

PROBE = (
    "import sys\n"
    "sys.argv = ['sitegen', 'build', *sys.argv[1:]]\n"
    "from sitegen import cli\n"
    "code = cli.main()\n"
    "print('HEAVY' if 'sitegen.pipeline.build' in sys.modules or 'pyarrow' in sys.modules else 'LIGHT', code)\n"
)


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for i in range(2):
        write_run(root / "proj" / f"run{i}", tags=["train/loss"], steps=50, seed=i, start=1.7e9 + i)
    return root


def build(archive: Path, tmp_path: Path, *extra: str, env: dict | None = None) -> tuple[str, int]:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    r = subprocess.run([sys.executable, str(probe), str(archive), "--out", str(tmp_path / "site"),
                        "--cache", str(tmp_path / "cache"), "--quiet", *extra],
                       capture_output=True, text=True, timeout=300, env=child_env(**(env or {})))
    assert r.returncode == 0, r.stderr
    kind, code = r.stdout.split()[-2:]
    return kind, int(code)


def test_unchanged_archive_is_answered_without_the_heavy_modules(archive: Path, tmp_path: Path):
    assert build(archive, tmp_path) == ("HEAVY", 0)
    live = (tmp_path / "site").resolve()
    assert build(archive, tmp_path) == ("LIGHT", 0)
    assert (tmp_path / "site").resolve() == live and len(list_builds(tmp_path / "site")) == 1


def test_problems_of_the_live_build_still_count_under_strict(archive: Path, tmp_path: Path):
    log = next((archive / "proj" / "run1").glob("*tfevents*"))
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    assert build(archive, tmp_path, "--strict") == ("HEAVY", 1)
    assert build(archive, tmp_path, "--strict") == ("LIGHT", 1)


@pytest.mark.parametrize("change", ["touch-log", "new-file", "new-folder", "symlink-loop", "config", "date", "damaged-site", "lost-run-folder", "renamed-page", "no-verify"])
def test_any_change_takes_the_normal_path(archive: Path, tmp_path: Path, change: str):
    config = tmp_path / "sitegen.toml"
    config.write_text('title = "one"\n')
    extra = ["--config", str(config)]
    assert build(archive, tmp_path, *extra)[0] == "HEAVY"
    assert build(archive, tmp_path, *extra)[0] == "LIGHT"
    env = None
    log = next((archive / "proj" / "run0").glob("*tfevents*"))
    if change == "touch-log":
        os.utime(log, ns=(log.stat().st_atime_ns, log.stat().st_mtime_ns + 1_000_000))
    elif change == "new-file":
        (archive / "proj" / "run0" / "notes.md").write_text("a note")
    elif change == "new-folder":  # (no file in it: known from its parent's listing alone)
        (archive / "proj" / "run0" / "later").mkdir()
    elif change == "symlink-loop":  # followed once, as the scan follows it
        (archive / "proj" / "back").symlink_to(archive)
    elif change == "config":
        config.write_text('title = "two"\n')
    elif change == "date":
        env = {"SOURCE_DATE_EPOCH": "1700000000"}
    elif change == "damaged-site":
        next((tmp_path / "site").resolve().glob("runs/*/scalars.js")).unlink()
    elif change == "lost-run-folder":
        shutil.rmtree(next((tmp_path / "site").resolve().glob("runs/*/")))
    elif change == "renamed-page":
        page = next((tmp_path / "site").resolve().glob("compare/*/index.html"))
        page.rename(page.with_name("index.html~"))
    elif change == "no-verify":
        extra.append("--no-verify")
    live = (tmp_path / "site").resolve()
    assert build(archive, tmp_path, *extra, env=env)[0] == "HEAVY"
    if change in ("new-file", "config", "date", "damaged-site", "lost-run-folder", "renamed-page"):
        assert (tmp_path / "site").resolve() != live  # the site changed: a new build
    assert build(archive, tmp_path, *extra, env=env)[0] == "LIGHT"  # and then it is stamped again


def _restamp(tmp_path: Path, **fields) -> None:
    """Edit the stamp record the last build left (as if it was written in another boot)."""
    (slot,) = (tmp_path / "cache" / "stamps").glob("*.json")
    slot.write_text(json.dumps({**json.loads(slot.read_text()), **fields}))


def test_after_a_restart_every_file_is_checked(archive: Path, tmp_path: Path):
    """A power cut may leave files empty in folders that look untouched: a stamp from another
    boot is trusted only once every file has its size (and is then sealed for this boot)."""
    assert build(archive, tmp_path)[0] == "HEAVY"
    _restamp(tmp_path, boot="another boot")
    assert build(archive, tmp_path)[0] == "LIGHT"  # whole: kept, and sealed again
    (slot,) = (tmp_path / "cache" / "stamps").glob("*.json")
    assert json.loads(slot.read_text())["boot"] != "another boot"
    live = (tmp_path / "site").resolve()
    page = next(live.glob("runs/*/index.html"))
    os.truncate(page, 0)  # in place: its folder does not change
    _restamp(tmp_path, boot="another boot")
    assert build(archive, tmp_path)[0] == "HEAVY"
    assert (tmp_path / "site").resolve() != live and (tmp_path / "site" / page.relative_to(live)).stat().st_size > 0


def test_a_package_installed_takes_the_normal_path(archive: Path, tmp_path: Path):
    """A plug-in reader installed since the last build may read files the last build skipped."""
    pkgs = tmp_path / "pkgs"
    pkgs.mkdir()
    env = {"PYTHONPATH": os.pathsep.join([str(pkgs), child_env()["PYTHONPATH"]])}
    assert build(archive, tmp_path, env=env)[0] == "HEAVY"
    assert build(archive, tmp_path, env=env)[0] == "LIGHT"
    meta = pkgs / "sitegen_reader_x-1.0.dist-info"  # what pip leaves on the path
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: sitegen-reader-x\nVersion: 1.0\n")
    assert build(archive, tmp_path, env=env)[0] == "HEAVY"
    assert build(archive, tmp_path, env=env)[0] == "LIGHT"
