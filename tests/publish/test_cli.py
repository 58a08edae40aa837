"""The CLI as a nightly CI job sees it: exit codes, --quiet, progress, serve, htpasswd."""
from __future__ import annotations

import gzip
import http.client
import os
import pty
import re
import shutil
import subprocess
import sys

import pytest

from sitegen.tools.htpasswd import apr1, check, htpasswd_line
from sitegen.tools.serve import SECURITY_HEADERS

from _publish_helpers import EXAMPLE, REPO, run_sitegen

KIT = REPO / "examples" / "nginx"


def test_exit_0_and_quiet_prints_nothing(tmp_path, cache_dir):
    r = run_sitegen("build", EXAMPLE, "--out", tmp_path / "site", "--cache", cache_dir, "--quiet", "--strict")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = run_sitegen("verify", tmp_path / "site", "--archive", EXAMPLE, "--quiet")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_damaged_archive_exit_1_only_with_strict(tmp_path, cache_dir):
    archive = tmp_path / "archive"
    shutil.copytree(EXAMPLE, archive)
    victim = sorted(archive.rglob("events.out.tfevents.*"))[0]
    with open(victim, "ab") as f:
        f.write(b"\x07garb")  # 5 garbage bytes after the last record
    r = run_sitegen("build", archive, "--out", tmp_path / "site", "--cache", cache_dir, "--strict")
    assert r.returncode == 1, r.stderr
    assert "problems" in r.stderr and (tmp_path / "site" / "index.html").is_file()  # built all the same
    r = run_sitegen("build", archive, "--out", tmp_path / "site", "--cache", cache_dir, "--quiet")
    assert r.returncode == 0, r.stderr


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
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    proc = subprocess.Popen([sys.executable, "-m", "sitegen", "build", str(EXAMPLE), "--out", str(tmp_path / "b"),
                             "--cache", str(cache_dir)], cwd=REPO, env={**env, "PYTHONPATH": str(REPO)},
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


def test_apr1_matches_openssl():
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed to check the apr1 implementation")
    for password, salt in [("secret", "X"), ("pässwörd", "12345678"), ("a" * 40, "Zz./9"), ("x" * 16, "s"), ("y", "saltsaltEXTRA")]:
        ref = subprocess.run(["openssl", "passwd", "-apr1", "-salt", salt, "-stdin"], input=password.encode(),
                             capture_output=True, check=True).stdout.decode().strip()
        assert apr1(password, salt) == ref
        assert check(password, ref) and not check(password + "!", ref)


def test_htpasswd_command():
    r = run_sitegen("htpasswd", "alice", "--password-stdin", input="s3cret pass\n")
    assert r.returncode == 0, r.stderr
    user, hashed = r.stdout.strip().split(":", 1)
    assert user == "alice" and re.fullmatch(r"\$apr1\$[./0-9A-Za-z]{8}\$[./0-9A-Za-z]{22}", hashed)
    assert check("s3cret pass", hashed)
    assert run_sitegen("htpasswd", "a:b", "--password-stdin", input="x\n").returncode == 2
    assert run_sitegen("htpasswd", "alice", "--password-stdin", input="").returncode == 2
    assert htpasswd_line("bob", "pw", salt="abc") == "bob:" + apr1("pw", "abc")


def test_serve_sends_the_kit_headers(built_site):
    proc = subprocess.Popen([sys.executable, "-m", "sitegen", "serve", str(built_site), "--port", "0", "--quiet"],
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        base = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)

        port = int(base.rsplit(":", 1)[1].strip("/"))

        def get(path: str, **headers):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("GET", "/" + path, headers=headers)
                resp = conn.getresponse()
                return resp.status, resp.headers, resp.read()
            finally:
                conn.close()

        live = built_site.resolve()
        vega = next(live.glob("assets/vega-*.js")).name
        for path, status in [("index.html", 200), ("", 200), (f"assets/{vega}", 200), ("nope.html", 404),
                             ("assets/", 404), ("runs/", 404), ("../../etc/passwd", 404), (".lock", 404)]:
            code, headers, _ = get(path)
            assert code == status, path
            for name, value in SECURITY_HEADERS.items():
                assert headers[name] == value, (path, name)
        code, headers, body = get(f"assets/{vega}", **{"Accept-Encoding": "gzip, deflate"})
        assert headers["Content-Encoding"] == "gzip" and headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert gzip.decompress(body) == (live / "assets" / vega).read_bytes()
        assert "javascript" in headers["Content-Type"]
        code, headers, body = get(f"assets/{vega}", **{"Accept-Encoding": "gzip;q=0"})
        assert headers["Content-Encoding"] is None and body == (live / "assets" / vega).read_bytes()
        code, headers, body = get("index.html")
        assert headers["Cache-Control"] == "no-cache" and body == (live / "index.html").read_bytes()
        run = next(live.glob("runs/*")).name
        code, headers, _ = get(f"runs/{run}")
        assert code == 301 and headers["Location"] == f"/runs/{run}/"
        code, headers, _ = get(f"runs/{run}/scalars.js")
        assert code == 200 and headers["Cache-Control"] == "no-cache"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_serve_and_nginx_kit_agree_on_headers():
    snippet = (KIT / "security-headers.conf").read_text()
    found = dict(re.findall(r'^add_header\s+(\S+)\s+"([^"]*)"\s+always;', snippet, re.M))
    assert found == SECURITY_HEADERS


def test_ci_kit_is_well_formed():
    import yaml  # PyYAML (a dependency of the test tools)

    doc = yaml.safe_load((REPO / "examples" / "ci" / "nightly.yml").read_text())
    assert doc.get("on", doc.get(True))["schedule"]  # YAML 1.1 reads a bare `on` as True
    steps = doc["jobs"]["publish"]["steps"]
    assert any(s.get("uses", "").startswith("actions/cache@") for s in steps)
    script = REPO / "examples" / "ci" / "cron-publish.sh"
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
                       capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
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
                       capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (r.returncode, r.stdout, r.stderr) == (0, "exit functions ran\n", "")
    assert (tmp_path / "site" / "index.html").is_file()
    r = run_sitegen("build", tmp_path / "nope", "--out", tmp_path / "other")
    assert r.returncode == 2 and "no such archive" in r.stderr
    r = run_sitegen("--version")
    assert r.returncode == 0 and r.stdout.strip()
