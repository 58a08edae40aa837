"""Readers, one module per log format, registered in READERS.

A reader module provides:

* ``FORMAT``: its key in :data:`READERS`;
* ``claims(filename[, patterns]) -> bool``: does a file with this basename hold this format's
  logs? The scan makes a run of every directory that directly holds a claimed file; formats whose
  file names are configurable (CSV/JSONL) take the configured glob patterns;
* ``read(source: RunSource, options: ReadOptions) -> RunData``: decode one run. Damage is never
  raised: it is reported in ``RunData.problems`` and every intact record is kept.

Store-like formats whose runs are whole folder trees (MLflow's ``mlruns/``) also provide
``is_store(directory) -> bool`` and ``discover(directory, archive) -> list[RunSource]``.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType


class _Readers(Mapping):
    """Format name -> reader module, each imported when first asked for: a rebuild that takes
    the last build's scan (:mod:`sitegen.pipeline.rescan`) reads only the formats its changed runs have
    (the four readers and their value types took ~5 ms to import)."""

    def __init__(self, modules: dict[str, str]) -> None:
        self._modules = modules

    def __getitem__(self, name: str) -> ModuleType:
        if name not in self._modules:
            raise KeyError(name)
        return importlib.import_module(f"{__name__}.{self._modules[name]}")

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


#: format name -> reader module, in the order the scan asks them (first claim wins); each
#: module's ``FORMAT`` is its key here (a test holds that)
READERS: Mapping[str, ModuleType] = _Readers(
    {"tfevents": "tfevents", "visualdl": "visualdl", "mlflow": "mlflow", "tabular": "tabular"})
