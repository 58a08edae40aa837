"""Each build and the cache start a directory hierarchy of their own (``chattr +T``), where the
file system takes the hint: see :mod:`sitegen.placement`. Checked with e2fsprogs' own
``chattr``/``lsattr``, not with sitegen's code."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from sitegen import placement
from sitegen.build import build
from sitegen.config import Config
from sitegen.publish import builds_dir

from _publish_helpers import EXAMPLE


def _lsattr(folder: Path) -> str:
    out = subprocess.run(["lsattr", "-d", str(folder)], capture_output=True, text=True, check=True).stdout
    return out.split()[0]


def _takes_the_flag(scratch: Path) -> bool:
    scratch.mkdir()
    return subprocess.run(["chattr", "+T", str(scratch)], capture_output=True).returncode == 0


def test_builds_and_cache_folders_are_tops_of_hierarchies(tmp_path: Path):
    assert shutil.which("chattr") and shutil.which("lsattr"), "e2fsprogs is part of every Debian system"
    supported = _takes_the_flag(tmp_path / "scratch")
    out, cache = tmp_path / "site", tmp_path / "cache"
    result = build(EXAMPLE, out, config=Config(), cache=cache)
    assert result.runs > 0 and (out / "index.html").is_file()
    for folder in (builds_dir(out), cache):
        assert ("T" in _lsattr(folder)) == supported, folder
        assert (placement.flags(folder) is not None and bool(placement.flags(folder) & placement.FS_TOPDIR_FL)) == supported
    # only those two: the flag is not inherited, and the build's own folders are not marked
    assert "T" not in _lsattr(out.resolve()) and "T" not in _lsattr(cache / "runs")


def test_spreading_never_fails(tmp_path: Path):
    (tmp_path / "file").write_text("x")
    fifo = tmp_path / "fifo"
    import os

    os.mkfifo(fifo)
    for target in (tmp_path / "missing", tmp_path / "file", fifo, Path("/proc")):
        assert placement.spread_below(target) is False
    folder = tmp_path / "d"
    assert placement.spread_below(folder.parent) == _takes_the_flag(folder)  # (same file system)
