"""Where the templates and static assets are: inside the wheel, or beside the package in a checkout."""
from __future__ import annotations

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
