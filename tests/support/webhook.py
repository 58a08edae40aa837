"""A recording webhook: a threaded HTTP server on 127.0.0.1 for the notification tests."""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Recorder:
    """A threaded HTTP server that records each request and answers from a script of
    (status, body, delay in seconds); the last answer repeats."""

    def __init__(self, *answers: tuple[int, bytes, float]) -> None:
        self.answers = list(answers) or [(200, b"ok", 0.0)]
        self.requests: list[tuple[str, dict, bytes]] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                rec.requests.append((self.path, dict(self.headers), body))
                status, reply, delay = rec.answers[min(len(rec.requests), len(rec.answers)) - 1]
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except OSError:
                    pass  # the client gave up waiting

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/hook/SECRETTOKEN") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def __enter__(self) -> Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
