"""A rebuild's scan and run keys taken from the last build's, when the archive kept its shape.

A nightly rebuild mostly finds the folders and files of the night before, a few logs grown.
The stat walk that stamps every build (:mod:`sitegen.pipeline.stamp`) has seen each folder and file by
then. When every folder and file name is the same and every file that is not a log is
unchanged (notes, configs, MLflow metadata: what the scan or a page may read), the scan would
find the very same runs: they are taken from the record the last build left. A run none of
whose files or folders changed keeps its input key too, without listing its folder and
stating its logs again (the key covers nothing else: code, config and options are in
``common``). Anything else -- a file or folder added or removed, a changed non-log file, a
folder reached through a symlink, other options, config or code -- scans as usual. On a
500-run archive this was a tenth of a rebuild after appending to three logs.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sitegen.errors import Problem
from sitegen.model import RunSource, path_in
from sitegen.pipeline.stamp import Tree, slot_name

log = logging.getLogger(__name__)

VERSION = 1
#: formats whose runs the scan finds by file names alone (an MLflow store is read to be found)
NAMED = ("tfevents", "visualdl", "tabular")


@dataclass(eq=False, repr=False)
class Record:
    """What the last build's scan found, and each run's input key by the digest of its folder."""

    sources: list[RunSource]
    problems: list[Problem]
    real: dict[Path, Path]
    keys: dict[str, tuple[str, str]]  # run folder -> (digest of everything below it, input key)
    common: str


def scan_key(archive: Path, scan_options: Any, code: str) -> str:
    """What the scan depends on besides the archive: its folder (resolved), its options (run
    globs, file patterns) and the code."""
    doc = [VERSION, os.path.realpath(archive), os.fspath(archive), scan_options, code]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode("utf-8", "surrogatepass")).hexdigest()


def _shape(tree: Tree, logs: set[str]) -> str:
    """Every folder (name, device, inode) and file name below the archive, and the stats of
    every file that is not in ``logs`` (log files are read, never their names' neighbours)."""
    memo = _digests(tree).shapes
    got = memo.get(frozenset(logs))
    if got is None:
        got = memo[frozenset(logs)] = _shape_of(tree, logs)
    return got


def _shape_of(tree: Tree, logs: set[str]) -> str:
    h = hashlib.sha256()
    for path in sorted(tree.dirs):
        dev, ino, subdirs, files = tree.dirs[path]
        parts = [f"{path}\0{dev}\0{ino}\0{len(subdirs)}", *subdirs]
        for name, mode, size, mtime, fino in files:
            full = os.path.join(path, name)
            parts.append(f"{name}\0{mode}" if full in logs else f"{name}\0{mode}\0{size}\0{mtime}\0{fino}")
        h.update("\0\0".join(parts).encode("utf-8", "surrogatepass") + b"\1")
    return h.hexdigest()


class _Digests:
    """The digest of everything below each folder (its files' stats, its sub-folders'), each
    computed once per tree (a build asks for each run's twice: to reuse its key, to record it)."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.names = sorted(tree.dirs)
        self.memo: dict[str, str | None] = {}
        self.shapes: dict[frozenset, str] = {}

    def below(self, folder: str) -> str | None:
        got = self.memo.get(folder, "")
        if got != "":
            return got
        got = self.memo[folder] = self._below(folder)
        return got

    def _below(self, folder: str) -> str | None:
        if folder not in self.tree.dirs:
            return None
        prefix = folder.rstrip("/") + "/"
        h = hashlib.sha256()
        i = bisect.bisect_left(self.names, prefix)
        for path in [folder, *self._range(prefix, i)]:
            dev, ino, subdirs, files = self.tree.dirs[path]
            h.update(json.dumps([path, dev, ino, subdirs, files]).encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def _range(self, prefix: str, i: int):
        while i < len(self.names) and self.names[i].startswith(prefix):
            yield self.names[i]
            i += 1


_MEMO: dict[int, tuple[Tree, _Digests]] = {}


def _digests(tree: Tree) -> _Digests:
    """The digests of ``tree``, made once per tree."""
    got = _MEMO.get(id(tree))
    if got is None or got[0] is not tree:
        _MEMO.clear()
        got = _MEMO[id(tree)] = (tree, _Digests(tree))
    return got[1]


def _slot(cache: Path, out: Path) -> Path:
    return Path(cache) / "stamps" / f"{slot_name(out)}.scan.json"


def load(cache: Path | None, out: Path, tree: Tree | None, key: str) -> Record | None:
    """The last build's record, when ``tree`` shows the archive in the shape that build saw
    (same ``key``); else None (scan as usual)."""
    if cache is None or tree is None or tree.linked:
        return None
    try:
        doc = json.loads(_slot(cache, out).read_bytes())
        if doc.get("key") != key or doc.get("root") != tree.root:
            return None
        logs = {x for _, f, _, files, _ in doc["sources"] if f in NAMED for x in files}
        if _shape(tree, logs) != doc["shape"]:
            return None
        # a Path per folder, shared by its runs and the folder map, and each file's made from
        # its folder's (half the cost of parsing its whole path): 2,000 paths cost a 500-run
        # rebuild 10 ms
        folders: dict[str, Path] = {}

        def folder(d: str) -> Path:
            got = folders.get(d)
            if got is None:
                got = folders[d] = Path(d)
            return got

        sources = []
        for n, f, d, files, p in doc["sources"]:
            where = folder(d)
            sources.append(RunSource(n, f, where, tuple(path_in(where, d, x) for x in files), p))
        return Record(
            sources, [Problem(*p) for p in doc["problems"]], {folder(a): folder(b) for a, b in doc["real"]},
            {d: (digest, k) for d, digest, k in doc["keys"]}, doc["common"],
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def keys_for(record: Record | None, tree: Tree | None, folders: list[str], common: str) -> list[str | None]:
    """Each run's input key from the record, when nothing below its folder changed (None: to
    be computed)."""
    if record is None or tree is None or record.common != common:
        return [None] * len(folders)
    digests = _digests(tree)
    out: list[str | None] = []
    for folder in folders:
        kept = record.keys.get(folder)
        out.append(kept[1] if kept is not None and kept[0] == digests.below(folder) else None)
    return out


def save(cache: Path | None, out: Path, tree: Tree | None, key: str, sources: list[RunSource], problems: list[Problem],
         real: dict[Path, Path], folders: list[str], keys: list[str], common: str) -> None:
    """Record this build's scan and keys for the next one (nothing without a walk, or when a
    folder was reached through a symlink: the next build scans then anyway)."""
    if cache is None or tree is None or tree.linked:
        return
    digests = _digests(tree)
    logs = {os.fspath(x) for s in sources if s.format in NAMED for x in s.files}
    doc = {
        "key": key, "root": tree.root, "shape": _shape(tree, logs), "common": common,
        "sources": [[s.name, s.format, os.fspath(s.directory), [os.fspath(x) for x in s.files], s.parent] for s in sources],
        "problems": [[p.path, p.offset, p.kind, p.message] for p in problems],
        "real": [[os.fspath(a), os.fspath(b)] for a, b in real.items()],
        "keys": [[f, digests.below(f), k] for f, k in zip(folders, keys)],
    }
    path = _slot(cache, out)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(doc), "utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        log.warning("cannot keep the scan of %s: %s", out, exc)
