"""One error base and a collector for recoverable problems.

Readers never raise for damaged input: they report a :class:`Problem` and carry on, so one
bad file or record never stops the build. Only unusable *usage* (bad config, missing archive)
raises :class:`SitegenError`; the CLI maps it to one line and exit code 2.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


def shown(text: str) -> str:
    """``text`` as valid Unicode: a name from the file system that is not UTF-8 (Python keeps its
    bytes as lone surrogates) shows those bytes as ``\\xNN``, so pages and JSON can hold it."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            raw = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a lone surrogate that stands for no byte (e.g. from JSON)
            raw = text.encode("utf-8", "surrogatepass")
        return raw.decode("utf-8", "backslashreplace")


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

    def __post_init__(self) -> None:
        if not (self.path.isascii() and self.message.isascii()):  # (the common case costs two checks)
            object.__setattr__(self, "path", shown(self.path))
            object.__setattr__(self, "message", shown(self.message))

    def __str__(self) -> str:
        where = self.path if self.offset is None else f"{self.path}: offset {self.offset}"
        return f"{where}: {self.message}"


def still_writing(p: Problem) -> bool:
    """A log that ends in a record not written yet (a run still being written): a notice, not
    damage; ``--strict`` passes on it and the index marks the run as running."""
    return p.kind == "truncated"


def notice(p: Problem) -> bool:
    """What normal training leaves in an archive, not damage: a run still being written, and
    steps that go back (a run resumed from a checkpoint). Listed, but ``--strict`` passes."""
    return still_writing(p) or p.kind == "step-order"


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
