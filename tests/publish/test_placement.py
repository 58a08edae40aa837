"""Each build and the cache start a directory hierarchy of their own (``chattr +T``), where the
file system takes the hint: see :mod:`sitegen.publish.placement`. Checked with e2fsprogs' own
``chattr``/``lsattr``, not with sitegen's code."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from sitegen.publish import placement
from sitegen.pipeline.build import build
from sitegen.config import Config
from sitegen.publish.staging import builds_dir

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


def test_cache_folders_are_made_under_a_random_name_then_renamed(tmp_path: Path, monkeypatch):
    """ext4 places a folder made in a marked one by a hash of its name: made again under the
    same name, it would go back where its removed predecessor freed its inodes."""
    import os

    made: list[str] = []
    real_mkdir = os.mkdir

    def mkdir(path, *args, **kwargs):
        made.append(str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    cache = tmp_path / "cache"
    build(EXAMPLE, tmp_path / "site", config=Config(), cache=cache)
    for name in ("files", "runs"):
        assert (cache / name).is_dir()
        assert str(cache / name) not in made, made  # never made under its own name
        assert any(m.startswith(f"{cache / name}.") and m.endswith(".tmp") for m in made), made
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


def test_make_dir_keeps_what_is_there(tmp_path: Path):
    folder = tmp_path / "f"
    placement.make_dir(folder)
    (folder / "kept").write_text("x")
    placement.make_dir(folder)  # already there: untouched
    assert (folder / "kept").read_text() == "x"
    (tmp_path / "file").write_text("y")
    try:
        placement.make_dir(tmp_path / "file")
    except OSError:
        pass
    else:
        raise AssertionError("a file is not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "file"]  # no temporary left
