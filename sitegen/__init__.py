"""sitegen: turn an archive of ML training logs into a static website."""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["read_run", "read_runs", "read_scalars", "__version__"]


def __getattr__(name: str):
    """``read_run``, ``read_runs`` and ``read_scalars`` load on first use: the command line
    starts without numpy and pyarrow, which a rebuild that changes nothing never needs."""
    if name in ("read_run", "read_runs", "read_scalars"):
        from sitegen.ingest import api

        return getattr(api, name)
    raise AttributeError(f"module 'sitegen' has no attribute {name!r}")
