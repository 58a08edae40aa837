"""The command line as a nightly CI job sees it: exit codes, --quiet, progress, the executor
flags and URLs handed to the build, a process that ends cleanly and is changed only by the
console script. (``serve`` and ``htpasswd``: tests/tools/.)"""
from __future__ import annotations

import os
import pty
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import EXAMPLE, ROOT
from tests.support.cli import child_env, run_sitegen


def test_exit_0_and_quiet_prints_nothing(tmp_path, cache_dir):
    r = run_sitegen("build", EXAMPLE, "--out", tmp_path / "site", "--cache", cache_dir, "--quiet", "--strict")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = run_sitegen("verify", tmp_path / "site", "--archive", EXAMPLE, "--quiet")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_damaged_archive_exit_1_only_with_strict(tmp_path, cache_dir):
    archive = tmp_path / "archive"
    shutil.copytree(EXAMPLE, archive)
    victim = sorted(archive.rglob("events.out.tfevents.*"))[0]
    with open(victim, "ab") as f:  # a whole record whose checksums are wrong: damage
        f.write(struct.pack("<Q", 5) + b"\x00\x00\x00\x00" + b"garba" + b"\x00\x00\x00\x00")
    r = run_sitegen("build", archive, "--out", tmp_path / "site", "--cache", cache_dir, "--strict")
    assert r.returncode == 1, r.stderr
    assert "problems" in r.stderr and (tmp_path / "site" / "index.html").is_file()  # built all the same
    r = run_sitegen("build", archive, "--out", tmp_path / "site", "--cache", cache_dir, "--quiet")
    assert r.returncode == 0, r.stderr


def test_strict_passes_on_a_run_still_being_written(tmp_path, cache_dir):
    archive = tmp_path / "archive"
    shutil.copytree(EXAMPLE, archive)
    victim = sorted(archive.rglob("events.out.tfevents.*"))[0]
    with open(victim, "ab") as f:
        f.write(b"\x07garb")  # the first 5 bytes of a record header: the writer is mid-record
    r = run_sitegen("build", archive, "--out", tmp_path / "site", "--cache", cache_dir, "--strict")
    assert r.returncode == 0, r.stderr
    assert "still being written" in r.stderr and "0 problems" in r.stderr
    report = (tmp_path / "site" / "build-report.json").read_text()
    assert "truncated" in report  # still recorded, for audits


def test_strict_passes_on_a_resumed_run(tmp_path, cache_dir):
    run = tmp_path / "archive" / "resumed"
    run.mkdir(parents=True)
    # a training script that appends to its metrics file, restarted from a checkpoint at step 5
    rows = [f"{s},{1.0 / (s + 1)}" for steps in (range(0, 10), range(5, 15)) for s in steps]
    (run / "metrics.csv").write_text("step,loss\n" + "\n".join(rows) + "\n")
    r = run_sitegen("build", tmp_path / "archive", "--out", tmp_path / "site", "--cache", cache_dir, "--strict")
    assert r.returncode == 0, r.stderr
    assert "steps that go back" in r.stderr and "0 problems" in r.stderr
    assert "step-order" in (tmp_path / "site" / "build-report.json").read_text()  # still recorded
    r = run_sitegen("build", tmp_path / "archive", "--out", tmp_path / "site2", "--cache", cache_dir)
    assert r.returncode == 0 and "steps that go back" in r.stderr


def test_config_found_at_the_archive_root_then_the_current_folder(tmp_path, cache_dir):
    archive = tmp_path / "archive"
    shutil.copytree(EXAMPLE, archive)
    here = tmp_path / "here"
    here.mkdir()
    (here / "sitegen.toml").write_text('title = "From the current folder"\n')
    r = run_sitegen("build", archive, "--out", tmp_path / "site", "--cache", cache_dir, cwd=here)
    assert r.returncode == 0, r.stderr
    assert f"config: {here / 'sitegen.toml'}" in r.stderr or "config: sitegen.toml" in r.stderr
    assert "From the current folder" in (tmp_path / "site" / "index.html").read_text()
    (archive / "sitegen.toml").write_text('title = "From the archive"\n')
    r = run_sitegen("build", archive, "--out", tmp_path / "site", "--cache", cache_dir, cwd=here)
    assert r.returncode == 0, r.stderr
    assert f"config: {archive / 'sitegen.toml'}" in r.stderr
    assert "From the archive" in (tmp_path / "site" / "index.html").read_text()
    r = run_sitegen("build", archive, "--out", tmp_path / "site2", "--cache", cache_dir, "--config", here / "sitegen.toml", cwd=here)
    assert "From the current folder" in (tmp_path / "site2" / "index.html").read_text()


