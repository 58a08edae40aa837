"""``sitegen serve SITE``: a local preview on 127.0.0.1 that behaves like the nginx kit.

Same security headers (on every answer, errors included), same cache rules, ``.gz`` twins served
with ``Content-Encoding: gzip`` when the client accepts gzip, no directory listings, hidden files
never served. The site path is resolved on every request, so a build published meanwhile (a
symlink swap) is picked up without a restart and one request never mixes two builds.
Not meant for production: it has no authentication; put nginx (``examples/nginx``) in front.
"""

from __future__ import annotations

import email.utils
import http.server
import logging
import mimetypes
import sys
import urllib.parse
from pathlib import Path

from sitegen.errors import UsageError

log = logging.getLogger(__name__)

# Keep in step with examples/nginx/security-headers.conf (a test compares them).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "media-src 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
CACHE_IMMUTABLE = "public, max-age=31536000, immutable"
CACHE_REVALIDATE = "no-cache"
TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".csv": "text/csv; charset=utf-8",
    ".wav": "audio/wav",
}


def cache_control(rel: str) -> str:
    """Content-hashed files (``assets/``, ``runs/*/media/``, the index's shards ``index/*.js``) forever; pages and data revalidate."""
    parts = rel.split("/")
    if (
        parts[0] == "assets"
        or (len(parts) == 4 and parts[0] == "runs" and parts[2] == "media")
        or (len(parts) == 2 and parts[0] == "index")
    ):
        return CACHE_IMMUTABLE
    return CACHE_REVALIDATE


def accepts_gzip(header: str | None) -> bool:
    for item in (header or "").split(","):
        name, _, params = item.strip().partition(";")
        if name.strip().lower() in ("gzip", "*"):
            q = params.strip().replace(" ", "")
            return not (q.startswith("q=") and q[2:] in ("0", "0.0", "0.00", "0.000"))
    return False


class SiteHandler(http.server.BaseHTTPRequestHandler):
    server_version = "sitegen"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    error_content_type = "text/plain; charset=utf-8"
    error_message_format = "%(code)d %(message)s\n"

    def end_headers(self) -> None:
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        super().end_headers()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        if not self.server.quiet:  # type: ignore[attr-defined]
            sys.stderr.write("%s - %s\n" % (self.address_string(), format % args))

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        url_path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if not url_path.startswith("/") or "\x00" in url_path or "\\" in url_path:
            self.send_error(400)
            return
        parts = [p for p in url_path.split("/") if p not in ("", ".")]
        if any(p == ".." or p.startswith(".") for p in parts):
            self.send_error(404)
            return
        root = Path(self.server.site).resolve()  # type: ignore[attr-defined]  # once per request
        target = root.joinpath(*parts)
        if target.is_dir():
            if not url_path.endswith("/"):
                self.send_response(301)
                self.send_header("Location", urllib.parse.quote(url_path) + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            target = target / "index.html"
        try:
            inside = target.resolve().is_relative_to(root)
        except OSError:
            inside = False
        if not inside or not target.is_file():
            if url_path == "/favicon.ico":  # browsers ask by themselves; like the nginx kit: no content
                self.send_response(204)
                self.end_headers()
                return
            self.send_error(404)
            return
        rel = target.relative_to(root).as_posix()
        ctype = TYPES.get(target.suffix.lower()) or mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        twin = target.with_name(target.name + ".gz")
        use_gz = target.suffix != ".gz" and twin.is_file() and accepts_gzip(self.headers.get("Accept-Encoding"))
        path = twin if use_gz else target
        try:
            data = path.read_bytes()
            mtime = target.stat().st_mtime
        except OSError:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Last-Modified", email.utils.formatdate(mtime, usegmt=True))
        self.send_header("Cache-Control", cache_control(rel))
        if twin.is_file():
            self.send_header("Vary", "Accept-Encoding")
        if use_gz:
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        if body:
            self.wfile.write(data)


class SiteServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, site: Path, port: int, *, quiet: bool = False) -> None:
        self.site, self.quiet = Path(site), quiet
        super().__init__(("127.0.0.1", port), SiteHandler)


def serve(site: Path, *, port: int = 8000, quiet: bool = False) -> None:
    """Serve ``site`` on 127.0.0.1:``port`` (0: any free port) until interrupted."""
    site = Path(site)
    if not (site / "index.html").is_file():
        raise UsageError(f"{site}: not a site (no index.html)")
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {port}")
    with SiteServer(site, port, quiet=quiet) as server:
        print(f"serving {site} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C to stop)", flush=True)
        server.serve_forever()
