"""``python -m tests.support.killer SPEC sitegen-args...``: the command line in this process,
killed (SIGKILL) just before the write SPEC names, for deterministic crash tests.

The writes counted are the calls of ``os`` functions that change files, made by
:mod:`sitegen.publish.staging` (the only module that writes into a site's builds folder; run
with ``--jobs 1`` so that every page is written in this process). SPEC ``N`` names the N-th
such call, ``NAME:N`` the N-th call of ``os.NAME``; ``0`` kills nothing. ``stop/SPEC`` stops the
process there (SIGSTOP) instead: it holds what it holds until SIGCONT (or SIGKILL). A process
that was not killed prints, last, the names of the calls it made as one JSON list."""
from __future__ import annotations

import json
import os
import signal
import sys

WRITES = frozenset({"open", "write", "link", "rename", "replace", "symlink", "unlink", "makedirs", "utime"})


class CountingOs:
    """The ``os`` module as the staging module sees it: each call of :data:`WRITES` counted
    (:attr:`calls`), and the process killed at the one ``spec`` names."""

    def __init__(self, spec: str) -> None:
        self.signal = signal.SIGKILL
        if spec.startswith("stop/"):
            self.signal, spec = signal.SIGSTOP, spec[len("stop/") :]
        name, _, n = spec.rpartition(":")
        self.name, self.n = name or None, int(n)
        self.calls: list[str] = []
        self._seen = 0

    def __getattr__(self, name: str):
        real = getattr(os, name)
        if name not in WRITES:
            return real

        def counted(*args, **kwargs):
            self.calls.append(name)
            if self.name in (None, name):
                self._seen += 1
                if self._seen == self.n:
                    os.kill(os.getpid(), self.signal)
            return real(*args, **kwargs)

        return counted


def main(argv: list[str]) -> int:
    from sitegen.cli import main as sitegen
    from sitegen.publish import staging

    counting = CountingOs(argv[0])
    staging.os = counting  # type: ignore[assignment]
    code = sitegen(argv[1:])
    print(json.dumps(counting.calls))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
