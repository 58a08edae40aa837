"""An exclusive lock on a file (``flock``) that names its holder: one build at a time per site
and per cache. Standard library only (the command line takes it before the fast path).

The kernel drops an ``flock`` when its holder dies, even by SIGKILL, so a lock is never stale
for long: what a killed holder leaves is its holder line, which the next holder reports and
replaces. A holder that ends normally empties the file.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from sitegen.errors import SitegenError

POLL_SECONDS = 0.1


class Busy(SitegenError):
    """The lock is held by another process; ``holder`` says which (may be empty)."""

    def __init__(self, path: Path, holder: dict) -> None:
        self.path, self.holder = path, holder
        super().__init__(f"{path}: held by {describe(holder)}")


def describe(holder: dict) -> str:
    """``pid 123 on host ci-7 since 2026-12-04T17:50:00Z`` (or what is known of it)."""
    if not holder.get("pid"):
        return "another process (it has not said which yet)"
    return f"pid {holder['pid']} on host {holder.get('host', '?')} since {holder.get('started', '?')}"


def read_holder(path: Path) -> dict:
    """The holder line of a lock file, ``{}`` when there is none or it cannot be read."""
    try:
        doc = json.loads(Path(path).read_bytes() or b"{}")
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


@dataclass
class _Held:
    fd: int
    count: int
    taken_over: dict


_HELD: dict[str, _Held] = {}  # lock files this process holds: taken again, they are counted


def acquire(path: Path, wait: float, *, what: str) -> dict:
    """Take the lock ``path`` (made as needed), polling up to ``wait`` seconds; raises
    :class:`Busy`. Returns the holder line a killed holder left (``{}``: none). A lock this
    process already holds is counted, not taken again (``flock`` would wait for itself)."""
    key = os.path.abspath(path)
    held = _HELD.get(key)
    if held is not None:
        held.count += 1
        return held.taken_over
    _make_parents(Path(path))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + max(0.0, wait)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
            if time.monotonic() >= deadline:
                raise Busy(Path(path), read_holder(Path(path)))
            time.sleep(POLL_SECONDS)
        left = read_holder(Path(path))
        _write_holder(fd, what)
    except BaseException:
        os.close(fd)
        raise
    _HELD[key] = _Held(fd, 1, left)
    return left


def _make_parents(path: Path) -> None:
    """The folders above ``path``, each made ``rwxr-xr-x`` whatever the umask: the site's
    folder, made here first, is one the web server must pass through."""
    missing = [p for p in path.absolute().parents if not p.is_dir()]
    for folder in reversed(missing):
        try:
            folder.mkdir(0o755)
        except FileExistsError:
            continue
        os.chmod(folder, 0o755)


def release(path: Path) -> None:
    """Give back one hold of ``path``; the last one empties the file and unlocks it."""
    key = os.path.abspath(path)
    held = _HELD.get(key)
    if held is None:
        return
    held.count -= 1
    if held.count:
        return
    del _HELD[key]
    try:
        os.ftruncate(held.fd, 0)
    except OSError:
        pass
    os.close(held.fd)  # (closing the last descriptor drops the flock)


def _write_holder(fd: int, what: str) -> None:
    """Who holds the lock, for the messages of those who wait (best effort: a full disk may
    refuse even these few bytes, and the lock holds without them)."""
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    line = {"pid": os.getpid(), "host": socket.gethostname(), "started": started, "what": what}
    data = (json.dumps(line, default=str) + "\n").encode("utf-8", "surrogatepass")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:
        pass
