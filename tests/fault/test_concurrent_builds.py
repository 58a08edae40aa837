"""Two builds of one site (or one cache) at once, with real processes: the second never
interleaves with the first. It exits 4 naming the holder, or waits (``--wait``) and then builds;
a holder killed by SIGKILL leaves a lock the next build takes over."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from sitegen.publish import manifest
from sitegen.publish.live import builds_dir, list_builds
from tests.support import EXAMPLE, ROOT
from tests.support.cli import child_env, run_sitegen
from tests.support.sites import assert_same_site

EXIT_BUSY = 4


def _stopped_build(out: Path, cache: Path, title: str) -> subprocess.Popen:
    """``sitegen build`` in a child process that stops itself (SIGSTOP) at its 5th page write
    into the staging folder: it holds the locks of ``out`` and ``cache`` until SIGCONT or
    SIGKILL (see :mod:`tests.support.killer`). A new title makes it write its pages."""
    config = out.parent / f"{title}.toml"
    config.write_text(f"title = {json.dumps(title)}\n")
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.killer", "stop/write:5", "build", str(EXAMPLE), "--out",
                             str(out), "--cache", str(cache), "--config", str(config), "--jobs", "1", "--quiet"],
                            cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while _state(proc.pid) != "T":
        assert proc.poll() is None, f"the build ended before it stopped: {proc.communicate()}"
        assert time.monotonic() < deadline, "the build did not reach its 5th write"
        time.sleep(0.05)
    return proc


def _state(pid: int) -> str:
    """The process state letter from /proc (R, S, T for stopped, ...)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _build(out: Path, cache: Path, *extra: str, **kw) -> subprocess.CompletedProcess:
    return run_sitegen("build", EXAMPLE, "--out", out, "--cache", cache, "--quiet", *extra, **kw)


def _assert_whole(out: Path) -> None:
    assert manifest.verify(out) == []
    leftovers = [p.name for p in builds_dir(out).iterdir() if p.name.startswith((".staging-", ".trash-"))]
    assert leftovers == [], leftovers


def test_a_second_build_exits_4_naming_the_holder_or_waits_for_it(tmp_path):
    out, cache = tmp_path / "www" / "reports", tmp_path / "cache"
    out.parent.mkdir()
    first = _build(out, cache)
    assert first.returncode == 0, first.stderr
    live = out.resolve()
    holder = _stopped_build(out, cache, "held")
    try:
        # the same site: the exact command of the last build, which the no-change fast path
        # would answer: it must not read (nor keep) the state the holder is changing
        same = _build(out, cache)
        assert same.returncode == EXIT_BUSY, same.stderr
        line = _one_line(same.stderr)
        assert f"pid {holder.pid} on host {socket.gethostname()}" in line and ".reports.lock" in line, line
        # the same site through another cache, and another site through the same cache
        other_cache = _build(out, tmp_path / "cache2", "--wait", "0.3")
        assert other_cache.returncode == EXIT_BUSY and f"pid {holder.pid}" in _one_line(other_cache.stderr)
        other_site = _build(tmp_path / "www" / "other", cache, "--wait", "0.3")
        assert other_site.returncode == EXIT_BUSY, other_site.stderr
        line = _one_line(other_site.stderr)
        assert f"pid {holder.pid}" in line and str(cache / "lock") in line and "after waiting 0.3 s" in line, line
        assert not (tmp_path / "www" / "other").exists()
        assert out.resolve() == live and manifest.verify(out) == []  # nothing published meanwhile
        # a build told to wait starts once the holder is done, and builds on its result
        waiter = subprocess.Popen([sys.executable, "-m", "sitegen", "build", str(EXAMPLE), "--out", str(out), "--cache",
                                   str(cache), "--quiet", "--wait", "120"], cwd=ROOT, env=child_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        assert waiter.poll() is None, waiter.communicate()  # still waiting
        os.kill(holder.pid, signal.SIGCONT)
        _, err = holder.communicate(timeout=120)
        assert holder.returncode == 0, err
        held_build = out.resolve()
        assert held_build != live
        _, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 0, err
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    # the waiter built after the holder had published (its own build, or the holder's kept)
    assert [b.name for b in list_builds(out)][-2:] in ([held_build.name, out.resolve().name], [live.name, held_build.name])
    _assert_whole(out)


def test_a_lock_left_by_a_killed_build_is_taken_over(tmp_path):
    out, cache = tmp_path / "www" / "reports", tmp_path / "cache"
    out.parent.mkdir()
    first = _build(out, cache)
    assert first.returncode == 0, first.stderr
    live = out.resolve()
    holder = _stopped_build(out, cache, "killed")
    lock = out.parent / ".reports.lock"
    assert json.loads(lock.read_text())["pid"] == holder.pid
    holder.kill()  # SIGKILL while it holds both locks and half a staging folder
    holder.wait()
    assert out.resolve() == live
    assert manifest.verify(out) == []
    after = run_sitegen("build", EXAMPLE, "--out", out, "--cache", cache)  # (not --quiet: the takeover is a warning)
    assert after.returncode == 0, after.stderr
    warnings = [line for line in after.stderr.splitlines() if "taking over" in line]
    assert len(warnings) == 2, after.stderr  # the site's lock and the cache's
    assert all(f"pid {holder.pid}" in w for w in warnings), warnings
    _assert_whole(out)  # the killed build's staging folder is gone
    assert lock.read_text() == ""  # released: no holder named
    # the cache the killed build left gives the same site as a clean build
    clean = _build(tmp_path / "clean" / "reports", tmp_path / "clean-cache", env={"SOURCE_DATE_EPOCH": "1700000000"})
    again = _build(out, cache, env={"SOURCE_DATE_EPOCH": "1700000000"})
    assert clean.returncode == 0 and again.returncode == 0, (clean.stderr, again.stderr)
    assert_same_site(out, tmp_path / "clean" / "reports", news=False)


