"""``sitegen serve``: the preview server sends the nginx kit's headers, and the kit's snippet
and the server agree on them."""
from __future__ import annotations

import gzip
import http.client
import re
import subprocess
import sys

from sitegen.tools.serve import SECURITY_HEADERS
from tests.support import ROOT
from tests.support.cli import child_env

KIT = ROOT / "examples" / "nginx"


def test_serve_sends_the_kit_headers(built_site):
    proc = subprocess.Popen([sys.executable, "-m", "sitegen", "serve", str(built_site), "--port", "0", "--quiet"],
                            cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, text=True)
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
    # HSTS is the kit's alone: `sitegen serve` speaks plain HTTP, where browsers ignore it (RFC 6797 8.1)
    assert found.pop("Strict-Transport-Security") == "max-age=31536000"
    assert found == SECURITY_HEADERS
