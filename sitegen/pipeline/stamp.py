"""The no-change fast path: a rebuild of an archive that did not change is answered from a stamp,
before anything heavy is imported.

A stamp hashes what the site depends on that ``stat`` can see: every folder and file below the
archive (type, size, mtime, inode, as ``make`` and ``rsync`` trust them), the config file's bytes,
the options, sitegen's code and templates, the Python and the packages that draw the pages, and
which packages are installed (a plug-in reader may be one). When
the stamp the last build left for this output is the same and the live build's folders are as
that build left them, nothing is done. Anything else takes the normal build, whose run keys decide what is redrawn.
Standard library only: the command line imports this before numpy and pyarrow. The command line
asks it while holding the site's and the cache's locks (:mod:`sitegen.pipeline.locks`), so it
never reads a live build or stamp that another build is in the middle of replacing.
"""

from __future__ import annotations

import hashlib
import json
import operator
import os
import sys
from pathlib import Path

from sitegen import __version__
from sitegen.cache import stamps
from sitegen.publish.live import Live, folders, reported, seal, whole
from sitegen.publish.staging import live_build
from sitegen.resources import file_stamp, package_stamp, stat_line, templates_dir

CODE_SUFFIXES = (".py", ".html", ".js", ".css", ".json")  # sitegen's code and templates
#: packages whose upgrade may change the pages (their package files are stamped)
PACKAGES = ("numpy", "pyarrow", "jinja2", "markupsafe", "markdown_it", "vl_convert", "altair", "tsdownsample", "google_crc32c")


def inputs(archive: Path, options: dict, config: Path | None = None) -> str | None:
    """The stamp of a build of ``archive`` with ``options`` (JSON-able: everything of the command
    line that changes the site) and the config file; None when something cannot be read (then
    the build takes the normal path)."""
    h = hashlib.sha256()
    try:
        h.update(
            json.dumps(
                [__version__, sys.version, str(Path(archive).absolute()), options, None if config is None else str(config)],
                sort_keys=True,
                default=str,
            ).encode()
        )
        if config is not None:
            h.update(Path(config).read_bytes())
        for root in (Path(__file__).resolve().parent.parent, templates_dir()):
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")  # rewritten by Python itself
                for name in sorted(filenames):
                    if name.endswith(CODE_SUFFIXES):
                        h.update(file_stamp(os.path.join(dirpath, name)))
        for name in PACKAGES:
            h.update(package_stamp(name).encode("utf-8", "surrogatepass"))
        h.update(_distributions())
        _walk(Path(archive), h)
    except (OSError, ValueError, ImportError):
        return None
    return h.hexdigest()


def _distributions() -> bytes:
    """The packages installed on the path, by their metadata folders' names (which hold their
    versions): one added, upgraded or removed, a plug-in reader among them, changes the stamp."""
    names: list[str] = []
    for folder in sys.path:
        try:
            with os.scandir(folder or ".") as entries:
                names += [e.name for e in entries if e.name.endswith((".dist-info", ".egg-info"))]
        except OSError:
            continue
    return "\n".join(sorted(names)).encode("utf-8", "surrogatepass")


_name = operator.attrgetter("name")


def _walk(archive: Path, h) -> None:
    """Every folder and file below the archive, symlinks followed once (as the scan does), depth
    first in sorted order. A file counts by its stat; a folder by its path and inode, from its
    parent's listing: what changes in it shows in its own listing and files, so only the top and
    symlinked folders are stat-ed (to follow each real folder once)."""
    top = os.fspath(archive)
    seen: set[tuple[int, int]] = set()
    todo: list[tuple[str, int | None, int]] = [(top, None, 0)]  # (path, its device or None: stat it, inode)
    while todo:
        dirpath, dev, ino = todo.pop()
        lines: list[bytes] = []
        if dev is None:
            try:
                st = os.stat(dirpath)
            except OSError as exc:
                h.update(f"{dirpath}: {exc.errno}\n".encode("utf-8", "surrogatepass"))
                continue
            dev, ino = st.st_dev, st.st_ino
            lines.append(stat_line(dirpath, st))
        else:
            lines.append(f"{dirpath}/|{ino}\n".encode("utf-8", "surrogatepass"))
        if (dev, ino) in seen:
            h.update(f"{dirpath}: again\n".encode("utf-8", "surrogatepass"))
            continue
        seen.add((dev, ino))
        try:
            with os.scandir(dirpath) as it:
                entries = list(it)
        except OSError as exc:
            h.update(b"".join(lines) + f"!{exc}\n".encode("utf-8", "surrogatepass"))
            continue
        if len(entries) > 1:
            entries.sort(key=_name)
        subdirs = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                linked = entry.is_symlink()
                subdirs.append((entry.path, None if linked else dev, 0 if linked else entry.inode()))
                continue
            path = entry.path
            try:
                lines.append(stat_line(path, os.stat(path)))
            except OSError as exc:
                lines.append(f"{path}: {exc.errno}\n".encode("utf-8", "surrogatepass"))
        h.update(b"".join(lines))
        todo.extend(reversed(subdirs))


def unchanged(out: Path, cache: Path, stamp: str | None) -> Live | None:
    """The live build, when the last build left this very stamp for it and its folders are as
    that build left them (:func:`~sitegen.publish.live.seal`: a stat a folder, not a file).
    After a restart (a power cut may have left written files empty) or where the restart cannot
    be told, every file's size is checked instead, and the build sealed again."""
    doc = stamps.get(cache, out) if stamp is not None else None
    live = live_build(Path(out))
    if not isinstance(doc, dict) or doc.get("stamp") != stamp or live is None or doc.get("build") != live.name:
        return None
    boot = _boot()
    if boot is None or doc.get("boot") != boot:
        got = whole(Path(out))
        if got is not None:
            write(out, cache, stamp, folders=folders(got.doc["files"]), runs=got.runs, files=got.files)
        return got
    try:
        names, runs, files = doc["folders"], doc["runs"], doc["files"]
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)) or seal(live, names) != doc["seal"]:
            return None
        return Live(live, {}, int(runs), int(files), reported(live))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write(out: Path, cache: Path, stamp: str | None, *, folders: list[str], runs: int, files: int) -> None:
    """Record ``stamp`` for the build ``out`` now points at (after a successful build), with its
    ``folders`` (relative), their seal, its counts of runs and files, and this boot's id."""
    live = live_build(Path(out))
    sealed = seal(live, folders) if live is not None else None
    if stamp is not None and live is not None and sealed is not None:
        doc = {"stamp": stamp, "build": live.name, "out": str(Path(out).absolute()), "runs": runs, "files": files}
        stamps.put(cache, out, {**doc, "boot": _boot(), "seal": sealed, "folders": folders})


def _boot() -> str | None:
    """This boot of the machine (Linux), None where it cannot be told."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip() or None
    except (OSError, ValueError):
        return None
