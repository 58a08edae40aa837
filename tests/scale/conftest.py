"""Real components for tests/scale: a Dask LocalCluster (2 worker processes) and a moto S3 server."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from scale_helpers import CONFIG, need
from testpaths import EXAMPLE


@pytest.fixture(scope="session")
def reference_site(tmp_path_factory) -> Path:
    """The example archive built on this machine the ordinary way (local executor)."""
    from sitegen.pipeline.build import BuildOptions, build

    base = tmp_path_factory.mktemp("reference")
    build(EXAMPLE, base / "site", BuildOptions(config=CONFIG, cache=base / "cache"))
    return base / "site"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """LocalCluster(n_workers=2, processes=True, threads_per_worker=1) and a client on it."""
    distributed = need("distributed")
    flaky = tmp_path_factory.mktemp("flaky")
    saved = {k: os.environ.get(k) for k in ("SITEGEN_TEST_FLAKY_DIR", "SITEGEN_TEST_SLEEP")}
    os.environ["SITEGEN_TEST_FLAKY_DIR"] = str(flaky)  # set before the workers start: they inherit it
    os.environ["SITEGEN_TEST_SLEEP"] = "0.6"
    try:
        with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cl, \
                distributed.Client(cl, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=60)
            yield cl, client
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class MotoServer:
    """``python -m moto.server`` on 127.0.0.1 in a subprocess; requests are counted from its access log."""

    def __init__(self, tmp: Path) -> None:
        need("moto.server")
        need("s3fs")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.tmp, self.mark = tmp, 0
        env = dict(os.environ)
        self.log = (tmp / "moto.log").open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/moto-api/", timeout=1)
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start; see {tmp / 'moto.log'}")
                time.sleep(0.2)

    def record(self) -> None:
        """Count requests from now on (the server's access log, one line per request)."""
        self.log.flush()
        self.mark = (self.tmp / "moto.log").stat().st_size

    def requests(self) -> list[dict]:
        """``{"method", "url"}`` of every request since :meth:`record`, from the access log
        (``127.0.0.1 - - [date] "GET /bucket?list-type=2&... HTTP/1.1" 200 -``)."""
        time.sleep(0.2)  # let the server write its last lines
        with (self.tmp / "moto.log").open("rb") as f:
            f.seek(self.mark)
            text = f.read().decode("utf-8", "replace")
        out = []
        for m in re.finditer(r'"([A-Z]+) (\S+) HTTP/[0-9.]+" (\d+)', text):
            out.append({"method": m.group(1), "url": self.url + m.group(2), "status": int(m.group(3))})
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server and the AWS environment pointing at it (dummy keys, no real config)."""
    tmp = tmp_path_factory.mktemp("moto")
    server = MotoServer(tmp)
    env = {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": server.url, "AWS_CONFIG_FILE": str(tmp / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "none"),
    }
    saved = {k: os.environ.get(k) for k in [*env, "AWS_PROFILE", "AWS_SESSION_TOKEN"]}
    os.environ.update(env)
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    try:
        yield server
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def s3fs_client(s3):
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)


@pytest.fixture
def fresh_home(tmp_path, monkeypatch) -> Path:
    """An empty XDG cache home: where mirrors and pulled caches go."""
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home
