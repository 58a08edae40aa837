#!/usr/bin/env python3
"""Issue 26's floors at scale: N tiny runs built by the CLI, cold, unchanged and with 10 runs changed.

The archive is ``tests.support.eventgen.write_archive(root, N, steps=20, projects=10, models=10)``
(2 tags x 20 steps and a JSON config text per run, as in ``bench_index.py``), generated once on
disk under ``WORK/archive`` (a ``WORK/DONE`` marker holds its generation time; ``--work`` is kept and
reused). Every build is a real ``python -m sitegen build ARCHIVE --out WORK/site --cache
WORK/cache --quiet`` with ``SOURCE_DATE_EPOCH`` fixed, run from a fresh small wrapper process
(``WRAPPER``) that times it and then reads ``getrusage(RUSAGE_CHILDREN).ru_maxrss``: the largest
RSS of any process of the build, workers included (a waited-for descendant's peak rises to its
waiting parent; the wrapper is small, so its own size cannot hide in the figure). Checked against
``/usr/bin/time -v`` on a 1,000-run build (same figure within 1 %). The cold build is also sampled once a second with psutil
(``WORK/cold-rss.log``: seconds, processes, largest and summed RSS in MB; ``sampled_rss`` in the
result), which shows RSS over time and cross-checks that the rusage figure covers the workers.

Steps: cold build (site and cache emptied first); three unchanged rebuilds; three times: append
3 steps of both tags to the event files of 10 runs spread over the archive, rebuild (timed), then
truncate the files back and rebuild (untimed). The load average is taken before each step, since
the 2-core machine may be shared. Prints a ``RESULT`` JSON line and saves it to
``benchmarks/results/scale-N.json``.

Usage: python benchmarks/bench_scale.py --runs 100000 [--work /work/bench-scale/100000] [--generate-only]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, child_env

EPOCH = "1700000000"
TAGS = ("train/loss", "eval/accuracy")
# Runs the build and prints its wall time and the peak RSS of any of its processes (KiB)
WRAPPER = """import json, resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.call(sys.argv[1:])
wall = time.perf_counter() - t
print(json.dumps({"rc": rc, "wall_s": wall, "maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def generate(archive: Path, runs: int) -> tuple[float, float | None]:
    """The archive, written once; its generation time and the load average when it began (kept
    in the ``DONE`` marker: a reused archive reports when it was made, not the load now)."""
    done = archive.parent / "DONE"
    if done.exists():
        took, *at = done.read_text().split()
        return float(took), float(at[0]) if at else None
    from tests.support.eventgen import write_archive

    shutil.rmtree(archive, ignore_errors=True)
    at = load()
    t = time.perf_counter()
    write_archive(archive, runs, steps=20, projects=10, models=10)
    took = time.perf_counter() - t
    done.write_text(f"{took:.1f} {at}")
    return took, at


def build(archive: Path, work: Path, rss_log: Path | None = None) -> dict:
    """One CLI build from the wrapper: wall seconds and peak RSS (bytes) of any process.
    ``rss_log``: also sample the process tree once a second (psutil) and log its RSS over time
    there, so a build that dies or swells shows when; ``sampled_rss`` is the largest process seen."""
    argv = [sys.executable, "-m", "sitegen", "build", str(archive), "--out", str(work / "site"),
            "--cache", str(work / "cache"), "--quiet"]  # fmt: skip
    env = child_env() | {"SOURCE_DATE_EPOCH": EPOCH}
    with open(work / "build.out", "w") as out, open(work / "build.err", "w") as err:  # files: no pipe to fill
        p = subprocess.Popen([sys.executable, "-c", WRAPPER, *argv], env=env, cwd=ROOT, stdout=out, stderr=err)
        sampled = sample(p, rss_log) if rss_log else None
        p.wait()
    res = json.loads((work / "build.out").read_text().strip().splitlines()[-1])
    if res["rc"] != 0:
        raise RuntimeError(f"build failed ({res['rc']}):\n{(work / 'build.err').read_text()[-3000:]}")
    return {"wall_s": round(res["wall_s"], 2), "peak_rss": res["maxrss_kb"] * 1024, "sampled_rss": sampled}


def sample(p: subprocess.Popen, log: Path) -> int:
    """Until ``p`` exits: every second, log the seconds, the process count, the largest process's
    RSS and the tree's summed RSS (MB); return the largest single RSS seen (bytes)."""
    import psutil

    root, t0, peak = psutil.Process(p.pid), time.perf_counter(), 0
    with open(log, "w") as f:
        while p.poll() is None:
            rss = []
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                procs = []
            for q in procs:
                try:
                    rss.append(q.memory_info().rss)
                except psutil.Error:
                    pass
            if rss:
                peak = max(peak, *rss)
                f.write(f"{time.perf_counter() - t0:.0f} {len(rss)} {max(rss) / 1e6:.0f} {sum(rss) / 1e6:.0f}\n")
                f.flush()
            time.sleep(1)
    return peak


def event_files(archive: Path, runs: int) -> list[Path]:
    """The event files of 10 runs spread over the archive (as ``write_archive`` names them)."""
    picked = [i * runs // 10 for i in range(10)]
    return [next((archive / f"project{i % 10}/model{i // 10 % 10}/run{i:05d}").glob("events.out.tfevents.*")) for i in picked]


def append_steps(path: Path, steps: int = 3) -> None:
    """Append ``steps`` new steps of both tags after the last (20 steps, 0.5 s apart, from the
    start time in the file name)."""
    from tests.support.eventgen import scalar_event

    start = float(path.name.split(".")[3])
    records = [scalar_event(tag, s, start + s * 0.5, 0.5) for s in range(20, 20 + steps) for tag in TAGS]
    with open(path, "ab") as f:
        f.write(b"".join(records))


def load() -> float:
    return round(os.getloadavg()[0], 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--work", type=Path, default=None, help="work folder, kept (default /work/bench-scale/N)")
    ap.add_argument("--generate-only", action="store_true", help="only make the archive")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    work = args.work or Path(f"/work/bench-scale/{args.runs}")
    archive = work / "archive"
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {
        "runs": args.runs,
        "nproc": os.cpu_count(),
        "mem_gb": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1),
    }
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    out["sitegen"] = head
    took, out["load_generate"] = generate(archive, args.runs)
    out["generate_s"] = round(took, 1)
    print(f"archive of {args.runs} runs: generated in {out['generate_s']} s", flush=True)
    if args.generate_only:
        return
    for name in ("site", "cache"):
        shutil.rmtree(work / name, ignore_errors=True)
    for p in work.glob(".site*"):  # the kept builds and the lock beside the site
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
    out["load_cold"] = load()
    cold = build(archive, work, rss_log=work / "cold-rss.log")
    out["cold_s"], out["peak_rss"], out["sampled_rss"] = cold["wall_s"], cold["peak_rss"], cold["sampled_rss"]
    print(f"cold build: {cold['wall_s']} s, peak RSS {cold['peak_rss'] / 1e6:.0f} MB (load {out['load_cold']})", flush=True)
    out["load_unchanged"], out["unchanged_s"] = [], []
    for _ in range(3):
        out["load_unchanged"].append(load())
        out["unchanged_s"].append(build(archive, work)["wall_s"])
    print(f"unchanged rebuild: {out['unchanged_s']} s (load {out['load_unchanged']})", flush=True)
    files = event_files(archive, args.runs)
    sizes = [f.stat().st_size for f in files]
    out["load_changed"], out["changed_s"], out["changed_rss"] = [], [], []
    for _ in range(3):
        for f in files:
            append_steps(f)
        out["load_changed"].append(load())
        r = build(archive, work)
        out["changed_s"].append(r["wall_s"])
        out["changed_rss"].append(r["peak_rss"])
        for f, size in zip(files, sizes):
            os.truncate(f, size)
        build(archive, work)
    print(f"rebuild, 10 runs changed: {out['changed_s']} s (load {out['load_changed']})", flush=True)
    print("RESULT " + json.dumps(out), flush=True)
    results = ROOT / "benchmarks" / "results"
    (results / f"scale-{args.runs}.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
