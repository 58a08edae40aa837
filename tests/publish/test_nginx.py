"""The hosting kit with a real nginx (basic auth, gzip_static, cache and security headers) and a
real Chromium under the strict CSP; and the same site over file:// with no network at all."""
from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from sitegen.tools.serve import SECURITY_HEADERS
from tests.support import ROOT
from tests.support.cli import NGINX, free_port, run_sitegen

KIT = ROOT / "examples" / "nginx"
USER, PASSWORD = "alice", "correct horse battery staple"
IMMUTABLE = "public, max-age=31536000, immutable"


def render_kit(webroot: Path, htpasswd: Path, port: int) -> str:
    text = (KIT / "sitegen.conf").read_text()
    for name, value in {"SITEGEN_WEBROOT": webroot, "SITEGEN_HTPASSWD": htpasswd, "SITEGEN_SNIPPETS": KIT,
                        "SITEGEN_PORT": f"127.0.0.1:{port}"}.items():
        text = text.replace("${" + name + "}", str(value))
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    assert "${SITEGEN_" not in code, "a placeholder of the kit was not filled in"
    return text


class Nginx:
    def __init__(self, prefix: Path, server_conf: str, port: int) -> None:
        self.prefix, self.port = prefix, port
        (prefix / "sitegen.conf").write_text(server_conf)
        temps = "\n".join(f"    {kind}_temp_path {prefix}/tmp-{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        (prefix / "nginx.conf").write_text(
            ("user root;\n" if os.geteuid() == 0 else "")
            + f"daemon off;\nmaster_process on;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
            f"error_log {prefix}/error.log info;\nevents {{ worker_connections 64; }}\n"
            f"http {{\n    include /etc/nginx/mime.types;\n    default_type application/octet-stream;\n"
            f"    access_log {prefix}/access.log;\n{temps}\n    include {prefix}/sitegen.conf;\n}}\n"
        )
        args = [str(NGINX), "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", str(prefix / "error.log")]
        check = subprocess.run([*args, "-t"], capture_output=True, text=True)
        assert check.returncode == 0, f"nginx rejects the kit's config:\n{check.stderr}"
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"nginx did not start:\n{self.log()}")
                time.sleep(0.05)

    def log(self) -> str:
        path = self.prefix / "error.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful stop of the master we started
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def get(self, path: str, *, auth: tuple[str, str] | None = (USER, PASSWORD), gzip_ok: bool = False):
        headers = {}
        if auth:
            headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        if gzip_ok:
            headers["Accept-Encoding"] = "gzip"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()


@pytest.fixture(scope="module")
def nginx(built_site, tmp_path_factory):
    if not NGINX.is_file():
        pytest.fail(f"{NGINX} is missing: install nginx (Debian: apt-get install nginx-light) to run the hosting tests")
    prefix = tmp_path_factory.mktemp("nginx")
    made = run_sitegen("htpasswd", USER, "--password-stdin", input=PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    htpasswd = prefix / "htpasswd"
    htpasswd.write_text(made.stdout)
    port = free_port()
    server = Nginx(prefix, render_kit(built_site.parent, htpasswd, port), port)
    yield server
    server.stop()
    assert "[emerg]" not in server.log() and "[alert]" not in server.log(), server.log()


def _assert_security_headers(headers, what: str) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value, f"{what}: {name} is {headers.get(name)!r}"


def _site_paths(site: Path) -> list[str]:
    doc = json.loads((site / "manifest.json").read_text())
    return ["/reports/" + rel for rel in sorted(doc["files"])] + ["/reports/manifest.json"]


def test_every_path_needs_the_password(nginx, built_site):
    paths = _site_paths(built_site)
    runs = sorted({p.split("/")[3] for p in paths if p.startswith("/reports/runs/")})
    paths += ["/reports/", "/reports/runs/", f"/reports/runs/{runs[0]}/", "/reports/assets/", "/reports/nope.html",
              "/reports/assets/nope.js"]
    for path in paths:
        for auth in (None, (USER, "wrong"), ("mallory", PASSWORD)):
            status, headers, body = nginx.get(path, auth=auth)
            assert status == 401, f"{path} with {auth}: {status}"
            _assert_security_headers(headers, f"401 {path}")
            assert "Cache-Control" not in headers or "immutable" not in headers["Cache-Control"]


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)


