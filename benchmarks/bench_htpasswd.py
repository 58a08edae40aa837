"""What a password hash costs nginx per request: a real nginx with ``auth_basic`` serving one
small file, the password file written by ``sitegen htpasswd`` (apr1, bcrypt at several costs),
many requests on one kept-alive connection, the median time each (and with no auth at all).

Run from the repo root: ``python benchmarks/bench_htpasswd.py [--requests N]``; prints a
Markdown table (docs/publishing.md quotes it). Needs /usr/sbin/nginx and the bcrypt package.
"""
from __future__ import annotations

import argparse
import base64
import http.client
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMES = [("none", None), ("apr1", ["--scheme", "apr1"])] + [
    (f"bcrypt cost {c}", ["--scheme", "bcrypt", "--cost", str(c)]) for c in (5, 8, 10, 12)
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(prefix: Path, htpasswd: Path | None, port: int) -> subprocess.Popen:
    (prefix / "www").mkdir(exist_ok=True)
    (prefix / "www" / "index.html").write_text("ok\n")
    auth = f'auth_basic "x"; auth_basic_user_file {htpasswd};' if htpasswd else ""
    temps = " ".join(f"{k}_temp_path {prefix}/t-{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (prefix / "nginx.conf").write_text(
        ("user root;\n" if os.geteuid() == 0 else "")
        + f"daemon off; worker_processes 1; pid {prefix}/nginx.pid; error_log {prefix}/error.log;\n"
        f"events {{ worker_connections 16; }}\nhttp {{ access_log off; {temps} keepalive_requests 100000;\n"
        f"server {{ listen 127.0.0.1:{port}; root {prefix}/www; {auth} }} }}\n"
    )
    proc = subprocess.Popen(["/usr/sbin/nginx", "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", str(prefix / "error.log")])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nginx did not start")


def measure(port: int, n: int, header: dict) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        conn.request("GET", "/index.html", headers=header)
        resp = conn.getresponse()
        resp.read()
        times.append(time.perf_counter() - t)
        assert resp.status == 200, resp.status
    conn.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200)
    args = ap.parse_args()
    password = "correct horse battery staple"
    header = {"Authorization": "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"| password file | median ms / request | p90 ms | requests/s on one core |\n|---|---|---|---|")
    for name, flags in SCHEMES:
        with tempfile.TemporaryDirectory() as tmp:
            prefix = Path(tmp)
            htpasswd = None
            if flags is not None:
                line = subprocess.run([sys.executable, "-m", "sitegen", "htpasswd", "alice", "--password-stdin", *flags],
                                      input=password + "\n", capture_output=True, text=True, check=True, env=env).stdout
                htpasswd = prefix / "htpasswd"
                htpasswd.write_text(line)
            port = free_port()
            proc = start(prefix, htpasswd, port)
            try:
                n = args.requests if "bcrypt cost 1" not in name else max(20, args.requests // 10)
                measure(port, 5, header)  # warm up
                times = sorted(measure(port, n, header))
            finally:
                proc.send_signal(signal.SIGQUIT)
                proc.wait()
            med, p90 = statistics.median(times) * 1e3, times[int(len(times) * 0.9)] * 1e3
            print(f"| {name} | {med:.2f} | {p90:.2f} | {1000 / med:.0f} |")


if __name__ == "__main__":
    main()
