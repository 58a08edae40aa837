"""One build at a time per site and per cache: the locks a build holds from before the no-change
fast path reads the live build until its stamp is written. Standard library only."""

from __future__ import annotations

import logging
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from sitegen import locking
from sitegen.cache.stamps import lock_file as cache_lock_file
from sitegen.errors import SitegenError
from sitegen.publish.live import lock_file as site_lock_file

log = logging.getLogger("sitegen")

#: how long a build waits, unless told, for another build that holds its cache but publishes
#: another site: that build is not a duplicate of this one, so waiting is what the user wants
CACHE_WAIT = 900.0


class BuildBusy(SitegenError):
    """Another build holds the site (or the cache); the command line exits 4."""


@contextmanager
def held(out: Path, cache: Path | None, wait: float | None = None) -> Iterator[None]:
    """Hold the lock of ``out`` and, given one, of the cache folder (in that order, so two
    builds never wait for each other). ``wait``: seconds to wait for each (None: the site's
    lock is not waited for, the cache's up to :data:`CACHE_WAIT`)."""
    with ExitStack() as stack:
        _take(stack, site_lock_file(Path(out)), 0.0 if wait is None else wait, f"build of {Path(out).absolute()}", "the site")
        if cache is not None:
            _take(stack, cache_lock_file(Path(cache)), CACHE_WAIT if wait is None else wait, "build using this cache", "its cache")
        yield


def _take(stack: ExitStack, path: Path, wait: float, what: str, noun: str) -> None:
    try:
        left = locking.acquire(path, wait, what=what)
    except locking.Busy as exc:
        waited = f" after waiting {wait:g} s" if wait > 0 else ""
        raise BuildBusy(
            f"{path}: another build holds {noun}{waited}: {locking.describe(exc.holder)}; try again later or pass --wait SECONDS"
        ) from None
    stack.callback(locking.release, path)
    if left.get("pid"):
        log.warning("%s: taking over from a build that ended without releasing it (%s)", path, locking.describe(left))