def test_crawl_with_the_password_finds_everything(nginx, built_site):
    start = "/reports/index.html"
    seen: dict[str, int] = {}
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        status, headers, body = nginx.get(path)
        seen[path] = status
        assert status == 200, f"{path}: {status}"
        _assert_security_headers(headers, path)
        expected = IMMUTABLE if re.match(r"^/reports/(assets/|runs/[^/]+/media/|compare/[^/]+/p-[0-9a-f]{32}\.js$)", path) else "no-cache"
        assert headers["Cache-Control"] == expected, path
        if path.endswith(".js"):
            assert headers["Content-Type"].startswith(("application/javascript", "text/javascript")), path
        if path.endswith(".html"):
            parser = _Links()
            parser.feed(body.decode("utf-8"))
            for link in parser.links:
                url = urlsplit(urljoin("http://h" + path, link))
                if url.netloc == "h" and url.path.startswith("/reports/"):
                    todo.append(url.path)
                else:
                    assert url.scheme in ("http", "https", "mailto") and url.netloc != "h", f"{path} links to {link}"
    live = built_site.resolve()
    pages = {"/reports/" + p.relative_to(live).as_posix() for p in live.rglob("index.html")}
    assert pages <= set(seen), f"pages never linked: {sorted(pages - set(seen))}"
    assert any("/assets/vega-" in p for p in seen) and any("/assets/specs-" in p for p in seen)
    pieces = {"/reports/" + p.relative_to(live).as_posix() for p in live.glob("compare/*/p-*.js")}
    assert pieces and pieces <= set(seen), "every comparison page's piece scripts are linked (and cached for good)"

    status, headers, _ = nginx.get("/reports/")
    assert status == 200 and headers["Cache-Control"] == "no-cache"
    status, headers, _ = nginx.get("/reports/manifest.json")
    assert status == 200 and headers["Cache-Control"] == "no-cache"
    for path in ("/reports/nope.html", "/reports/assets/nope.js", "/reports/runs/", "/.reports.builds/",
                 f"/.reports.builds/{live.name}/index.html", "/reports/../.reports.builds/", "/reports/.lock"):
        status, headers, _ = nginx.get(path)
        assert status in (403, 404), f"{path}: {status}"
        _assert_security_headers(headers, f"{status} {path}")
        assert "immutable" not in headers.get("Cache-Control", ""), path


def test_gzip_static_serves_the_twins(nginx, built_site):
    live = built_site.resolve()
    twins = sorted(p for p in live.rglob("*.gz"))
    assert twins and any(p.parent.name == "assets" for p in twins)
    for twin in twins:
        original = twin.with_name(twin.name[:-3])
        path = "/reports/" + original.relative_to(live).as_posix()
        status, headers, body = nginx.get(path, gzip_ok=True)
        assert status == 200 and headers["Content-Encoding"] == "gzip", path
        assert "Accept-Encoding" in headers.get("Vary", ""), path
        assert body == twin.read_bytes() and gzip.decompress(body) == original.read_bytes(), path
        status, headers, body = nginx.get(path)
        assert headers.get("Content-Encoding") is None and body == original.read_bytes(), path


CSP_PROBE = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', e => window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));
"""


def _browse(page, url: str, messages: list[str]) -> None:
    page.goto(url, wait_until="load")
    if "/runs/" in url:
        page.wait_for_selector(".chart svg", timeout=20_000)
        assert page.locator(".chart svg").count() >= 1
        if page.locator("a.csv-download").count():  # the CSV is made in the page: allowed by the CSP too
            with page.expect_download() as download:
                page.locator("a.csv-download").click()
            lines = Path(download.value.path()).read_text("utf-8").splitlines()
            assert lines[0] == '"series","tag","step","wall_time","value"' and len(lines) > 1
    violations = page.evaluate("window.__cspViolations")
    assert violations == [], f"{url}: CSP violations {violations}"
    assert messages == [], f"{url}: console errors {messages}"


def _run_pages(site: Path) -> list[str]:
    live = site.resolve()
    return sorted(p.parent.relative_to(live).as_posix() for p in live.glob("runs/*/index.html"))


def test_chromium_through_nginx_under_the_strict_csp(nginx, built_site, browser):
    # the session's one Chromium (tests/conftest.py): a second sync Playwright cannot start
    ctx = browser.new_context(http_credentials={"username": USER, "password": PASSWORD})
    try:
        ctx.add_init_script(CSP_PROBE)
        page = ctx.new_page()
        messages: list[str] = []
        page.on("console", lambda m: messages.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: messages.append(f"pageerror: {e}"))
        base = f"http://127.0.0.1:{nginx.port}/reports/"
        response = page.goto(base)
        assert response.status == 200 and response.headers["content-security-policy"] == SECURITY_HEADERS["Content-Security-Policy"]
        for rel in ["index.html", *(f"{r}/index.html" for r in _run_pages(built_site))]:
            _browse(page, base + rel, messages)
    finally:
        ctx.close()


def test_chromium_over_file_urls_without_network(built_site, browser):
    attempted: list[str] = []

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            attempted.append(r.request.url)
            r.abort()

    ctx = browser.new_context(offline=True)
    try:
        ctx.add_init_script(CSP_PROBE)
        ctx.route("**/*", route)
        page = ctx.new_page()
        requests: list[str] = []
        page.on("request", lambda req: requests.append(req.url))
        messages: list[str] = []
        page.on("console", lambda m: messages.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: messages.append(f"pageerror: {e}"))
        base = built_site.as_uri() + "/"  # through the symlink, as a user would open it
        for rel in ["index.html", *[f"{r}/index.html" for r in _run_pages(built_site)][:4]]:
            _browse(page, base + rel, messages)
    finally:
        ctx.close()
    assert attempted == [], f"the site tried to reach the network: {attempted}"
    assert requests and all(u.startswith(("file://", "data:", "blob:")) for u in requests), [u for u in requests if not u.startswith("file://")]
