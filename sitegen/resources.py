"""Where the templates and static assets are: inside the wheel, or beside the package in a checkout."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def templates_dir() -> Path:
    for candidate in (_HERE / "templates", _HERE.parent / "templates"):
        if (candidate / "base.html").is_file():
            return candidate
    raise FileNotFoundError("sitegen's templates folder is missing from this installation")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/sitegen`` or ``~/.cache/sitegen``: persist it between CI runs."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sitegen"


def package_stamp(name: str) -> str:
    """Which version of a package is installed, without importing it: its package file's
    path, type, size, time and inode (an upgrade rewrites it)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return f"{name}: none\n"
    return file_stamp(spec.origin).decode("utf-8", "surrogatepass")


def file_stamp(path: str) -> bytes:
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path}: {exc.errno}\n".encode("utf-8", "surrogatepass")
    return stat_line(path, st)


def stat_line(path: str, st: os.stat_result) -> bytes:
    return f"{path}|{st.st_mode}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{st.st_ctime_ns}\n".encode("utf-8", "surrogatepass")