@pytest.mark.parametrize("case", ["bad-toml", "bad-value", "missing-archive", "unknown-option", "bad-keep", "bad-sde"])
def test_exit_2_for_bad_usage_or_config(tmp_path, case):
    args: list = ["build", EXAMPLE, "--out", tmp_path / "site"]
    env = {}
    if case == "bad-toml":
        (tmp_path / "sitegen.toml").write_text("title = [unclosed\n")
        args += ["--config", tmp_path / "sitegen.toml"]
    elif case == "bad-value":
        (tmp_path / "sitegen.toml").write_text("[charts]\npoints_per_chart = 1\n")
        args += ["--config", tmp_path / "sitegen.toml"]
    elif case == "missing-archive":
        args[1] = tmp_path / "nope"
    elif case == "unknown-option":
        args.append("--frobnicate")
    elif case == "bad-keep":
        args += ["--keep", "0"]
    elif case == "bad-sde":
        env["SOURCE_DATE_EPOCH"] = "yesterday"
    r = run_sitegen(*args, env=env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip() and "Traceback" not in r.stderr
    assert not (tmp_path / "site").exists()


def test_progress_only_on_a_terminal(tmp_path, cache_dir):
    plain = run_sitegen("build", EXAMPLE, "--out", tmp_path / "a", "--cache", cache_dir)
    assert plain.returncode == 0 and "\r" not in plain.stdout + plain.stderr
    assert "[2/4] reading" in plain.stderr  # plain log lines instead
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "sitegen", "build", str(EXAMPLE), "--out", str(tmp_path / "b"),
                             "--cache", str(cache_dir)], cwd=ROOT, env=child_env(),
                            stdout=slave, stderr=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=120) == 0
    os.close(master)
    assert b"\r\x1b[K[2/4] reading" in out, out


def test_ci_kit_is_well_formed():
    import yaml  # PyYAML (a dependency of the test tools)

    doc = yaml.safe_load((ROOT / "examples" / "ci" / "nightly.yml").read_text())
    assert doc.get("on", doc.get(True))["schedule"]  # YAML 1.1 reads a bare `on` as True
    steps = doc["jobs"]["publish"]["steps"]
    assert any(s.get("uses", "").startswith("actions/cache@") for s in steps)
    script = ROOT / "examples" / "ci" / "cron-publish.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert os.access(script, os.X_OK)


