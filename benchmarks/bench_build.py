"""Build benchmarks: ``sitegen build`` of a 500-run archive (cold, unchanged, after appends), the
Rust data server loading the same archive, and peak memory of the archive vs 4 copies of it.

Run from the repo root: ``python benchmarks/bench_build.py [--quick]`` (or
``benchmarks/run_all.sh``). Results go to ``benchmarks/.cache/bench/results/build.json`` and
``docs/benchmarks.md`` is regenerated.

Archive (b): ``logs/{project}/{model}/{run}/`` with 5 projects x 10 models x 10 runs = 500 runs,
each one tensorboardX-layout file of 10 tags x 2,000 steps (20,000 records, ~1 MB), 10M records
in all (``--quick``: 50 runs). Files come from ``common.write_events``, checked byte for byte
against tensorboardX first.
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

import common as c  # noqa: E402

STEPS = 2000
APPEND_STEPS = 100
N_APPENDED_FILES = 3


def _run_files(r: int) -> tuple[list, list, list]:
    import numpy as np

    steps = np.arange(STEPS)
    values = [c.file_value(k, steps * 50 + r * 997) for k in range(len(c.ARCHIVE_TAGS))]
    walls = [c.BASE_WALL + r * 86_400 + steps * 0.5 + k * 1e-4 for k in range(len(c.ARCHIVE_TAGS))]
    return steps, values, walls


def _run_dir(archive: Path, r: int) -> Path:
    return archive / f"project{r // 100}" / f"model{(r // 10) % 10}" / f"run{r % 10:02d}"


def _write_run(job: tuple[str, int]) -> int:
    archive, r = Path(job[0]), job[1]
    d = _run_dir(archive, r)
    d.mkdir(parents=True, exist_ok=True)
    steps, values, walls = _run_files(r)
    wall0 = c.BASE_WALL + r * 86_400 - 1.0
    return c.write_events(d / c.tbx_file_name(wall0), c.ARCHIVE_TAGS, steps, values, walls, file_wall=wall0)


def make_archive(runs: int, tag: str) -> tuple[Path, dict]:
    import numpy as np
    from multiprocessing import get_context

    root = c.CACHE / tag / f"archive-{runs}"
    archive = root / "logs"
    done = root / "DONE"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        archive.mkdir(parents=True)
        check = c.verify_writer(c.ARCHIVE_TAGS, np.arange(STEPS), scratch=root / "scratch")
        print(f"tensorboardX-layout writer: byte-identical to tensorboardX on {check['records']:,} records", flush=True)
        t = time.perf_counter()
        with get_context("spawn").Pool(os.cpu_count() or 1) as pool:
            n = sum(pool.map(_write_run, [(str(archive), r) for r in range(runs)], chunksize=8))
        dt = time.perf_counter() - t
        sampled = sum(c.check_sample(next(_run_dir(archive, r).iterdir()), c.ARCHIVE_TAGS, every=997)
                      for r in (0, runs // 2, runs - 1))
        done.write_text(f"{n} {dt} {check['records']} {sampled}\n")
    n, dt, checked, sampled = done.read_text().split()
    size = sum(p.stat().st_size for p in archive.rglob("*") if p.is_file())
    return archive, {"runs": runs, "records": int(n), "bytes": size, "gen_s": float(dt), "checked": int(checked),
                     "sampled": int(sampled)}


def make_copies(archive: Path, copies: int) -> Path:
    """``copies`` copies of the archive side by side (projects renamed), same depth."""
    root = archive.parent / f"x{copies}"
    out = root / "logs"
    done = root / "DONE"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        for i in range(copies):
            for project in sorted(archive.iterdir()):
                shutil.copytree(project, out / f"{project.name}-copy{i}")
        done.write_text("ok\n")
    return out


def append_records(path: Path, first_step: int, count: int, seed: int) -> None:
    """Append ``count`` steps x 10 tags to a file in the same layout (records only, no header)."""
    import numpy as np

    steps = np.arange(first_step, first_step + count)
    values = [c.file_value(k, steps * 50 + seed) for k in range(len(c.ARCHIVE_TAGS))]
    walls = [c.BASE_WALL + seed + steps * 0.5 + k * 1e-4 for k in range(len(c.ARCHIVE_TAGS))]
    tmp = path.parent.parent / f".append-{path.parent.name}.tmp"
    c.write_events(tmp, c.ARCHIVE_TAGS, steps, values, walls, file_wall=c.BASE_WALL)
    data = tmp.read_bytes()
    tmp.unlink()
    skip = c.record_offsets_bytes(data, 2)[1]  # drop the brain.Event:2 record
    with open(path, "ab") as f:
        f.write(data[skip:])


def sitegen_build(archive: Path, out: Path, cache: Path, *, sample: bool = False) -> dict:
    """One timed build; ``sample``: also sample the tree's memory (the memory rows), which
    costs the build some of a core (see ``common.measure``)."""
    argv = [sys.executable, "-m", "sitegen", "build", str(archive), "--out", str(out), "--cache", str(cache), "--quiet"]
    r = c.measure(argv, sample=sample)
    return {"seconds": r["wall_s"], "peak_rss": r["peak_rss"], "tree_rss": r["tree_rss"]}


def _fastest(got: list[dict]) -> dict:
    out = dict(min(got, key=lambda r: r["seconds"]))
    out["runs_s"] = [round(r["seconds"], 3) for r in got]
    for k in ("peak_rss", "tree_rss"):
        if any(r.get(k) for r in got):
            out[k] = max(r.get(k) or 0 for r in got)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="50 runs instead of 500 (smoke run)")
    ap.add_argument("--runs", type=int, default=500, help="runs in archive (b) (default 500; --quick: 50)")
    ap.add_argument("--copies", type=int, default=4, help="memory scaling: build this many copies side by side")
    ap.add_argument("--mem-runs", type=int, default=0,
                    help="runs of the archive whose copies the memory test builds (default: --runs; keep it "
                         "above sitegen's 64 MB parallel threshold, i.e. >= 100 runs)")
    ap.add_argument("--repeat", type=int, default=3, help="time each build and the Rust server this many times; keep the fastest")
    ap.add_argument("--mem-only", action="store_true",
                    help="redo only the memory-scaling builds and merge them into the saved results")
    args = ap.parse_args()
    t_start = time.perf_counter()
    tag = "quick" if args.quick else "full"
    runs = 50 if args.quick else args.runs
    mem_runs = args.mem_runs or runs
    archive, info = make_archive(runs, tag)
    work = c.CACHE / tag / "build-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    res: dict = {"quick": args.quick, "machine": c.machine(), "archive": info, "rows": [],
                 "load_before": os.getloadavg()}
    c.warm(archive)

    def row(bench: str, r: dict, **extra) -> dict:
        d = {"bench": bench, "seconds": r["seconds"], "peak_rss": r.get("peak_rss"), "tree_rss": r.get("tree_rss"),
             "runs_s": r.get("runs_s"), **extra}
        res["rows"].append(d)
        print(f"{bench:34s} {c.secs(r['seconds']):>10s}  peak {c.mb(r.get('peak_rss'))} (tree {c.mb(r.get('tree_rss'))})",
              flush=True)
        return d

    saved = c.load("build-quick" if args.quick else "build") if args.mem_only else None
    if saved is not None:
        res["rows"] = [r for r in saved["rows"] if not (r.get("mem_base") or r.get("mem_big"))
                       or r["bench"] == "full build, cold cache"]
        for r in res["rows"]:
            r.pop("mem_base", None), r.pop("mem_big", None)
        res["appended"], res["rust_argv"] = saved.get("appended"), saved.get("rust_argv")
        res["load_before"] = saved.get("load_before")
        full = res["rows"][0]
        _memory(args, res, row, work, archive, runs, mem_runs, full, tag)
        return _finish(args, res, work, t_start)
    out, cache = work / "site", work / "cache"
    res["repeat"] = args.repeat

    def cold() -> dict:
        site = work / "site"
        if site.is_symlink():  # (rmtree refuses a symlink: it stayed, dangling, and the build was not cold)
            site.unlink()
        shutil.rmtree(site, ignore_errors=True)
        shutil.rmtree(work / ".site.builds", ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
        return sitegen_build(archive, out, cache)

    files = [next(_run_dir(archive, r).iterdir()) for r in (1, runs // 2, runs - 2)]
    sizes = {p: p.stat().st_size for p in files}

    def appended() -> dict:
        try:
            for i, p in enumerate(files):
                append_records(p, STEPS, APPEND_STEPS, seed=1000 + i)
            return sitegen_build(archive, out, cache)
        finally:
            for p, n in sizes.items():
                os.truncate(p, n)
            sitegen_build(archive, out, cache)  # back to the archive as it was (not timed)

    # in rounds (cold build, unchanged rebuild, appended rebuild, Rust server; repeat): this
    # machine's speed drifts over minutes, and a ratio of two figures timed minutes apart
    # compared two machines (the appended rebuilds, timed in one block of seconds, all fell in
    # one slow spell or none); each figure is the fastest of its rounds. The Rust server (1.3 GB)
    # goes last: a short build started right after it measured the machine taking its memory back.
    rounds = []
    for _ in range(max(1, args.repeat)):
        got = (cold(), sitegen_build(archive, out, cache), appended())
        rounds.append((got[0], c.rust_server_load(archive, expect_points=info["records"] - runs, sample=False),  # (minus the brain.Event:2 records)
                       got[1], got[2]))
    full_r, rust_r, same_r, grown_r = (_fastest([r[k] for r in rounds]) for k in range(4))
    full = row("full build, cold cache", full_r)
    row("rebuild, unchanged", same_r)
    res["appended"] = {"files": len(files), "records_each": APPEND_STEPS * len(c.ARCHIVE_TAGS)}
    row(f"rebuild, {len(files)} files appended", grown_r)
    for r in res["rows"]:
        r["pct_of_full"] = 100 * r["seconds"] / full["seconds"]

    row("Rust data server: load + fetch all", rust_r, load_s=rust_r["load_s"], points=rust_r["points"])
    res["rust_argv"] = rust_r["argv"]

    _memory(args, res, row, work, archive, runs, mem_runs, full, tag)
    _finish(args, res, work, t_start)


def _memory(args, res, row, work, archive, runs, mem_runs, full, tag) -> None:
    # (memory rows: sampled builds of their own; the timed builds above run unsampled)
    if mem_runs == runs:
        base = archive
    else:
        base, _ = make_archive(mem_runs, tag)
        c.warm(base)
    base_row = row(f"full build, {mem_runs}-run archive, cold cache, memory sampled",
                   sitegen_build(base, work / "site-m", work / "cache-m", sample=True))
    base_row["runs"] = mem_runs
    big = make_copies(base, args.copies)
    c.warm(big)
    big_row = row(f"full build, {args.copies}x {mem_runs}-run archive, cold cache, memory sampled",
                  sitegen_build(big, work / "site4", work / "cache4", sample=True))
    big_row["runs"] = mem_runs * args.copies
    base_row["mem_base"] = True
    big_row["mem_big"] = True
    res["copies"] = args.copies


def _finish(args, res, work, t_start) -> None:
    res["load_after"] = os.getloadavg()
    shutil.rmtree(work, ignore_errors=True)
    res["total_s"] = time.perf_counter() - t_start
    c.save("build-quick" if args.quick else "build", res)
    c.write_doc()
    print(f"done in {res['total_s']:.0f} s; wrote {c.DOC.relative_to(c.ROOT)}")


if __name__ == "__main__":
    main()
