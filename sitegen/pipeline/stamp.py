"""A rebuild of an archive that did not change, answered before anything heavy is imported.

Every build leaves a stamp in the cache folder (``stamps/``, one per output path): a hash of what the
site depends on that ``stat`` can see — every folder and file below the archive (type, size,
mtime, inode), the config file's bytes, the options, sitegen's code and templates, the Python
and the packages that draw the pages — and the build it made. When the next build finds the same
stamp, the same live build, and that build still whole, it is done: no scan, no run keys, no
numpy or pyarrow (half of what a rebuild that changes nothing cost). Anything the stamp cannot
vouch for (a changed file, a package upgrade, a missing stamp) takes the normal path, which
compares the run keys and, when they match, keeps the live build all the same.

Standard library only: this module is imported before the rest of sitegen.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sitegen import __version__
from sitegen.errors import Problem, SitegenError
from sitegen.publish.staging import checked_relpath, live_build

MANIFEST = "manifest.json"
CODE_SUFFIXES = (".py", ".html", ".js", ".css", ".json")  # sitegen's code and templates
#: packages whose upgrade may change the pages (their package files are stamped)
PACKAGES = ("numpy", "pyarrow", "jinja2", "markupsafe", "markdown_it", "vl_convert", "altair", "tsdownsample",
            "google_crc32c")


@dataclass(eq=False, repr=False)
class Live:
    """The live build, whole: how many runs and files it has and the problems it reported."""

    folder: Path
    doc: dict
    runs: int
    files: int
    problems: list[Problem]


@dataclass(eq=False, repr=False)
class Tree:
    """What the stamp's walk saw below the archive, folder by folder: ``{folder: (device, inode,
    sub-folder names, [(file name, mode, size, mtime_ns, inode), ...])}`` (a file that cannot
    be stat'ed has -1 for all four), and whether a folder was reached through a symlink or twice
    (then nothing is inferred from it: see :mod:`sitegen.pipeline.rescan`)."""

    root: str = ""
    dirs: dict[str, tuple[int, int, list[str], list[tuple[str, int, int, int, int]]]] = field(default_factory=dict)
    linked: bool = False


def inputs(archive: Path, options: dict, config: Path | None = None, tree: Tree | None = None) -> tuple[str | None, int]:
    """The stamp of a build of ``archive`` with ``options`` (JSON-able: everything of the command
    line that changes the site) and the config file, None when something cannot be read (then
    the build takes the normal path); and the bytes of every file below the archive, seen on the
    way (the command line starts worker processes early for a large archive). ``tree``: filled
    with what the walk saw."""
    h = hashlib.sha256()
    size = 0
    try:
        h.update(json.dumps([__version__, sys.version, str(Path(archive).absolute()), options,
                             None if config is None else str(config)], sort_keys=True, default=str).encode())
        if config is not None:
            h.update(Path(config).read_bytes())
        here = Path(__file__).resolve().parent.parent
        from sitegen.resources import templates_dir

        for root in (here, templates_dir()):
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")  # rewritten by Python itself
                for name in sorted(filenames):
                    if name.endswith(CODE_SUFFIXES):
                        h.update(_entry(os.path.join(dirpath, name)))
        for name in PACKAGES:
            h.update(package_stamp(name).encode("utf-8", "surrogatepass"))
        size = _walk(Path(archive), h, tree)
    except (OSError, ValueError, ImportError):
        return None, size
    return h.hexdigest(), size


def package_stamp(name: str) -> str:
    """Which version of a package is installed, without importing it: its package file's
    path, type, size, time and inode (an upgrade rewrites it)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return f"{name}: none\n"
    return _entry(spec.origin).decode("utf-8", "surrogatepass")


def _entry(path: str) -> bytes:
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path}: {exc.errno}\n".encode("utf-8", "surrogatepass")
    return _line(path, st)


def _line(path: str, st: os.stat_result) -> bytes:
    return f"{path}|{st.st_mode}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}\n".encode("utf-8", "surrogatepass")


