"""A real S3 endpoint for the tests: ``python -m moto.server`` on 127.0.0.1 in a child process,
its requests counted from its access log."""
from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.support import need
from tests.support.cli import free_port


class MotoServer:
    """``python -m moto.server`` on a free port of 127.0.0.1."""

    def __init__(self, tmp: Path) -> None:
        need("moto.server")
        need("s3fs")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tmp, self.mark, self._sentinels = tmp, 0, 0
        self.log = (tmp / "moto.log").open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/moto-api/", timeout=1)
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start; see {tmp / 'moto.log'}") from None
                time.sleep(0.2)

    def record(self) -> None:
        """Count requests from now on (the server's access log, one line per request)."""
        self.mark = self._sentinel()

    def requests(self) -> list[dict]:
        """``{"method", "url", "status"}`` of every request since :meth:`record`, from the access
        log (``127.0.0.1 - - [date] "GET /bucket?list-type=2&... HTTP/1.1" 200 -``)."""
        end = self._sentinel()
        with (self.tmp / "moto.log").open("rb") as f:
            f.seek(self.mark)
            text = f.read(end - self.mark).decode("utf-8", "replace")
        out = []
        for m in re.finditer(r'"([A-Z]+) (\S+) HTTP/[0-9.]+" (\d+)', text):
            if not m.group(2).startswith("/moto-api/?sentinel="):
                out.append({"method": m.group(1), "url": self.url + m.group(2), "status": int(m.group(3))})
        return out

    def _sentinel(self) -> int:
        """Request a marker and wait until the log shows it: every request answered before it is
        logged by then. The log's size up to the end of the marker's line."""
        self._sentinels += 1
        marker = f"/moto-api/?sentinel={self._sentinels} ".encode()
        urllib.request.urlopen(self.url + marker.decode().strip(), timeout=10).read()
        deadline = time.monotonic() + 30
        while True:
            data = (self.tmp / "moto.log").read_bytes()
            at = data.rfind(marker)
            if at >= 0:
                end = data.find(b"\n", at)
                return len(data) if end < 0 else end + 1
            assert time.monotonic() < deadline, "the moto server never logged its marker request"
            time.sleep(0.02)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
