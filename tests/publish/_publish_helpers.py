"""Helpers for the publishing tests: run the real CLI, find free ports, where things are."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "archive"
NGINX = Path("/usr/sbin/nginx")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def run_sitegen(*args: str | Path, env: dict | None = None, input: str | None = None, timeout: float = 120,
                **kw) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    full_env.update({"PYTHONPATH": str(REPO), **(env or {})})
    return subprocess.run([sys.executable, "-m", "sitegen", *map(str, args)], cwd=REPO, env=full_env, input=input,
                          capture_output=True, text=True, timeout=timeout, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
