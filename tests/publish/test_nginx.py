"""The hosting kit with a real nginx (basic auth, gzip_static, cache and security headers) and a
real Chromium under the strict CSP; and the same site over file:// with no network at all."""
from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import re
import shutil
import signal
import socket
import sys
import ssl
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


#: the kit's password-guessing limit, as it is in examples/nginx/sitegen.conf
KIT_RATE = "rate=60r/m"


def render_kit(webroot: Path, htpasswd: Path, port: int, *, http_port: int, tls: TLS, relax_limit: bool = False) -> str:
    """The kit with its placeholders filled in; ``relax_limit``: the rate limit made too loose to
    matter, for the tests that crawl the whole site from one address."""
    text = (KIT / "sitegen.conf").read_text()
    for name, value in {"SITEGEN_WEBROOT": webroot, "SITEGEN_HTPASSWD": htpasswd, "SITEGEN_SNIPPETS": KIT,
                        "SITEGEN_PORT": f"127.0.0.1:{port}", "SITEGEN_HTTP_PORT": f"127.0.0.1:{http_port}",
                        "SITEGEN_TLS_CERT": tls.cert, "SITEGEN_TLS_KEY": tls.key}.items():
        text = text.replace("${" + name + "}", str(value))
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    assert "${SITEGEN_" not in code, "a placeholder of the kit was not filled in"
    assert KIT_RATE in code
    return text.replace(KIT_RATE, "rate=100000r/s") if relax_limit else text


class TLS:
    """A self-signed certificate for 127.0.0.1 made with openssl."""

    def __init__(self, folder: Path) -> None:
        self.cert, self.key = folder / "cert.pem", folder / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                        "-keyout", str(self.key), "-out", str(self.cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        self.context = ssl.create_default_context(cafile=str(self.cert))


@pytest.fixture(scope="session")
def tls(tmp_path_factory) -> TLS:
    return TLS(tmp_path_factory.mktemp("tls"))


class Nginx:
    def __init__(self, prefix: Path, server_conf: str, port: int, tls: TLS | None = None, http_port: int | None = None) -> None:
        self.prefix, self.port, self.tls, self.http_port = prefix, port, tls, http_port
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

    def get(self, path: str, *, auth: tuple[str, str] | None = (USER, PASSWORD), gzip_ok: bool = False,
            source: str = "127.0.0.1", plain: bool = False):
        """One request over HTTPS (``plain``: over the plain HTTP port), from the address ``source``."""
        headers = {}
        if auth:
            headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        if gzip_ok:
            headers["Accept-Encoding"] = "gzip"
        if plain or self.tls is None:
            conn = http.client.HTTPConnection("127.0.0.1", self.http_port if plain else self.port, timeout=10,
                                              source_address=(source, 0))
        else:
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=10, context=self.tls.context,
                                               source_address=(source, 0))
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()


def start_kit(built_site: Path, prefix: Path, tls: TLS, *, relax_limit: bool, htpasswd_args: tuple[str, ...] = ()) -> Nginx:
    """nginx running the kit on two free ports (HTTPS and its plain HTTP redirect)."""
    if not NGINX.is_file():
        pytest.fail(f"{NGINX} is missing: install nginx (Debian: apt-get install nginx-light) to run the hosting tests")
    made = run_sitegen("htpasswd", USER, "--password-stdin", *htpasswd_args, input=PASSWORD + "\n")
    assert made.returncode == 0, made.stderr
    htpasswd = prefix / "htpasswd"
    htpasswd.write_text(made.stdout)
    port, http_port = free_port(), free_port()
    conf = render_kit(built_site.parent, htpasswd, port, http_port=http_port, tls=tls, relax_limit=relax_limit)
    return Nginx(prefix, conf, port, tls, http_port)


@pytest.fixture(scope="module")
def nginx(built_site, tmp_path_factory, tls):
    """The kit, with its rate limit loosened: these tests crawl the site from one address."""
    server = start_kit(built_site, tmp_path_factory.mktemp("nginx"), tls, relax_limit=True)
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
        expected = IMMUTABLE if re.match(r"^/reports/(assets/|runs/[^/]+/media/|compare/[^/]+/p-[0-9a-f]{32}\.js$|index/[0-9a-f]{20}\.js$)", path) else "no-cache"
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
    shards = sorted("/reports/" + p.relative_to(live).as_posix() for p in live.glob("index/*.js"))
    assert shards  # (named only in index-data.js: the index's script loads them)
    for path in shards:
        status, headers, _ = nginx.get(path)
        assert status == 200 and headers["Cache-Control"] == IMMUTABLE, path

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
    ctx = browser.new_context(http_credentials={"username": USER, "password": PASSWORD}, ignore_https_errors=True)
    try:
        ctx.add_init_script(CSP_PROBE)
        page = ctx.new_page()
        messages: list[str] = []
        page.on("console", lambda m: messages.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: messages.append(f"pageerror: {e}"))
        base = f"https://127.0.0.1:{nginx.port}/reports/"
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


