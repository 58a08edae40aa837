"""Build a many-run archive on one machine and on a Dask LocalCluster of 1, 2 and 4 workers.

    python benchmarks/bench_dask.py            # 2,000 runs (~6 min on 2 cores)
    python benchmarks/bench_dask.py --quick    # 200 runs
    python benchmarks/bench_dask.py --runs 500 --steps 2000

Every measurement is a cold build (empty decode cache, new site folder) in a fresh child
process. The cluster is started before the clock starts (its start-up time is reported on its
own), so the table shows the steady-state cost of sending the work out. The sites of every
configuration are checked to be identical (manifest "files"). Prints a Markdown table; raw
numbers go to benchmarks/.cache/bench/results/dask.json. Needs ``pip install "sitegen[dask]"``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

CACHE = HERE / ".cache" / "bench"

CONFIGS = {
    "local-1": "one process (`--jobs 1`)",
    "local-2": "local process pool, 2 workers",
    "dask-1": "Dask LocalCluster, 1 worker",
    "dask-2": "Dask LocalCluster, 2 workers",
    "dask-4": "Dask LocalCluster, 4 workers",
}


def _archive(runs: int, steps: int) -> Path:
    from tests.support.eventgen import write_archive

    root = CACHE / f"dask-archive-{runs}x{steps}"
    if not (root / ".complete").exists():
        shutil.rmtree(root, ignore_errors=True)
        write_archive(root, runs, steps=steps, tags=["train/loss", "train/acc", "eval/loss", "eval/accuracy"])
        (root / ".complete").touch()
    return root


def child(config: str, archive: Path, work: Path) -> dict:
    """One cold build (runs in a fresh process)."""
    import sitegen.pipeline.build as B
    from sitegen.config import Config
    from sitegen.pipeline.executors import Dask, LocalPool

    out, cache = work / f"site-{config}", work / f"cache-{config}"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    kind, n = config.split("-")
    n = int(n)
    executor: LocalPool | Dask
    startup = 0.0
    cluster = None
    if kind == "local":
        B.MIN_PARALLEL_BYTES = 0  # use the pool even for a small archive
        executor = LocalPool(n)
    else:
        from distributed import Client, LocalCluster

        t = time.perf_counter()
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        with Client(cluster) as c:
            c.wait_for_workers(n)
        startup = time.perf_counter() - t
        executor = Dask(cluster.scheduler_address)
    t = time.perf_counter()
    result = B.build(archive, out, B.BuildOptions(config=Config(title="bench"), cache=cache, executor=executor))
    seconds = time.perf_counter() - t
    if cluster is not None:
        cluster.close()
    files = json.loads((out / "manifest.json").read_text())["files"]
    import hashlib

    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return {"config": config, "seconds": seconds, "startup": startup, "runs": result.runs, "files": result.files, "site": digest}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 runs")
    ap.add_argument("--runs", type=int, help="runs in the archive (default 2000, --quick 200)")
    ap.add_argument("--steps", type=int, default=50, help="steps per tag per run (4 tags)")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset of " + ", ".join(CONFIGS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--archive", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.archive, args.work)))
        return 0
    import distributed  # noqa: F401  (fail early with ImportError: pip install "sitegen[dask]")

    runs = args.runs or (200 if args.quick else 2000)
    t = time.perf_counter()
    archive = _archive(runs, args.steps)
    size = sum(p.stat().st_size for p in archive.rglob("*") if p.is_file())
    print(f"archive: {runs} runs x 4 tags x {args.steps} steps, {size / 1e6:.1f} MB ({time.perf_counter() - t:.1f} s to make)", flush=True)
    work = CACHE / "dask-work"
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    rows = []
    for config in args.configs.split(","):
        r = subprocess.run([sys.executable, __file__, "--child", config, "--archive", str(archive), "--work", str(work)],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            return 1
        row = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"  {config}: {row['seconds']:.1f} s (+{row['startup']:.1f} s cluster start)", flush=True)
        shutil.rmtree(work / f"site-{config}", ignore_errors=True)
        for p in work.glob(f"site-{config}*"):
            shutil.rmtree(p, ignore_errors=True)
        shutil.rmtree(work / f"cache-{config}", ignore_errors=True)
    same = len({r["site"] for r in rows}) == 1
    base = rows[0]["seconds"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print()
    print(f"{runs} runs, {size / 1e6:.1f} MB, {os.cpu_count()} cores ({platform.machine()}), load {load:.2f}; "
          f"sites identical: {'yes' if same else 'NO'}")
    print()
    print("| configuration | build (s) | runs/s | vs one process | cluster start (s) |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {CONFIGS.get(r['config'], r['config'])} | {r['seconds']:.1f} | {runs / r['seconds']:.0f} | "
              f"{base / r['seconds']:.2f}x | {r['startup']:.1f} |" if r["startup"] else
              f"| {CONFIGS.get(r['config'], r['config'])} | {r['seconds']:.1f} | {runs / r['seconds']:.0f} | {base / r['seconds']:.2f}x | – |")
    (CACHE / "results").mkdir(parents=True, exist_ok=True)
    (CACHE / "results" / "dask.json").write_text(json.dumps(
        {"runs": runs, "steps": args.steps, "bytes": size, "cores": os.cpu_count(), "load": load, "identical": same, "rows": rows}, indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
