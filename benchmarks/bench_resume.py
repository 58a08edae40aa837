"""Superseding a resumed run's records (sitegen.prepare.resume.superseded) on millions of points:
a run that never restarted (one compare pass), one whose 20 tags restart at 40k after reaching
60k, and the same with a SessionLog START. Prints min / median / max of 9 calls in ms."""

from __future__ import annotations

import time

import numpy as np

from sitegen.prepare.resume import superseded


def timed(fn, repeats: int = 9) -> tuple[float, float, float]:
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1000)
    ts.sort()
    return ts[0], ts[len(ts) // 2], ts[-1]


def main() -> None:
    tags = 20
    clean = np.tile(np.arange(100_000, dtype=np.int64), tags)
    life = np.concatenate([np.arange(60_000), np.arange(40_000, 100_000)]).astype(np.int64)
    resumed = np.tile(life, tags)
    cases = {
        f"no restart, {len(clean):,} records": (clean, np.arange(0, len(clean) + 1, 100_000), []),
        f"restart per tag, {len(resumed):,} records": (resumed, np.arange(0, len(resumed) + 1, len(life)), []),
        f"restart per tag + START, {len(resumed):,} records": (
            resumed,
            np.arange(0, len(resumed) + 1, len(life)),
            [(len(resumed) // 2, 40_000)],
        ),
    }
    for name, (step, bounds, restarts) in cases.items():
        lo, mid, hi = timed(lambda: superseded(step, bounds, None, restarts))
        print(f"{name}: {lo:.1f} / {mid:.1f} / {hi:.1f} ms")


if __name__ == "__main__":
    main()
