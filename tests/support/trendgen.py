"""A trend page of many runs (two levels of eval/acc), each run with its own commit, written into
a built site: for the trend page test and ``benchmarks/bench_trends.py``."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from sitegen.config import Config
from sitegen.pages.assets import assets
from sitegen.pages.trends import trend_files
from sitegen.pipeline.build import BuildOptions, build
from sitegen.prepare.changes import RunState
from sitegen.prepare.trends import commit_trend, trend
from tests.support.corpus import write_metrics

STEP_AT = 600  # runs from this one on have the higher level


def many_states(n: int) -> list[RunState]:
    rng = random.Random(3)
    return [
        RunState(f"p/m/run-{i:04d}", f"run-{i:04d}", "p/m", 1.6e9 + 3600 * i, 1.6e9 + 3600 * i + 60, 10, 10, None,
                 {"eval/acc": rng.gauss(0.8 if i < STEP_AT else 0.85, 0.01)}, {"eval/acc": 0.9},
                 hashlib.sha1(b"%d" % i).hexdigest(), f"v{i}" if i % 100 == 0 else None, "main")  # fmt: skip
        for i in range(n)
    ]


def trend_site(root: Path, n: int) -> Path:
    """A site (built from one small run, for its assets) holding the trend page of ``n`` runs at
    ``trends/p-bench.../index.html``; that page's path."""
    write_metrics(root / "logs" / "p" / "m" / "r0", 0, 3, seed=0)
    build(root / "logs", root / "site", BuildOptions(config=Config(), cache=root / "cache"))
    site = (root / "site").resolve()
    states = many_states(n)
    trends = [trend("eval/acc", states)]
    files = trend_files(("p", "bench"), n, trends, Config(), assets("en", lambda name, make: make()),
                        by_commit=[commit_trend("eval/acc", states)], committed=n)  # fmt: skip
    ((rel, data),) = files.items()
    (site / rel).parent.mkdir(parents=True)
    (site / rel).write_bytes(data)
    return site / rel
