"""The real command line in a child process, free ports, the system's nginx."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT

NGINX = Path("/usr/sbin/nginx")


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child that imports sitegen from this checkout, without
    ``SOURCE_DATE_EPOCH`` (a test that wants one passes it)."""
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def run_sitegen(*args: str | Path, env: dict | None = None, input: str | None = None, timeout: float = 120,
                **kw) -> subprocess.CompletedProcess:
    """``python -m sitegen ARGS`` in a child process, output captured as text."""
    cwd = kw.pop("cwd", ROOT)
    return subprocess.run([sys.executable, "-m", "sitegen", *map(str, args)], cwd=cwd, env=child_env(**(env or {})),
                          input=input, capture_output=True, text=True, timeout=timeout, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
