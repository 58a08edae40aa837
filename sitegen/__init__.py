"""sitegen: turn an archive of ML training logs into a static website.

The Python API::

    import sitegen
    sitegen.build("logs", "site", sitegen.BuildOptions(executor=sitegen.LocalPool(2)))
    table = sitegen.read_scalars("logs")   # pyarrow.Table: run, tag, step, wall_time, value
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name -> the module that defines it, imported on first use: ``import sitegen`` (and
#: the command line that answers an unchanged archive) loads neither numpy nor pyarrow
_API = {
    "build": "sitegen.pipeline.build",
    "BuildOptions": "sitegen.pipeline.build",
    "BuildResult": "sitegen.pipeline.build",
    "Serial": "sitegen.pipeline.executors",
    "LocalPool": "sitegen.pipeline.executors",
    "Dask": "sitegen.pipeline.executors",
    "Config": "sitegen.config",
    "load_config": "sitegen.config",
    "read_run": "sitegen.ingest.api",
    "read_runs": "sitegen.ingest.api",
    "read_scalars": "sitegen.ingest.api",
}
__all__ = [*_API, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'sitegen' has no attribute {name!r}")
