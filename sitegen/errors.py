"""One error base and a collector for recoverable problems.

Readers never raise for damaged input: they report a :class:`Problem` and carry on, so one
bad file or record never stops the build. Only unusable *usage* (bad config, missing archive)
raises :class:`SitegenError`; the CLI maps it to one line and exit code 2.
"""
from __future__ import annotations

import io
import logging
import os
import stat
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


class SitegenError(Exception):
    """Base of every error sitegen raises on purpose."""


class ConfigError(SitegenError):
    """The configuration file is invalid; the message lists every problem."""


class UsageError(SitegenError):
    """The command line or an argument is unusable."""


class DecodeError(SitegenError):
    """A record could not be decoded; ``path`` and ``offset`` say where."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        self.path, self.offset, self.reason = path, offset, reason
        super().__init__(f"{path}: offset {offset}: {reason}")


@dataclass(frozen=True)
class Problem:
    """A recoverable problem found while reading: where it is and what was done about it."""

    path: str
    offset: int | None
    #: "truncated", "bad-crc", "bad-length", "bad-record", "bad-value", "unreadable", "not-a-file",
    #: "symlink-loop", "bad-wall-time", "step-order", "too-large", "bad-image", ...
    kind: str
    message: str

    def __str__(self) -> str:
        where = self.path if self.offset is None else f"{self.path}: offset {self.offset}"
        return f"{where}: {self.message}"


@dataclass
class Problems:
    """Collects problems so a build can report them all and ``--strict`` can fail on them."""

    items: list[Problem] = field(default_factory=list)

    def add(self, path: str, offset: int | None, kind: str, message: str) -> None:
        problem = Problem(str(path), offset, kind, message)
        self.items.append(problem)
        log.warning("%s", problem)

    def extend(self, other: "Problems | list[Problem]") -> None:
        self.items.extend(other.items if isinstance(other, Problems) else other)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)


def _open_regular(path: "str | os.PathLike[str]") -> tuple[int, int]:
    """``(fd, size)`` of a regular file, or OSError: a FIFO, device or directory named like a log
    file is refused without blocking (``O_NONBLOCK``), and a file that vanished raises like any other."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_regular(path: "str | os.PathLike[str]") -> bytes:
    """The bytes of a regular file, or OSError (see :func:`_open_regular`)."""
    fd, _ = _open_regular(path)
    try:
        # readall() sizes its buffer from fstat: one allocation, no joined copy of a large file
        return io.FileIO(fd, "rb", closefd=False).readall()
    finally:
        os.close(fd)


def read_regular_array(path: "str | os.PathLike[str]"):
    """Like :func:`read_regular`, into a numpy uint8 array.

    Why: numpy asks for huge pages on large allocations, so filling its buffer costs a fraction
    of the page faults of a ``bytes`` of the same size (about half the read time of a 50 MB file).
    A file that grew since ``fstat`` is read to its end, like ``readall()`` does.
    """
    import numpy as np

    fd, size = _open_regular(path)
    try:
        f = io.FileIO(fd, "rb", closefd=False)
        buf = np.empty(size, np.uint8)
        view, n = memoryview(buf), 0
        while n < size:
            got = f.readinto(view[n:])
            if not got:
                return buf[:n]  # it shrank
            n += got
        rest = f.readall()
        return np.concatenate([buf, np.frombuffer(rest, np.uint8)]) if rest else buf
    finally:
        os.close(fd)


def scalar_problems(
    table, path: str, *, wall_times: bool = True, steps: bool = False, repeats: bool = True
) -> list[Problem]:
    """Per-file sanity checks of a decoded scalars table (``tag, step, wall_time, value``).

    One problem per kind and tag, never one per record: non-finite wall times ("bad-wall-time";
    the records are kept, charts by time skip them) and steps that go backwards or repeat
    ("step-order", only with ``steps=True``; the records are kept in file order: out-of-order and
    negative steps are legal, so the readers leave this check to the caller). Tags whose steps are all 0 (writers
    that log no step, e.g. MLflow's default) are not checked for order. ``wall_times=False``:
    formats where a missing wall time is legitimately NaN (CSV without a time column).
    ``repeats=False``: only steps that go backwards count (MLflow keeps several values per step
    by design).
    """
    import numpy as np

    out: list[Problem] = []
    if table.num_rows == 0:
        return out
    wall = table.column("wall_time").to_numpy(zero_copy_only=False)
    bad = ~np.isfinite(wall)
    if wall_times and bad.any():
        tags = table.column("tag").to_pylist()
        names = sorted({tags[i] for i in np.flatnonzero(bad)})
        shown = ", ".join(repr(t) for t in names[:5]) + (" ..." if len(names) > 5 else "")
        out.append(Problem(path, None, "bad-wall-time",
                           f"{int(bad.sum())} scalar records have a NaN/infinite wall time (tags {shown}); kept, not placed on time axes"))
    if not steps:
        return out
    from sitegen.model import tag_groups  # here: the data model imports this module

    step = table.column("step").to_numpy(zero_copy_only=False)
    g = tag_groups(table)
    names = g.tags
    sid, sstep = g.rank[g.order], step[g.order]
    same = sid[1:] == sid[:-1]
    back = same & ((sstep[1:] <= sstep[:-1]) if repeats else (sstep[1:] < sstep[:-1]))
    if back.any():
        for t in np.unique(sid[1:][back]).tolist():
            rows = sstep[sid == t]
            if not rows.any():
                continue  # no steps logged at all
            wrong = np.diff(rows) <= 0 if repeats else np.diff(rows) < 0
            n = int(wrong.sum())
            first = int(np.flatnonzero(wrong)[0])
            what = "not after" if repeats else "before"
            out.append(Problem(path, None, "step-order",
                               f"tag {names[t]!r}: {n} of {len(rows)} records have a step {what} the previous one "
                               f"(first: step {int(rows[first + 1])} after {int(rows[first])}); kept in file order"))
    return out
