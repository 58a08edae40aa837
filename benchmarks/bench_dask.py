"""Build a many-run archive with the local process pool and on a Dask LocalCluster of 1 and 2
workers, side by side, and show where the time goes.

    python benchmarks/bench_dask.py                 # 2,000 runs, 3 rounds (~10 min on 2 cores)
    python benchmarks/bench_dask.py --quick         # 200 runs
    python benchmarks/bench_dask.py --runs 500 --steps 2000 --rounds 5

Every measurement is a cold build (empty decode cache, new site folder) and then a rebuild
after one run was appended to the archive, in a fresh child process; the configurations take turns, round after round, so a noisy neighbour spreads over
all of them. The cluster is started before the clock starts (its start-up time is reported on
its own). Each build stage is timed in the process running the build (the client): wall time,
and the client's own CPU time (with a LocalCluster the scheduler shares it). The sites of every
build are checked to be identical (manifest "files"). Prints Markdown tables (median and
min–max over the rounds); raw numbers go to benchmarks/.cache/bench/results/dask.json. Needs
``pip install "sitegen[dask]"``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
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
DEFAULT_CONFIGS = "local-2,dask-1,dask-2"

#: the build's stages, as the functions of sitegen.pipeline.build that run them (in order)
STAGES = {
    "make_plan": "scan and plan",
    "reuse_runs": "reuse unchanged runs",
    "draw_runs": "per-run stage: read, draw, keep summary (workers); write pages",
    "write_run": "… of which: the client writes run pages (Dask)",
    "compare_with_live": "what's new: compare with the live build",
    "send_pages": "comparison pages: link unchanged, send the rest",
    "write_index": "index (client, while the workers draw comparison pages)",
    "draw_trends": "trend pages (client, meanwhile)",
    "write_changes": "changes, feed (client, meanwhile)",
    "take_pages": "comparison pages: wait for them, write them",
    "_take_page": "… of which: the client writes or adopts them",
    "write_report_and_manifest": "report and manifest (client)",
    "commit": "switch live",
}


def _archive(runs: int, steps: int) -> Path:
    from tests.support.eventgen import write_archive

    root = CACHE / f"dask-archive-{runs}x{steps}"
    if not (root / ".complete").exists():
        shutil.rmtree(root, ignore_errors=True)
        write_archive(root, runs, steps=steps, tags=["train/loss", "train/acc", "eval/loss", "eval/accuracy"])
        (root / ".complete").touch()
    return root


def _timed(times: dict, name: str, fn):
    """``fn`` that adds its wall and CPU time (this process) to ``times[name]``."""

    def timed(*a, **kw):
        w, c = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **kw)
        finally:
            got = times.setdefault(name, [0.0, 0.0])
            got[0] += time.perf_counter() - w
            got[1] += time.process_time() - c

    return timed


def child(config: str, archive: Path, work: Path) -> dict:
    """One cold build and a rebuild after one run was appended (in a fresh process), their
    stages timed."""
    import sitegen.pipeline.build as B
    from sitegen.config import Config
    from sitegen.pipeline.executors import Dask, LocalPool, Serial

    out, cache = work / f"site-{config}", work / f"cache-{config}"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    kind, n = config.split("-")
    n = int(n)
    executor: LocalPool | Dask | Serial
    startup = 0.0
    cluster = None
    if kind == "local":
        B.MIN_PARALLEL_BYTES = 0  # use the pool even for a small archive
        executor = LocalPool(n) if n > 1 else Serial()
    else:
        from distributed import Client, LocalCluster

        t = time.perf_counter()
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        with Client(cluster) as c:
            c.wait_for_workers(n)
        startup = time.perf_counter() - t
        executor = Dask(cluster.scheduler_address)
    times: dict[str, list[float]] = {}
    for name in STAGES:
        if name == "commit":
            B.Staging.commit = _timed(times, name, B.Staging.commit)
        else:
            setattr(B, name, _timed(times, name, getattr(B, name)))
    copy = work / "archive"  # (the same path for every configuration: the sites must be equal)
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(archive, copy)
    options = B.BuildOptions(config=Config(title="bench"), cache=cache, executor=executor)
    row: dict = {"config": config, "startup": startup}
    for build in ("cold", "rebuild"):
        if build == "rebuild":  # one run appended to the archive, as a nightly build finds it
            from tests.support.eventgen import write_run

            write_run(copy / "project0" / "model0" / "run99999", tags=["train/loss", "train/acc", "eval/loss", "eval/accuracy"],
                      steps=50, seed=99999, start=1.9e9)
        times.clear()
        cpu = time.process_time()
        t = time.perf_counter()
        result = B.build(copy, out, options)
        got = {"seconds": time.perf_counter() - t, "cpu": time.process_time() - cpu, "stages": dict(times)}
        files = json.loads((out / "manifest.json").read_text())["files"]
        got["site"] = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
        if build == "cold":
            row.update(got, runs=result.runs, files=result.files)
        else:
            row["rebuild"] = got
    if cluster is not None:
        cluster.close()
    shutil.rmtree(copy, ignore_errors=True)
    return row


def _spread(xs: list[float]) -> str:
    if len(xs) == 1:
        return f"{xs[0]:.2f}"
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"


def report(rows: list[dict], configs: list[str], runs: int, size: int, load: list[float]) -> str:
    by = {c: [r for r in rows if r["config"] == c] for c in configs}
    same = len({r["site"] for r in rows}) == 1 and len({r["rebuild"]["site"] for r in rows}) == 1
    rounds = max(len(v) for v in by.values())
    lines = [f"{runs} runs, {size / 1e6:.1f} MB, {os.cpu_count()} cores ({platform.machine()}), {rounds} rounds, "
             f"load {min(load):.1f}–{max(load):.1f}; sites identical: {'yes' if same else 'NO'}"]
    for title, pick in (("cold build", lambda r: r), ("rebuild after one run was appended", lambda r: r["rebuild"])):
        lines += ["", f"{title}:", "", "| | " + " | ".join(CONFIGS.get(c, c) for c in configs) + " |", "|---|" + "---:|" * len(configs)]
        lines.append("| **build, wall (s)** | " + " | ".join(_spread([pick(r)["seconds"] for r in by[c]]) for c in configs) + " |")
        lines.append("| build, client CPU (s) | " + " | ".join(_spread([pick(r)["cpu"] for r in by[c]]) for c in configs) + " |")
        if title == "cold build":
            lines.append("| cluster start (s, not in the build) | " + " | ".join(
                _spread([r["startup"] for r in by[c]]) if by[c][0]["startup"] else "–" for c in configs) + " |")
        for name, label in STAGES.items():
            cells = []
            for c in configs:
                got = [g for g in (pick(r)["stages"].get(name) for r in by[c]) if g is not None]
                cells.append(f"{_spread([g[0] for g in got])} / {statistics.median(g[1] for g in got):.2f}" if got else "–")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Stage cells: wall seconds, median (min–max) / the client's CPU seconds (median)."]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 runs")
    ap.add_argument("--runs", type=int, help="runs in the archive (default 2000, --quick 200)")
    ap.add_argument("--steps", type=int, default=50, help="steps per tag per run (4 tags)")
    ap.add_argument("--rounds", type=int, default=3, help="builds per configuration (they take turns)")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help="comma-separated subset of " + ", ".join(CONFIGS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--archive", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.archive, args.work)))
        return 0
    import distributed  # noqa: F401  (fail early with ImportError: pip install "sitegen[dask]")

    runs = args.runs or (200 if args.quick else 2000)
    configs = args.configs.split(",")
    t = time.perf_counter()
    archive = _archive(runs, args.steps)
    size = sum(p.stat().st_size for p in archive.rglob("*") if p.is_file())
    print(f"archive: {runs} runs x 4 tags x {args.steps} steps, {size / 1e6:.1f} MB ({time.perf_counter() - t:.1f} s to make)", flush=True)
    work = CACHE / "dask-work"
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    rows, load = [], []
    for k in range(args.rounds):
        for config in configs:
            load.append(os.getloadavg()[0])
            r = subprocess.run([sys.executable, __file__, "--child", config, "--archive", str(archive), "--work", str(work)],
                               capture_output=True, text=True, env=env)
            if r.returncode != 0:
                print(r.stderr[-3000:], file=sys.stderr)
                return 1
            row = json.loads(r.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"  round {k + 1}, {config}: {row['seconds']:.1f} s, rebuild {row['rebuild']['seconds']:.1f} s "
                  f"(+{row['startup']:.1f} s cluster start)", flush=True)
            for p in [*work.glob(f"site-{config}*"), *work.glob(f".site-{config}*"), work / f"cache-{config}"]:
                shutil.rmtree(p, ignore_errors=True)
    same = len({r["site"] for r in rows}) == 1 and len({r["rebuild"]["site"] for r in rows}) == 1
    print()
    print(report(rows, configs, runs, size, load))
    (CACHE / "results").mkdir(parents=True, exist_ok=True)
    (CACHE / "results" / "dask.json").write_text(json.dumps(
        {"runs": runs, "steps": args.steps, "bytes": size, "cores": os.cpu_count(), "load": load, "identical": same, "rows": rows},
        indent=1))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