def _walk(archive: Path, h, tree: Tree | None = None) -> int:
    """Every folder and file below the archive, symlinks followed once (as the scan does);
    returns the files' total size. ``tree``: filled with what was seen.

    Depth first, each folder's entries in sorted order (as ``os.walk`` with sorted names would
    go): one ``scandir`` per folder and one ``stat`` per entry. ``os.walk`` also cost a
    generator frame per folder, and telling a symlinked folder cost another ``lstat``; the
    folder's entry in its parent tells that for free."""
    seen: set[tuple[int, int]] = set()
    size = 0
    root = os.fspath(archive)
    if tree is not None:
        tree.root = root
    todo = [(root, os.path.islink(root))]
    while todo:
        dirpath, linked = todo.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            h.update(f"!{exc}\n".encode())
            continue
        try:
            st = os.stat(dirpath)
        except OSError as exc:
            h.update(f"{dirpath}: {exc.errno}\n".encode("utf-8", "surrogatepass"))
            if tree is not None:
                tree.linked = True  # (not a folder the scan can be inferred for)
            continue
        if (st.st_dev, st.st_ino) in seen:
            if tree is not None:
                tree.linked = True
            continue
        seen.add((st.st_dev, st.st_ino))
        h.update(_line(dirpath, st))
        dirnames, subdirs, files = [], [], []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                dirnames.append(entry.name)
                subdirs.append((entry.path, entry.is_symlink()))
                continue
            path = entry.path
            try:
                fst = os.stat(path)
            except OSError as exc:
                h.update(f"{path}: {exc.errno}\n".encode("utf-8", "surrogatepass"))
                files.append((entry.name, -1, -1, -1, -1))
                continue
            h.update(_line(path, fst))
            size += fst.st_size
            files.append((entry.name, fst.st_mode, fst.st_size, fst.st_mtime_ns, fst.st_ino))
        if tree is not None:
            tree.dirs[dirpath] = (st.st_dev, st.st_ino, dirnames, files)
            if linked:
                tree.linked = True
        todo.extend(reversed(subdirs))
    return size


def whole(out: Path, site_key: str | None = None) -> Live | None:
    """The live build behind ``out`` when every file of its manifest is there with its size
    (and, given ``site_key``, when its manifest says it was made from those inputs)."""
    live = live_build(out)
    if live is None:
        return None
    try:
        doc = read_manifest(live)
        if site_key is not None and doc.get("site") != site_key:
            return None
        base = str(live) + "/"
        for rel, entry in doc["files"].items():
            if os.stat(base + checked_relpath(rel)).st_size != entry["size"]:
                return None
        items = json.loads((live / "build-report.json").read_text("utf-8"))["items"]
        problems = [Problem(i["path"], i["offset"], i["kind"], i["message"]) for i in items]
        runs = sum(1 for k in doc.get("runs", {}) if not k.startswith("compare/"))
        files = len(doc["files"]) + sum((live / n).exists() for n in (MANIFEST, MANIFEST + ".gz"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, SitegenError):
        return None
    return Live(live, doc, runs, files, problems)


def read_manifest(build: Path) -> dict:
    """A build's manifest as parsed JSON, parsed once per process while the file stays the same
    (a rebuild asks it several questions: is the live build whole, which runs and files does
    it have). Raises OSError/ValueError."""
    path = os.path.join(build, MANIFEST)
    st = os.stat(path)
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    doc = _LIVE.get(key)
    if doc is None:
        _LIVE.clear()
        with open(path, "rb") as f:
            doc = _LIVE[key] = json.loads(f.read())
    return doc


_LIVE: dict[tuple, dict] = {}


def slot_name(out: Path) -> str:
    """The name of what the cache keeps for the site at ``out`` (its stamp, its scan record, its
    packed run summaries)."""
    return hashlib.sha256(str(Path(out).absolute()).encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _slot(cache: Path, out: Path) -> Path:
    return Path(cache) / "stamps" / f"{slot_name(out)}.json"


def unchanged(out: Path, cache: Path, stamp: str | None) -> Live | None:
    """The live build, when the last build left this very stamp for it and it is still whole."""
    if stamp is None:
        return None
    try:
        doc = json.loads(_slot(cache, out).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    live = live_build(Path(out))
    if not isinstance(doc, dict) or doc.get("stamp") != stamp or live is None or doc.get("build") != live.name:
        return None
    return whole(Path(out))


def write(out: Path, cache: Path, stamp: str | None) -> None:
    """Record ``stamp`` for the build ``out`` now points at (after a successful build)."""
    live = live_build(Path(out))
    if stamp is None or live is None:
        return
    path = _slot(cache, out)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"stamp": stamp, "build": live.name, "out": str(Path(out).absolute())}), "utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
