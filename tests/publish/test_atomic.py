"""Atomic publishing: whatever moment a build dies, ``out`` is a complete site that verifies."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sitegen.publish import manifest, staging as publish
from sitegen.errors import SitegenError

from _publish_helpers import EXAMPLE, REPO, run_sitegen


def _build_proc(out: Path, cache: Path, *extra: str, sde: int | None = None) -> subprocess.Popen:
    """A build in its own process; a new ``sde`` (SOURCE_DATE_EPOCH) changes the inputs, so the
    build writes a new site instead of keeping the unchanged live one."""
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    if sde is not None:
        env["SOURCE_DATE_EPOCH"] = str(sde)
    env["PYTHONPATH"] = str(REPO)
    return subprocess.Popen([sys.executable, "-m", "sitegen", "build", str(EXAMPLE), "--out", str(out),
                             "--cache", str(cache), "--quiet", *extra],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _assert_complete(out: Path) -> Path:
    assert out.is_symlink(), f"{out} is not a symlink"
    target = os.readlink(out)
    assert not os.path.isabs(target), f"symlink target {target!r} is absolute"
    live = out.resolve()
    assert live.is_dir() and live.parent == publish.builds_dir(out).resolve()
    assert manifest.verify(out) == []
    return live


def test_sigkill_at_random_times_leaves_a_complete_site(tmp_path, cache_dir):
    out = tmp_path / "www" / "reports"
    first = _build_proc(out, cache_dir)  # cold: fills the cache
    assert first.wait(timeout=120) == 0, first.stderr.read().decode()
    _assert_complete(out)
    t0 = time.monotonic()
    warm = _build_proc(out, cache_dir, "--keep", "50", sde=1_700_000_000)
    assert warm.wait(timeout=120) == 0, warm.stderr.read().decode()
    duration = time.monotonic() - t0
    lives = {_assert_complete(out)}
    rng = random.Random(20240610)
    killed = 0
    # at least 6 builds, and more (up to 12) until 3 were killed mid-way: a build quicker than the
    # one timed above finishes before a late kill, and this machine's speed drifts from build to build
    for i in range(12):
        if i >= 6 and killed >= 3:
            break
        proc = _build_proc(out, cache_dir, "--keep", "50", sde=1_700_000_001 + i)
        time.sleep(rng.uniform(0.2, 1.0) * duration)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=60)
        lives.add(_assert_complete(out))
    assert killed >= 3, "the build always finished before the kill: the test did not test anything"
    r = run_sitegen("verify", out)
    assert r.returncode == 0, r.stdout + r.stderr
    # a later good build cleans up the leftovers of the killed ones and prunes to --keep
    r = run_sitegen("build", EXAMPLE, "--out", out, "--cache", cache_dir, "--keep", "2", "--quiet")
    assert r.returncode == 0, r.stderr
    _assert_complete(out)
    builds = publish.builds_dir(out)
    names = sorted(p.name for p in builds.iterdir() if p.name != ".lock")
    assert len(names) == 2 and all(publish.BUILD_NAME.match(n) for n in names), names
    assert out.resolve().name == names[-1]
    assert not list(out.parent.glob(".reports.link-*"))


def test_kill_while_writing_keeps_the_old_site(tmp_path):
    """Kill a publish of a big site for sure mid-write (while its staging folder exists)."""
    out = tmp_path / "site"
    publish.publish({"index.html": b"<p>old</p>", "assets/a.js": b"1"}, out)
    old = out.resolve()
    code = (
        "import sys; from pathlib import Path; from sitegen.publish import staging as publish\n"
        "files = {f'runs/r{i}/index.html': bytes([i % 251]) * 200_000 for i in range(400)}\n"
        "files['index.html'] = b'new'\n"
        "publish.publish(files, Path(sys.argv[1]))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    builds = publish.builds_dir(out)
    deadline = time.monotonic() + 30
    while not list(builds.glob(".staging-*/runs/r1*")):
        assert proc.poll() is None and time.monotonic() < deadline, "the publish never started writing"
        time.sleep(0.005)
    proc.kill()
    proc.wait()
    assert out.resolve() == old
    assert (out / "index.html").read_bytes() == b"<p>old</p>"
    assert list(builds.glob(".staging-*")), "expected the killed build's staging folder to be left behind"
    publish.publish({"index.html": b"new"}, out, keep=1)
    assert (out / "index.html").read_bytes() == b"new"
    assert not list(builds.glob(".staging-*")) and len(publish.list_builds(out)) == 1


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
