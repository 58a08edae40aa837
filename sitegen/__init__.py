"""sitegen: turn an archive of ML training logs into a static website."""
from __future__ import annotations

__version__ = "0.1.0"

from .api import read_run, read_runs, read_scalars  # noqa: E402

__all__ = ["read_run", "read_runs", "read_scalars", "__version__"]
