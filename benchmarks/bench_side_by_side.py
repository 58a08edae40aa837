"""Two versions of sitegen built side by side, in the same minutes: this checkout and another one
(``--base``, e.g. a ``git worktree`` of an older commit). For each: a cold build of the 500-run
archive (b), an unchanged rebuild, a rebuild after appending to 3 files, and the same appended
rebuild on a 2,000-run archive of the same shape (cost should follow the change, not the
archive); the Rust data server loading the 500-run archive once per round.

Run from the repo root::

    git worktree add ../sitegen-base <commit>
    python benchmarks/bench_side_by_side.py --base ../sitegen-base --repeat 5

Results: ``benchmarks/.cache/bench/results/side-by-side.json``; ``docs/benchmarks.md`` is
regenerated with a side-by-side section.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_build as bb  # noqa: E402
import common as c  # noqa: E402


def build(code: Path, archive: Path, out: Path, cache: Path) -> float:
    """One timed ``python -m sitegen build`` with ``code`` first on the path (a fresh process)."""
    argv = [sys.executable, "-m", "sitegen", "build", str(archive), "--out", str(out), "--cache", str(cache), "--quiet"]
    return c.measure(argv, sample=False, code=code)["wall_s"]


def clean(*paths: Path) -> None:
    for p in paths:
        if p.is_symlink():
            p.unlink()
        shutil.rmtree(p, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, required=True, help="a checkout of the other version (its repo root)")
    ap.add_argument("--base-label", default="", help="how to name it in the report (default: its git commit)")
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--scale-runs", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    codes = {"this": c.ROOT, "base": args.base.resolve()}
    labels = {"this": _commit(c.ROOT), "base": args.base_label or _commit(codes["base"])}
    small, info = bb.make_archive(args.runs, "full")
    large, large_info = bb.make_archive(args.scale_runs, "full")
    work = c.CACHE / "full" / "side-work"
    clean(work)
    work.mkdir(parents=True)
    c.warm(small)
    c.warm(large)
    appended = {n: [next(bb._run_dir(a, r).iterdir()) for r in (1, n // 2, n - 2)] for n, a in ((args.runs, small), (args.scale_runs, large))}
    sizes = {p: p.stat().st_size for files in appended.values() for p in files}
    res: dict = {"machine": c.machine(), "labels": labels, "runs": args.runs, "scale_runs": args.scale_runs,
                 "repeat": args.repeat, "load_before": os.getloadavg(), "times": {}}
    times: dict[str, list[float]] = res["times"]

    def note(key: str, seconds: float) -> None:
        times.setdefault(key, []).append(seconds)
        print(f"{key:32s} {seconds:8.3f} s", flush=True)

    def grown(code: Path, n: int, archive: Path, out: Path, cache: Path) -> float:
        try:
            for i, p in enumerate(appended[n]):
                bb.append_records(p, bb.STEPS, bb.APPEND_STEPS, seed=1000 + i)
            return build(code, archive, out, cache)
        finally:
            for p in appended[n]:
                os.truncate(p, sizes[p])
            build(code, archive, out, cache)  # back to the archive as it was (not timed)

    t0 = time.perf_counter()
    for name, code in codes.items():  # the large archive's first builds (not timed)
        build(code, large, work / f"{name}-large" / "site", work / f"{name}-large" / "cache")
    for k in range(args.repeat):
        # the versions take turns going first, and the machine settles (dirty pages written,
        # memory taken back) before each version's steps: a build right after the Rust server's
        # 1.3 GB, or after the other version's writes, measured the machine as well
        for name in (("this", "base") if k % 2 == 0 else ("base", "this")):
            code = codes[name]
            settle()
            # a fresh folder each round, all removed at the end: removing a build's hundreds of
            # megabytes between rounds left the next cold build finding room among freed blocks,
            # which a nightly build on a runner (or after a few changed runs) does not meet
            site, cache = work / name / f"round{k}" / "site", work / name / f"round{k}" / "cache"
            note(f"{name}: cold build", build(code, small, site, cache))
            note(f"{name}: unchanged rebuild", build(code, small, site, cache))
            note(f"{name}: appended rebuild", grown(code, args.runs, small, site, cache))
            lg = work / f"{name}-large"
            note(f"{name}: appended rebuild, {args.scale_runs} runs",
                 grown(code, args.scale_runs, large, lg / "site", lg / "cache"))
        settle()
        note("Rust data server", c.rust_server_load(small, expect_points=info["records"] - args.runs, sample=False)["seconds"])
    res["load_after"] = os.getloadavg()
    res["total_s"] = time.perf_counter() - t0
    res["archives"] = {"small": info, "large": large_info}
    clean(work)
    c.save("side-by-side", res)
    c.write_doc()
    print(f"done in {res['total_s']:.0f} s; wrote {c.DOC.relative_to(c.ROOT)}")


def settle(seconds: float = 3.0) -> None:
    """Write dirty pages out and wait a moment before the next timed step (the same for every
    version and for the Rust server)."""
    os.sync()
    time.sleep(seconds)


def _commit(root: Path) -> str:
    import subprocess

    r = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or str(root)


if __name__ == "__main__":
    main()
