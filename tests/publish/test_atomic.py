"""Atomic publishing: whatever moment a build dies, ``out`` is a complete site that verifies."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sitegen.errors import SitegenError
from sitegen.publish import manifest
from sitegen.publish import staging as publish
from sitegen.publish.live import BUILD_NAME
from tests.support import EXAMPLE, ROOT
from tests.support.cli import child_env, run_sitegen


def _killed_build(out: Path, cache: Path, kill: str, *, title: str, keep: int = 50) -> subprocess.CompletedProcess:
    """``sitegen build`` of the example archive in a child process killed (SIGKILL) just before
    the write ``kill`` names (see :mod:`tests.support.killer`; ``"0"``: not killed). A new
    ``title`` changes every page, so the build writes them all instead of linking the live
    build's."""
    config = out.parent / f"{title}.toml"
    config.write_text(f"title = {json.dumps(title)}\n")
    return subprocess.run([sys.executable, "-m", "tests.support.killer", kill, "build", str(EXAMPLE), "--out", str(out),
                           "--cache", str(cache), "--config", str(config), "--keep", str(keep), "--jobs", "1", "--quiet"],
                          cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=300)


def _assert_complete(out: Path) -> Path:
    assert out.is_symlink(), f"{out} is not a symlink"
    target = os.readlink(out)
    assert not os.path.isabs(target), f"symlink target {target!r} is absolute"
    live = out.resolve()
    assert live.is_dir() and live.parent == publish.builds_dir(out).resolve()
    assert manifest.verify(out) == []
    return live


def test_a_build_killed_at_any_write_leaves_the_live_site_whole(tmp_path, cache_dir):
    """Builds killed at chosen writes, counted (never timed): before the staging folder is
    renamed, before the switch's symlink is made, before it replaces ``out``, and at a tenth,
    two tenths... of all the writes (files, links, folders). ``out`` is always the last good
    build, whole; the next good build removes what the killed ones left and prunes to --keep."""
    out = tmp_path / "www" / "reports"
    out.parent.mkdir()
    first = _killed_build(out, cache_dir, "0", title="cold")
    assert first.returncode == 0, first.stderr
    warm = _killed_build(out, cache_dir, "0", title="warm")  # the shape of every build below
    assert warm.returncode == 0, warm.stderr
    calls = json.loads(warm.stdout.splitlines()[-1])
    assert calls[-3:] == ["rename", "symlink", "replace"]  # staging -> final, the link, the switch
    assert calls.count("write") > 20 and calls.count("link") > 20  # pages written, unchanged ones linked
    live = _assert_complete(out)
    kills = ["replace:1", "symlink:1", "rename:1", "1", *(str(len(calls) * k // 10) for k in range(1, 10))]
    for i, kill in enumerate(kills):
        r = _killed_build(out, cache_dir, kill, title=f"killed {i}")
        assert r.returncode == -signal.SIGKILL, (kill, r.returncode, r.stderr)
        assert _assert_complete(out) == live, f"killed at {kill}: the live build changed"
    builds = publish.builds_dir(out)
    assert list(builds.glob(".staging-*")), "the killed builds left no staging folder behind"
    assert list(out.parent.glob(".reports.link-*")), "the build killed before the switch left no link behind"
    r = run_sitegen("verify", out)
    assert r.returncode == 0, r.stdout + r.stderr
    # a later good build cleans up the leftovers of the killed ones and prunes to --keep
    r = _killed_build(out, cache_dir, "0", title="good", keep=2)
    assert r.returncode == 0, r.stderr
    assert _assert_complete(out) != live
    names = sorted(p.name for p in builds.iterdir() if p.name != ".lock")
    assert len(names) == 2 and all(BUILD_NAME.match(n) for n in names), names
    assert out.resolve().name == names[-1]
    assert not list(out.parent.glob(".reports.link-*")) and not list(builds.glob(".staging-*"))


def test_keep_prunes_but_never_the_live_build(tmp_path):
    out = tmp_path / "site"
    for i in range(5):
        publish.publish({"index.html": f"v{i}".encode(), "assets/x.css": b"x"}, out, keep=3)
    builds = publish.list_builds(out)
    assert [b.name[:6] for b in builds] == ["000003", "000004", "000005"]
    assert (out / "index.html").read_bytes() == b"v4"
    with pytest.raises(SitegenError):
        publish.publish({"index.html": b"x"}, out, keep=0)


def test_gz_twins_are_deterministic_with_the_originals_mtime(tmp_path):
    out = tmp_path / "site"
    big = b"x" * 5000
    publish.publish({"index.html": big, "assets/a.js": big, "small.js": b"1"}, out)
    for rel in ("index.html", "assets/a.js"):
        gz = (out / (rel + ".gz")).read_bytes()
        assert gz[4:8] == b"\0\0\0\0"  # gzip header mtime 0
        assert (out / (rel + ".gz")).stat().st_mtime_ns == (out / rel).stat().st_mtime_ns
    assert not (out / "small.js.gz").exists()


def test_refuses_paths_outside_the_site(tmp_path):
    for bad in ("../x", "/etc/passwd", "a/../../b", "a\\b", ""):
        with pytest.raises(SitegenError):
            publish.publish({bad: b"x"}, tmp_path / "site")
    assert not (tmp_path / "x").exists() and not (tmp_path / "site").exists()


def test_migrates_an_old_real_folder_and_refuses_a_foreign_one(tmp_path):
    out = tmp_path / "site"
    (out / "assets").mkdir(parents=True)
    (out / "index.html").write_text("legacy")
    publish.publish({"index.html": b"new"}, out)
    assert out.is_symlink() and (out / "index.html").read_text() == "new"
    names = [b.name for b in publish.list_builds(out)]
    assert names[0] == "000000-legacy" and (publish.builds_dir(out) / names[0] / "index.html").read_text() == "legacy"

    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious")
    with pytest.raises(SitegenError, match="not made by sitegen"):
        publish.publish({"index.html": b"x"}, home)
    assert (home / "thesis.tex").read_text() == "precious" and not home.is_symlink()


def test_relative_symlink_survives_moving_the_parent(tmp_path):
    out = tmp_path / "a" / "site"
    publish.publish({"index.html": b"hello"}, out)
    (tmp_path / "a").rename(tmp_path / "b")
    assert (tmp_path / "b" / "site" / "index.html").read_bytes() == b"hello"
