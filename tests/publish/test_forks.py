"""A rebuild that draws a few runs shares its comparison pages with a forked child
(``sitegen.pipeline.forks``): the same site as drawing them all in one process, also when the child
fails, and no fork where one would be unsafe.

The builds run in their own interpreter, as the command does: there OpenBLAS is held to one
thread before numpy loads (``cli.main``), so the process may fork; in this test process numpy's
own threads already run, and ``can_fork`` refuses (the build then draws everything itself)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from sitegen.pipeline import forks

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "site"))
from eventgen import write_grid, write_run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

# Builds ``archive`` into ``out`` like ``sitegen build``, records each fork's pid in ``log`` (a
# JSON list) and the slugs of the groups a child drew in ``log.child``; ``fail``: "1", the child
# raises; "hang", it sleeps (and the build waits for it 1 s plus its own share, 20 times over).
DRIVER = textwrap.dedent("""
    import json, os, sys
    archive, out, cache, log, fail = sys.argv[1:6]
    from sitegen.pipeline import build as b, forks
    real_init, real_draw = forks.Child.__init__, b.draw_group
    parent = os.getpid()
    forked = []

    def init(self, work):
        real_init(self, work)
        if self.pid:
            forked.append(self.pid)

    if fail == "hang":
        b.FORK_GRACE_S = 1

    def draw_group(job):
        if os.getpid() != parent:
            if fail == "1":
                raise RuntimeError("the child fails")
            if fail == "hang":
                import time
                time.sleep(600)
            with open(log + ".child", "a") as f:
                f.write(job.group.slug + "\\n")
        return real_draw(job)

    forks.Child.__init__ = init
    b.draw_group = draw_group
    from sitegen.cli import main
    code = main(["build", archive, "--out", out, "--cache", cache, "--quiet"])
    with open(log, "w") as f:
        json.dump(forked, f)
    sys.exit(code)
""")


def _build(archive: Path, out: Path, cache: Path, log: Path, *, fail: str = "0", fork: bool = True):
    env = {k: v for k, v in os.environ.items() if k != "SITEGEN_NO_FORK"}
    env.update(SOURCE_DATE_EPOCH="1700000000", OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(REPO))
    if not fork:
        env["SITEGEN_NO_FORK"] = "1"
    r = subprocess.run([sys.executable, "-c", DRIVER, str(archive), str(out), str(cache), str(log), fail],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    child = log.with_name(log.name + ".child")
    drawn = child.read_text().split() if child.exists() else []
    child.unlink(missing_ok=True)
    return json.loads(log.read_text()), drawn, r.stderr


def _pages(site: Path) -> dict[str, bytes]:
    live = site.resolve()
    return {p.relative_to(live).as_posix(): p.read_bytes() for p in live.rglob("*")
            if p.is_file() and not p.name.startswith("manifest.json")}


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    return write_grid(tmp_path / "logs", projects=2, models=2, runs=3, steps=80)


def _grow(archive: Path, name: str, steps: int) -> None:
    shutil.rmtree(archive / name)
    write_run(archive / name, tags=["train/loss", "val/acc"], steps=steps, seed=7, start=1.7e9)


@pytest.mark.parametrize("fail", ["0", "1", "hang"])
def test_a_rebuild_shares_its_pages_with_a_forked_child(archive: Path, tmp_path: Path, fail: str):
    """One run grew: its model, project and whole-archive pages are drawn again, some by a
    forked child; the site equals a build that never forks (and, when the child fails or
    hangs, the main process draws its part)."""
    site, cache, log = tmp_path / "site", tmp_path / "cache", tmp_path / "log.json"
    _build(archive, site, cache, log)
    _grow(archive, "proj1/model0/run2", 120)
    forked, drawn, stderr = _build(archive, site, cache, log, fail=fail)
    assert len(forked) == 1  # one child for the comparison pages
    assert fail != "0" or drawn  # it drew some of them
    assert ("a forked helper failed" in stderr) == (fail == "1")
    assert ("a forked helper took over" in stderr) == (fail == "hang")
    _build(archive, tmp_path / "plain", tmp_path / "cache2", log, fork=False)
    assert json.loads(log.read_text()) == []  # SITEGEN_NO_FORK: no child
    assert _pages(site) == _pages(tmp_path / "plain")
    r = subprocess.run([sys.executable, "-m", "sitegen", "verify", str(site), "--quiet"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stdout + r.stderr  # the manifest lists the child's files as written


def test_a_child_gives_back_what_it_returned_or_none():
    script = textwrap.dedent("""
        import os, sys
        from sitegen.pipeline import forks
        assert forks.can_fork()
        ok = forks.Child(lambda: {"pages": [1, 2], "pid": os.getpid()})
        child = ok.pid
        assert child and child != os.getpid()
        assert ok.result() == {"pages": [1, 2], "pid": child}
        assert forks.Child(lambda: 1 / 0).result() is None  # it raised
        assert forks.Child(lambda: os._exit(0)).result() is None  # it left without a result
        assert forks.Child(lambda: os.kill(os.getpid(), 9)).result() is None  # it died
        slow = forks.Child(lambda: __import__("time").sleep(60))
        slow.stop()  # ended at once
        assert slow.pid == 0
        import time
        t = time.monotonic()
        assert forks.Child(lambda: time.sleep(60)).result(timeout=0.5) is None  # it hangs: ended
        assert time.monotonic() - t < 10
        print("fine")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(REPO)))
    assert (r.returncode, r.stdout.strip()) == (0, "fine"), r.stderr
    assert r.stderr.count("a forked helper failed") == 1 and "ZeroDivisionError" in r.stderr
    assert r.stderr.count("a forked helper took over 0 s") == 1


def test_no_fork_while_another_thread_runs_or_vl_convert_is_loaded(monkeypatch):
    # this test process as the command is when it forks: one thread, vl-convert not loaded
    monkeypatch.delitem(sys.modules, "vl_convert", raising=False)
    active = threading.active_count
    monkeypatch.setattr(forks.threading, "active_count", lambda: 1)
    monkeypatch.setattr(forks, "_thread_names", lambda: ["python"])
    assert forks.can_fork()
    monkeypatch.setattr(forks, "_thread_names", lambda: ["python", "jemalloc_bg_thd"])
    assert forks.can_fork()  # the allocator's background thread is fork-safe
    monkeypatch.setattr(forks, "_thread_names", lambda: ["python", "python"])  # e.g. OpenBLAS, a library's pool
    assert not forks.can_fork()
    assert forks.Child(lambda: 1).pid == 0 and forks.Child(lambda: 1).result() is None  # refused: the caller works
    monkeypatch.setattr(forks, "_thread_names", lambda: ["python"])
    monkeypatch.setattr(forks.threading, "active_count", active)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not forks.can_fork()  # a Python thread
    finally:
        stop.set()
        t.join()
    monkeypatch.setattr(forks.threading, "active_count", lambda: 1)
    assert forks.can_fork()
    monkeypatch.setitem(sys.modules, "vl_convert", object())
    assert not forks.can_fork()
    monkeypatch.delitem(sys.modules, "vl_convert")
    monkeypatch.setenv("SITEGEN_NO_FORK", "1")
    assert not forks.can_fork()
