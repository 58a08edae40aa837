"""Readers, one module per log format, registered in READERS.

A reader module provides:

* ``FORMAT``: its key in :data:`READERS`;
* ``claims(filename[, patterns]) -> bool``: does a file with this basename hold this format's
  logs? The scan makes a run of every directory that directly holds a claimed file; formats whose
  file names are configurable (CSV/JSONL) take the configured glob patterns;
* ``read(source: RunSource, options: ReadOptions) -> RunData``: decode one run. Damage is never
  raised: it is reported in ``RunData.problems`` and every intact record is kept.

Formats whose runs are told by a folder's listing or a file's first line (a Hugging Face output
folder and its ``checkpoint-*/``, a Lightning ``version_N/``, a Keras CSV file, a ``dvclive/``
folder) provide ``gather(dirpath, filenames, dirnames, archive) -> (runs, names) | None``: the
runs found in that folder and the file and folder names they take (never claimed by another
reader, never descended into). Their ``claims`` only names files the scan checks are regular.

Formats whose writers hide their folder (``.cometml-runs``, ``.neptune``) name it in
``HIDDEN_FOLDERS``: the scan enters those dot-folders (it skips every other one). A reader that
recognises logs it does not read provides ``unread(dirpath, filenames) -> str | None``: the
scan reports the folder once (kind ``unsupported``) instead of passing over it in silence.

Store-like formats whose runs are whole folder trees (MLflow's ``mlruns/``) also provide
``is_store(directory) -> bool`` and ``discover(directory, archive) -> list[RunSource]``.

Installed plug-in readers (:mod:`sitegen.ingest.plugins`, entry points ``sitegen.readers``) come
after ours; :data:`PLUGIN_PROBLEMS` holds a line for each one that could not be used.
"""

from __future__ import annotations

from typing import Any

from sitegen.errors import Problem
from sitegen.ingest import (
    clearml,
    comet,
    dvclive,
    hftrainer,
    keras,
    lightning,
    mlflow,
    neptune,
    plugins,
    tabular,
    tfevents,
    visualdl,
    wandb,
)

#: format name -> reader module (or plug-in reader), in the order the scan asks them (first
#: claim wins); each one's ``FORMAT`` is its key here (a test holds that)
READERS: dict[str, Any] = {
    "tfevents": tfevents,
    "visualdl": visualdl,
    "mlflow": mlflow,
    "hftrainer": hftrainer,
    "lightning": lightning,
    "keras": keras,
    "dvclive": dvclive,
    "wandb": wandb,
    "comet": comet,
    "clearml": clearml,
    "neptune": neptune,
    "tabular": tabular,
}
_plugins, _problems = plugins.load(READERS)
READERS.update(_plugins)
#: a line for each installed plug-in reader that could not be used (the scan reports them)
PLUGIN_PROBLEMS: list[Problem] = _problems
#: format -> the plug-in reader of it ("name = module (distribution version)"): the run keys of
#: its runs count it, so upgrading it draws their pages again
PLUGIN_ORIGINS: dict[str, str] = {f: r.origin for f, r in _plugins.items()}