def test_the_command_line_never_imports_pandas(tmp_path, cache_dir):
    """pyarrow imports pandas (when installed) on its first conversion from Python objects:
    0.5 s per process for nothing. The console script keeps it out of its process (local workers
    run the same tuning as their initializer)."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sys\n"
        "from sitegen.cli import run\n"
        "if __name__ == '__main__':\n"  # (spawned workers import this file too)
        "    sys.argv = ['sitegen', 'build', sys.argv[1], '--out', sys.argv[2], '--cache', sys.argv[3], '--quiet', '--jobs', '2']\n"
        "    try:\n"
        "        run()\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, exc.code\n"
        "    print('pandas' in sys.modules)\n")
    import pandas  # noqa: F401  - installed (mlflow needs it): the test means something

    r = subprocess.run([sys.executable, str(probe), str(EXAMPLE), str(tmp_path / "site"), str(cache_dir)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=child_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"


def test_main_changes_nothing_process_wide(tmp_path, cache_dir):
    """``sitegen.cli.main`` called from Python builds a site and leaves the caller's process as
    it found it: garbage-collector settings, environment, import hooks, signal handlers, threads
    (and pandas importable). Only the console script tunes its own process."""
    import gc
    import signal
    import threading

    from sitegen.cli import main

    def state():
        return (gc.get_threshold(), gc.isenabled(), gc.get_freeze_count(), dict(os.environ), list(sys.meta_path),
                {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)},
                sorted(t.name for t in threading.enumerate()))

    before = state()
    for extra in ([], ["--jobs", "2"], ["--no-cache"]):
        assert main(["build", str(EXAMPLE), "--out", str(tmp_path / "site"), "--cache", str(cache_dir), "--quiet", *extra]) == 0
    assert (tmp_path / "site" / "index.html").is_file()
    assert state() == before
    import pandas  # noqa: F401  (no import blocker was left behind)


def test_the_console_script_exits_cleanly(tmp_path, cache_dir):
    """With worker processes, the console script ends with the exit functions run and nothing
    on stderr (multiprocessing's clean-up included); exit codes as ``main`` returns them."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import atexit, sys\n"
        "import sitegen.pipeline.build\n"
        "from sitegen.cli import run\n"
        "if __name__ == '__main__':\n"  # (the spawned workers import this file too)
        "    sitegen.pipeline.build.MIN_PARALLEL_BYTES = 0\n"  # worker processes even for the small example
        "    sitegen.pipeline.build.MIN_PARALLEL_ITEMS = 1\n"
        "    atexit.register(print, 'exit functions ran')\n"
        "    sys.argv = ['sitegen', 'build', sys.argv[1], '--out', sys.argv[2], '--cache', sys.argv[3], '--quiet', '--jobs', '2']\n"
        "    run()\n"
        "    print('not reached')\n")
    r = subprocess.run([sys.executable, str(probe), str(EXAMPLE), str(tmp_path / "site"), str(cache_dir)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=child_env())
    assert (r.returncode, r.stdout, r.stderr) == (0, "exit functions ran\n", "")
    assert (tmp_path / "site" / "index.html").is_file()
    r = run_sitegen("build", tmp_path / "nope", "--out", tmp_path / "other")
    assert r.returncode == 2 and "no such archive" in r.stderr
    r = run_sitegen("--version")
    assert r.returncode == 0 and r.stdout.strip()


def _options_of(monkeypatch, tmp_path: Path, *argv: str | Path, config: str | None = None):
    """The archive, output and :class:`BuildOptions` the command line hands ``build()`` (a
    stand-in that builds nothing)."""
    import sitegen.pipeline.build as B
    from sitegen.cli import main

    seen: dict = {}

    def fake_build(archive, out, options):
        seen.update(archive=archive, out=out, options=options)
        return B.BuildResult(Path(out), 0, 0, [])

    monkeypatch.setattr(B, "build", fake_build)
    extra: list = []
    if config is not None:
        (tmp_path / "sitegen.toml").write_text(config)
        extra = ["--config", tmp_path / "sitegen.toml"]
    assert main(["build", *map(str, argv), "--out", str(tmp_path / "site"), "--cache", str(tmp_path / "cache"),
                 "--quiet", *map(str, extra)]) == 0
    return seen["archive"], seen["options"]


def test_urls_reach_the_build_as_strings_and_a_scheduler_means_dask(tmp_path, monkeypatch):
    """``Path("s3://b/k")`` would be ``s3:/b/k``: URLs reach build() untouched."""
    from sitegen.pipeline.executors import Dask

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    archive, options = _options_of(monkeypatch, tmp_path, "s3://bucket/logs", "--scheduler", "tcp://10.0.0.5:8786")
    assert archive == "s3://bucket/logs"
    assert isinstance(options.executor, Dask) and options.executor.scheduler == "tcp://10.0.0.5:8786"
    archive, options = _options_of(monkeypatch, tmp_path, EXAMPLE)
    assert isinstance(archive, Path) and options.executor is None  # the default: build()'s own
    assert options.cache == tmp_path / "cache"


def test_jobs_and_the_executor_section_choose_the_executor(tmp_path, monkeypatch):
    """``--jobs 1``: this process; ``--jobs N``: N local workers; ``[executor]`` in sitegen.toml
    is the default and the flags win over it."""
    from sitegen.pipeline.executors import Dask, LocalPool, Serial

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)

    def executor(*argv, config=None):
        return _options_of(monkeypatch, tmp_path, EXAMPLE, *argv, config=config)[1].executor

    assert isinstance(executor("--jobs", "1"), Serial)
    pool = executor("--jobs", "2")
    assert isinstance(pool, LocalPool) and pool.workers == 2
    dask = '[executor]\nkind = "dask"\nscheduler = "tcp://10.0.0.5:8786"\n'
    got = executor(config=dask)
    assert isinstance(got, Dask) and got.scheduler == "tcp://10.0.0.5:8786"
    assert executor("--executor", "local", config=dask) is None  # the file's scheduler goes with it
    got = executor("--scheduler", "tcp://other:8786", config=dask)
    assert isinstance(got, Dask) and got.scheduler == "tcp://other:8786"
    got = executor("--executor", "dask", "--jobs", "3")
    assert isinstance(got, Dask) and (got.scheduler, got.workers) == (None, 3)  # a local cluster of 3


def test_scheduler_with_the_local_executor_is_a_usage_error(tmp_path, capsys):
    from sitegen.cli import EXIT_USAGE, main

    code = main(["build", str(EXAMPLE), "--out", str(tmp_path / "s"), "--executor", "local", "--scheduler", "tcp://127.0.0.1:1"])
    assert code == EXIT_USAGE
    assert "--scheduler needs --executor dask" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
