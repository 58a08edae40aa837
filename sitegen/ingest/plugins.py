"""Readers of other formats, installed as packages: a team's in-house format registers a module
under the entry-point group ``sitegen.readers`` (see ``docs/readers.md``), and the scan and the
build use it like one of ours.

A plug-in provides ``FORMAT`` (the entry point's name), ``claims(filename) -> bool`` and
``read(source, options) -> RunData``. It is asked after every built-in reader (ours keep their
files), and whatever it raises becomes a problem line naming the file instead of stopping the
build: a third-party reader is not held to our readers' rule of never raising.
"""

from __future__ import annotations

import dataclasses
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from sitegen.errors import Problem
from sitegen.model import RUN_SCALARS_SCHEMA, ReadOptions, RunData, RunSource, empty_scalars

GROUP = "sitegen.readers"


@dataclasses.dataclass(frozen=True)
class PluginReader:
    """A plug-in reader as the scan and the build call it."""

    FORMAT: str
    module: Any
    origin: str  # "name = module (distribution version)": how problems and run keys name it

    def claims(self, filename: str) -> bool:
        try:
            return bool(self.module.claims(filename))
        except Exception:  # (a claim test that fails claims nothing)
            return False

    def read(self, source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
        """The plug-in's run, named and typed as the build expects; on an exception, an empty
        run with one problem line."""
        where = str(source.files[0] if source.files else source.directory)
        try:
            data = self.module.read(source, options)
            if not isinstance(data, RunData):
                raise TypeError(f"read() returned {type(data).__name__}, not RunData")
            scalars = data.scalars
            if not scalars.schema.equals(RUN_SCALARS_SCHEMA):
                scalars = scalars.select(RUN_SCALARS_SCHEMA.names).cast(RUN_SCALARS_SCHEMA)
        except Exception as exc:
            message = f"plug-in reader {self.origin} failed: {type(exc).__name__}: {exc}"
            return RunData(name=source.name, format=self.FORMAT, problems=[Problem(where, None, "reader-error", message)])
        return dataclasses.replace(data, name=source.name, format=self.FORMAT, scalars=scalars if len(scalars) else empty_scalars())


def origin(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{ep.name} = {ep.value}" + (f" ({dist.name} {dist.version})" if dist is not None else "")


def load(builtin: dict[str, Any]) -> tuple[dict[str, PluginReader], list[Problem]]:
    """The installed plug-in readers, by format in name order, and a problem for each one that
    cannot be used (its format taken, its module failing to import, a missing function)."""
    found: dict[str, PluginReader] = {}
    problems: list[Problem] = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: (e.name, e.value)):
        name = origin(ep)
        if ep.name in builtin or ep.name in found:
            problems.append(Problem(name, None, "plugin", f"the format {ep.name!r} is taken; this reader is not used"))
            continue
        try:
            module = ep.load()
        except Exception as exc:
            problems.append(Problem(name, None, "plugin", f"cannot load: {type(exc).__name__}: {exc}"))
            continue
        if (
            getattr(module, "FORMAT", None) != ep.name
            or not callable(getattr(module, "claims", None))
            or not callable(getattr(module, "read", None))
        ):
            problems.append(
                Problem(name, None, "plugin", f"needs FORMAT = {ep.name!r}, claims(filename) and read(source, options); not used")
            )
            continue
        found[ep.name] = PluginReader(ep.name, module, name)
    return found, problems
