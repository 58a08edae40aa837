"""One walk of an archive, shared by the scan and the run keys.

A build lists every folder of the archive and stats every file in it: the scan to find the runs,
the run keys to see what changed. Both read this listing instead of walking the tree themselves,
so each folder is listed and each file stat-ed once. Standard library only.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import NamedTuple

from sitegen.fileio import outside


class Stat(NamedTuple):
    """What a build reads of a file's ``os.stat`` (symlinks followed)."""

    mode: int
    size: int
    mtime_ns: int
    ino: int
    ctime_ns: int


@dataclass(slots=True)
class Folder:
    """A folder as its path reached it: whether the path is a symlink, and, when it was listed,
    its sub-folders and its other entries (a file's stat or the errno of the stat) in name
    order. ``error``: the errno of a stat or listing that failed."""

    key: tuple[int, int]  # (device, inode): the same folder reached by another path
    link: bool = False
    listed: bool = False
    error: int = 0
    dirs: list[str] = field(default_factory=list)
    files: dict[str, Stat | int] = field(default_factory=dict)
    links: frozenset[str] = frozenset()  # the names of entries that are symlinks


Listing = dict[str, Folder]  # by path, as the walk joined it to the top


def stat_of(path: str) -> Stat | int:
    """``os.stat`` of ``path`` as a :class:`Stat`, or the errno that stopped it."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return exc.errno or -1
    return Stat(st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def walk(top: str, roots: tuple[str, ...] = (), *, follow: bool = True) -> Listing:
    """Every folder below ``top``, depth first in name order. Symlinked folders are entered when
    ``follow`` is set and their real path lies inside ``roots`` (when given). A folder is listed
    under the first path that reaches it; another path to it (a symlink loop, a second link, a
    bind mount) is recorded with ``listed`` False, so links cannot make the walk longer than
    the tree. A user that skipped the first path lists the folder again with ``walk(path)``."""
    out: Listing = {}
    done: set[tuple[int, int]] = set()
    try:
        st = os.stat(top)
        link = os.path.islink(top)
    except OSError as exc:
        out[top] = Folder((0, 0), error=exc.errno or -1)
        return out
    todo: list[tuple[str, os.stat_result, bool]] = [(top, st, link)]
    while todo:
        path, st, link = todo.pop()
        key = (st.st_dev, st.st_ino)
        folder = out[path] = Folder(key, link)
        if key in done or (link and roots and outside(os.path.realpath(path), roots)):
            continue
        done.add(key)
        folder.listed = True
        subs: list[tuple[str, os.stat_result, bool]] = []
        links = []
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            folder.error = exc.errno or -1
            continue
        for entry in entries:
            is_link = entry.is_symlink()
            if is_link:
                links.append(entry.name)
            try:
                est = entry.stat()
            except OSError as exc:
                code = exc.errno or -1
                if not is_link and entry.is_dir():  # (its type from the listing: a path too long to stat)
                    folder.dirs.append(entry.name)
                    out[entry.path] = Folder((0, 0), listed=True, error=code)
                else:  # (a dangling link, a link loop)
                    folder.files[entry.name] = code
                continue
            if stat.S_ISDIR(est.st_mode):
                folder.dirs.append(entry.name)
                if follow or not is_link:
                    subs.append((entry.path, est, is_link))
                continue
            folder.files[entry.name] = Stat(est.st_mode, est.st_size, est.st_mtime_ns, est.st_ino, est.st_ctime_ns)
        if links:
            folder.links = frozenset(links)
        todo.extend(reversed(subs))
    return out
