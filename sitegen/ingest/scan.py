"""Find the runs of an archive: directories that directly hold log files of a known format.

Runs nest the way writers make them: a run directory inside another run directory is a
*sub-run* (tensorboardX ``add_scalars`` -> ``<run>/<main>/<key>/``, PyTorch -> ``<run>/<main>_<key>/``,
``add_hparams`` -> ``<run>/<timestamp>/``), attached to its nearest ancestor run so the site
shows it on that run's page instead of as a stray run.
"""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
import stat
from pathlib import Path
from typing import Any, Callable

from sitegen.errors import Problem, UsageError, shown
from sitegen.fileio import OutsideRoots, outside, real_roots
from sitegen.ingest import PLUGIN_PROBLEMS, READERS
from sitegen.listing import Folder, Listing, walk
from sitegen.model import RunSource

log = logging.getLogger(__name__)


def _run_name(dirpath: str, top: str) -> str:
    """The name of the run in ``dirpath``, a folder ``os.walk(top)`` gave (so it starts with ``top``)."""
    rel = dirpath[len(top) :].strip(os.sep).replace(os.sep, "/")
    return "." if rel in ("", ".") else shown(rel)  # (a folder name that is not UTF-8: its bytes as \xNN)


def _selected(name: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
    if include and not any(fnmatch.fnmatchcase(name, g) for g in include):
        return False
    return not any(fnmatch.fnmatchcase(name, g) for g in exclude)


def scan(
    archive: Path,
    *,
    include: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    patterns: dict[str, tuple[str, ...]] | None = None,
    problems: list[Problem] | None = None,
    roots: tuple[str, ...] = (),
    listing: Listing | None = None,
) -> list[RunSource]:
    """All runs below ``archive`` in sorted name order, sub-runs pointing at their parent.

    Symlinks are followed, but a directory already visited (same device and inode) is not
    entered again, so symlink loops end. ``include``/``exclude`` are globs on run names;
    excluding a run also drops its sub-runs. ``patterns`` gives file-name globs to readers whose
    files are configurable (``{"tabular": ("*.csv",)}``). A folder or log file whose real path
    lies outside ``roots`` (default: the archive) is never entered or read: one problem each.
    ``listing``: the archive's walk (:func:`sitegen.listing.walk` of ``archive``), when the
    caller has it.
    """
    patterns = patterns or {}
    archive = Path(archive)
    if not archive.is_dir():
        raise UsageError(f"{archive}: not a directory")
    problems = problems if problems is not None else []
    problems.extend(PLUGIN_PROBLEMS)  # (plug-in readers that could not be used)
    roots = roots or real_roots(archive)
    seen: set[tuple[int, int]] = set()
    found: list[RunSource] = []

    stores = [r for r in READERS.values() if hasattr(r, "is_store")]
    gatherers = [r for r in READERS.values() if hasattr(r, "gather")]
    hidden = {name for r in READERS.values() for name in getattr(r, "HIDDEN_FOLDERS", ())}
    unread = [r for r in READERS.values() if hasattr(r, "unread")]
    order = list(READERS.values())
    claimer = _Claimers(patterns)
    top = os.fspath(archive)
    if listing is None:
        listing = walk(top, roots)
    # plain strings until a run is found: the scan visits every folder of the archive, and
    # pathlib cost it more than the system calls
    todo = [top]
    while todo:
        dirpath = todo.pop()
        folder = listing.get(dirpath)
        if folder is None:
            continue
        if folder.error:
            problems.append(Problem(dirpath, None, "unreadable", f"cannot list: {os.strerror(folder.error)}"))
            continue
        try:
            if folder.link:  # followed, once checked
                _check(dirpath, roots)
        except OutsideRoots as exc:
            problems.append(exc.problem())
            continue
        if folder.key in seen:
            problems.append(Problem(dirpath, None, "symlink-loop", "directory already visited (symlink loop); skipped"))
            continue
        seen.add(folder.key)
        if not folder.listed:  # listed under a path this scan did not enter: list it here
            listing.update(walk(dirpath, roots))
            folder = listing[dirpath]
        dirnames = [d for d in folder.dirs if not d.startswith(".") or d in hidden]
        filenames = list(folder.files)
        for reader in unread:
            why = reader.unread(dirpath, filenames)
            if why:
                problems.append(Problem(dirpath, None, "unsupported", why))
        regular = _report_odd_entries(dirpath, folder, dirnames, claimer, problems, roots)
        store = next((r for r in stores if r.is_store(dirpath, dirnames, listing=listing)), None)
        if store is not None:
            found.extend(_inside(store.discover(Path(dirpath), archive), roots, problems))
            continue
        taken: set[str] = set()
        own_name = False
        remaining = filenames
        for reader in gatherers:
            got = reader.gather(dirpath, remaining, dirnames, archive, roots)
            if got is not None:
                runs, used = got
                found.extend(runs)
                taken |= used
                remaining = [f for f in filenames if f not in taken]
                here = Path(dirpath)
                own_name = own_name or any(r.directory == here and r.name == _run_name(dirpath, top) for r in runs)
        if taken:
            dirnames = [d for d in dirnames if d not in taken]
        todo.extend(os.path.join(dirpath, d) for d in reversed(dirnames))
        if not regular or own_name:
            continue  # a gathered run named after this folder: other logs here are its artifacts
        # the first reader in registry order that claims a file left here reads the folder
        left: dict[str, int] = {}
        for f, i in regular.items():
            j = None if f in taken else _plain_claimer(order, i, f, patterns)
            if j is not None:
                left[f] = j
        if left:
            reader = order[min(left.values())]
            files = sorted(f for f, i in left.items() if order[i] is reader or _claims(reader, f, patterns))
            directory = Path(dirpath)
            found.append(RunSource(_run_name(dirpath, top), reader.FORMAT, directory, tuple(directory / f for f in files)))
    return _attach_sub_runs(sorted(found, key=lambda s: s.name), include, exclude)


def _check(path: str, roots: tuple[str, ...]) -> None:
    real = os.path.realpath(path)
    if outside(real, roots):
        raise OutsideRoots(path, real)


def _inside(sources: list[RunSource], roots: tuple[str, ...], problems: list[Problem]) -> list[RunSource]:
    """The runs a store found whose folders lie inside ``roots`` (a store may follow links
    below its own folder; the files of a run are checked as its reader opens them)."""
    out = []
    for s in sources:
        try:
            _check(str(s.directory), roots)
        except OutsideRoots as exc:
            problems.append(exc.problem())
            continue
        out.append(s)
    return out


def _claims(reader: Any, name: str, patterns: dict[str, tuple[str, ...]]) -> bool:
    return _claim_test(reader, patterns.get(reader.FORMAT))(name)


def _plain_claimer(order: list, first: int, name: str, patterns: dict[str, tuple[str, ...]]) -> int | None:
    """The position of the first reader from ``first`` on that claims ``name`` and reads a
    folder's files itself (a gatherer has had its say)."""
    for i in range(first, len(order)):
        r = order[i]
        if not hasattr(r, "gather") and (i == first or _claims(r, name, patterns)):
            return i
    return None


def _claim_test(reader: Any, patterns: tuple[str, ...] | None) -> Callable[[str], bool]:
    """``reader.claims`` of a name, with the configured patterns when its files take them."""
    if patterns is None:
        return reader.claims
    return lambda name: reader.claims(name, patterns)


class _Claimers(dict):
    """The registry position of the first reader that claims a file of a name (None: none),
    asked once per name: folder names repeat across an archive (``run00`` in every model)."""

    def __init__(self, patterns: dict[str, tuple[str, ...]]) -> None:
        super().__init__()
        # each reader's test with its patterns bound: names that miss (a log file's name holds
        # its time and host, a run folder's its number) are asked of every reader
        self.tests = [_claim_test(r, patterns.get(r.FORMAT)) for r in READERS.values()]

    def __missing__(self, name: str) -> int | None:
        got = self[name] = next((i for i, test in enumerate(self.tests) if test(name)), None)
        return got


def _report_odd_entries(
    directory: str,
    folder: Folder,
    dirnames: list[str],
    claimer: _Claimers,
    problems: list[Problem],
    roots: tuple[str, ...],
) -> dict[str, int]:
    """Entries named like log files that are not regular files (a directory, FIFO, socket or
    device; a dangling symlink or a symlink loop) are skipped with a problem, never opened:
    opening a FIFO would block the build. So is a symlink that leads outside ``roots``. Returns
    the claimed names that are regular files, with the position of their first claimer (from
    the listing's stats; hidden ones included, but never reported)."""
    regular: dict[str, int] = {}
    for name in [*folder.files, *dirnames]:
        first = claimer[name]
        if first is None:
            continue
        path = os.path.join(directory, name)
        st = folder.files.get(name)
        link = name in folder.links
        if isinstance(st, int):
            if name.startswith("."):
                continue
            if link:
                kind, what = ("symlink-loop", "symlink loop") if st == errno.ELOOP else ("unreadable", "dangling symlink")
            else:
                kind, what = "unreadable", f"cannot stat: {os.strerror(st)}"
            problems.append(Problem(path, None, kind, f"named like a log file but {what}; skipped"))
            continue
        try:
            if link:
                _check(path, roots)
        except OutsideRoots as exc:
            if not name.startswith("."):
                problems.append(exc.problem())
            continue
        if st is not None and stat.S_ISREG(st.mode):
            regular[name] = first
        elif not name.startswith("."):
            what = "a directory" if st is None else "a FIFO" if stat.S_ISFIFO(st.mode) else "not a regular file"
            problems.append(Problem(path, None, "not-a-file", f"named like a log file but {what}; skipped"))
    return regular


def _attach_sub_runs(runs: list[RunSource], include: tuple[str, ...], exclude: tuple[str, ...]) -> list[RunSource]:
    names = {r.name for r in runs if r.format != "mlflow"}
    out: list[RunSource] = []
    for run in runs:
        parent = None
        if run.format != "mlflow" and run.name != ".":
            for key in _ancestors(run.name):
                if key in names:
                    parent = key
                    break
        if not _selected(_family_root(run.name, names), include, exclude):
            continue
        out.append(RunSource(run.name, run.format, run.directory, run.files, parent))
    return out


def _family_root(name: str, names: set[str]) -> str:
    """The outermost run that contains ``name`` (itself when it is not a sub-run)."""
    root = name
    for ancestor in _ancestors(name):
        if ancestor in names:
            root = ancestor
    return root


def _ancestors(name: str) -> list[str]:
    """``PurePosixPath(name).parents`` as strings, nearest first ("a/b/c" -> "a/b", "a", ".")."""
    out = []
    while "/" in name:
        name = name.rsplit("/", 1)[0]
        out.append(name)
    return out + ["."]