HSTS = "max-age=31536000"


def test_plain_http_only_redirects_to_https(nginx):
    """Nothing over plain HTTP, not even the password prompt: every path is a redirect."""
    for path in ("/", "/reports/", "/reports/index.html", "/reports/manifest.json", "/.reports.builds/", "/nope?q=1"):
        for auth in (None, (USER, PASSWORD)):
            status, headers, body = nginx.get(path, auth=auth, plain=True)
            assert status == 301 and headers["Location"] == f"https://127.0.0.1{path}", (path, status, headers["Location"])
            assert "WWW-Authenticate" not in headers and b"<script" not in body


def test_hsts_on_every_answer(nginx):
    for path, auth, expected in [("/reports/", (USER, PASSWORD), 200), ("/reports/", None, 401),
                                 ("/reports/nope.html", (USER, PASSWORD), 404), ("/reports/assets/", (USER, PASSWORD), 403)]:
        status, headers, _ = nginx.get(path, auth=auth)
        assert status == expected and headers["Strict-Transport-Security"] == HSTS, (path, status)


def _gixy() -> str:
    """gixy-ng's command, installed with the test extras beside this Python."""
    found = shutil.which("gixy", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    assert found, 'gixy is missing: pip install -e ".[test]" installs gixy-ng'
    return found


def test_the_kit_passes_gixy(tmp_path, tls):
    """gixy-ng (the nginx configuration analyser) finds nothing in the kit as it ships."""
    conf = render_kit(tmp_path / "www", tmp_path / "htpasswd", 443, http_port=80, tls=tls)
    (tmp_path / "sitegen.conf").write_text(conf)
    (tmp_path / "nginx.conf").write_text(f"events {{}}\nhttp {{\n    include {tmp_path}/sitegen.conf;\n}}\n")
    r = subprocess.run([_gixy(), "-f", "json", str(tmp_path / "nginx.conf")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [], r.stdout
    bad = tmp_path / "bad.conf"  # (and gixy does find a known mistake: the check can fail)
    bad.write_text(f"events {{}}\nhttp {{ server {{ listen 8080; location / {{ add_header X-A a; }} "
                   f"location ~ /x {{ return 302 http://$http_host$request_uri; }} }} }}\n")
    found = subprocess.run([_gixy(), "-f", "json", str(bad)], capture_output=True, text=True)
    assert json.loads(found.stdout), found.stdout


def test_rapid_wrong_passwords_are_limited_per_address(built_site, tmp_path, tls):
    """The kit as it ships: 10 rapid wrong passwords from one address get 401, the 11th 429; a
    client with the password at another address gets 200 meanwhile. The limit counts every
    request of the guessing address (nginx checks the password before any limit could know the
    outcome), so its right password waits too, until the bucket refills (one a second)."""
    server = start_kit(built_site, tmp_path, tls, relax_limit=False)
    try:
        attacker = "127.0.0.1"
        got = [server.get("/reports/", auth=(USER, f"guess-{i}"), source=attacker)[0] for i in range(11)]
        assert got == [401] * 10 + [429], got
        assert server.get("/reports/", source="127.0.0.2")[0] == 200
        assert server.get("/reports/", source=attacker)[0] == 429
        time.sleep(2.2)
        assert server.get("/reports/", source=attacker)[0] == 200
    finally:
        server.stop()


def test_nginx_accepts_bcrypt_lines(built_site, tmp_path, tls):
    """``sitegen htpasswd --scheme bcrypt``: nginx (through the system's crypt()) lets the right
    password in and keeps a wrong one out."""
    server = start_kit(built_site, tmp_path, tls, relax_limit=True, htpasswd_args=("--scheme", "bcrypt", "--cost", "5"))
    try:
        assert (tmp_path / "htpasswd").read_text().startswith(f"{USER}:$2b$05$")
        assert server.get("/reports/")[0] == 200
        assert server.get("/reports/", auth=(USER, PASSWORD + "!"))[0] == 401
    finally:
        server.stop()
