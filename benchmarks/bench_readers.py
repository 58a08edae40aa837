"""Reader benchmarks: sitegen's scalar decoder against the floor, its reference decoder,
TensorBoard's EventAccumulator, tbparse, TensorBoard's Rust data server; and downsampling.

Run from the repo root: ``python benchmarks/bench_readers.py [--quick]`` (then
``python benchmarks/bench_build.py``, or both with ``benchmarks/run_all.sh``). Results go to
``benchmarks/.cache/bench/results/readers.json`` and ``docs/benchmarks.md`` is regenerated.

Every measurement runs in a fresh child process (this script with ``--child ...``): its time is
the best of ``--repeat`` calls inside the child, its peak RSS the child's VmHWM.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common as c  # noqa: E402


# --------------------------------------------------------------------------- children


def _best(fn, repeat: int):
    import gc

    times, res = [], None
    for _ in range(repeat):
        res = None
        gc.collect()
        t = time.perf_counter()
        res = fn()
        times.append(time.perf_counter() - t)
    return min(times), times[0], res


def child(kind: str, arg: str, repeat: int) -> None:
    import os

    base_rss = c._vm(os.getpid(), "VmRSS")
    if kind == "floor":
        import google_crc32c

        path = Path(arg)

        def run():
            data = path.read_bytes()
            return google_crc32c.value(data)

        best, first, _ = _best(run, repeat)
        c.child_result(seconds=best, first_s=first, base_rss=base_rss)
    elif kind in ("fast", "fast-noverify", "reference"):
        import sitegen
        from sitegen.model import ReadOptions

        opts = {"fast": ReadOptions(), "fast-noverify": ReadOptions(verify=False),
                "reference": ReadOptions(fast=False)}[kind]
        base_rss = c._vm(os.getpid(), "VmRSS")
        if kind == "reference":
            best, first, table = _best(lambda: sitegen.read_scalars(arg, options=opts), repeat)
            floor_here = None
        else:
            # alternate the floor and the decode in this process, so a burst of load from other
            # processes hits both alike: their ratio is what the "x floor" column reports
            import google_crc32c

            files = sorted(p for p in Path(arg).iterdir() if "tfevents" in p.name)
            ft, dt, first, table = [], [], None, None
            decode_peak = None
            for _ in range(repeat):
                table = None  # the previous result must not stay alive during the next decode (peak RSS)
                t, f1, table = _best(lambda: sitegen.read_scalars(arg, options=opts), 1)
                dt.append(t)
                if first is None:  # peak RSS of one decode in a fresh process, before any floor pass
                    first, decode_peak = f1, c._vm(os.getpid(), "VmHWM")
                t, _r, _x = _best(lambda: [google_crc32c.value(p.read_bytes()) for p in files], 1)
                ft.append(t)
            best, floor_here = min(dt), min(ft)
        import pyarrow.compute as pc

        extra = {} if kind == "reference" else {"peak_rss": decode_peak}
        c.child_result(seconds=best, first_s=first, rows=table.num_rows, base_rss=base_rss, floor_here=floor_here, **extra,
                       value_sum=float(pc.sum(pc.cast(table["value"], "float64")).as_py() or 0.0),
                       step_sum=int(pc.sum(table["step"]).as_py() or 0))
    elif kind == "ea":
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        def run():
            acc = EventAccumulator(arg, size_guidance={"scalars": 0, "tensors": 0, "histograms": 0, "images": 0,
                                                       "audio": 0, "compressedHistograms": 0},
                                   purge_orphaned_data=False)
            acc.Reload()
            return sum(len(acc.Scalars(t)) for t in acc.Tags()["scalars"])

        best, first, rows = _best(run, repeat)
        c.child_result(seconds=best, first_s=first, rows=rows, base_rss=base_rss)
    elif kind == "tbparse":
        from tbparse import SummaryReader

        best, first, df = _best(lambda: SummaryReader(arg).scalars, repeat)
        c.child_result(seconds=best, first_s=first, rows=len(df), base_rss=base_rss)
    elif kind == "downsample":
        import numpy as np
        from sitegen.downsample import downsample

        n = int(arg.split(":")[0])
        rng = np.random.default_rng(0)
        step = np.arange(n, dtype=np.int64)
        wall = c.BASE_WALL + step * 0.01
        value = rng.normal(size=n)
        if not arg.endswith(":finite"):
            value[n // 3] = np.nan
        value[2 * n // 3] = 1e6  # a spike
        base_rss = c._vm(os.getpid(), "VmRSS")
        best, first, s = _best(lambda: downsample(step, wall, value, 2000), repeat)
        kept = {f: len(getattr(s, f)) for f in ("step",) if hasattr(s, f)}
        c.child_result(seconds=best, first_s=first, rows=n, base_rss=base_rss, out=repr(type(s).__name__), **kept)
    else:
        raise SystemExit(f"unknown child kind {kind}")


# --------------------------------------------------------------------------- inputs


def make_inputs(quick: bool) -> dict:
    import numpy as np

    steps_2m = 40_000 if quick else 400_000
    steps_10m = 200_000 if quick else 2_000_000
    tag = "quick" if quick else "full"
    d = c.CACHE / tag
    info: dict = {"gen": {}}

    # (a) tensorboardX, 5 tags x steps_2m
    src_dir = d / f"tbx-5x{steps_2m}"
    done = src_dir / "DONE"
    if not done.exists():
        import shutil

        shutil.rmtree(src_dir, ignore_errors=True)
        steps = np.arange(steps_2m)
        values = [c.file_value(k, steps) for k in range(5)]
        walls = [c.BASE_WALL + steps * 0.05 + k * 1e-4 for k in range(5)]
        print(f"writing {5 * steps_2m:,} records with tensorboardX (once) ...", flush=True)
        t = time.perf_counter()
        c.write_tbx(src_dir, c.FILE_TAGS, steps, values, walls)
        dt = time.perf_counter() - t
        done.write_text(f"{dt}\n")
    src = next(p for p in src_dir.iterdir() if "tfevents" in p.name)
    info["gen"]["tensorboardX_rate"] = 5 * steps_2m / float(done.read_text())
    files = {}
    n2 = 5 * steps_2m
    n1 = n2 // 2
    files["2M" if not quick else "200k"] = (src_dir, n2)
    for label, n in ([("1M", n1), ("200k-prefix", 200_000), ("50k", 50_000)] if not quick
                     else [("100k", n1), ("50k-prefix", 50_000), ("10k", 10_000)]):
        pdir = d / f"prefix-{n}"
        c.prefix_file(src, n + 1, pdir)  # + the brain.Event:2 header record
        files[label] = (pdir, n)

    # (a') the 10M file, written by the tensorboardX-layout writer, checked against tensorboardX
    big_dir = d / f"fast-5x{steps_10m}"
    done = big_dir / "DONE"
    if not done.exists():
        import shutil

        shutil.rmtree(big_dir, ignore_errors=True)
        big_dir.mkdir(parents=True)
        check = c.verify_writer(c.FILE_TAGS, np.concatenate([np.arange(0, 20_000), np.arange(steps_10m - 1000, steps_10m)]),
                                scratch=d / "scratch")
        print(f"tensorboardX-layout writer: byte-identical to tensorboardX on {check['records']:,} records", flush=True)
        steps = np.arange(steps_10m)
        values = [c.file_value(k, steps) for k in range(5)]
        walls = [c.BASE_WALL + steps * 0.05 + k * 1e-4 for k in range(5)]
        print(f"writing {5 * steps_10m:,} records with the tensorboardX-layout writer (once) ...", flush=True)
        t = time.perf_counter()
        path = big_dir / c.tbx_file_name(c.BASE_WALL)
        c.write_events(path, c.FILE_TAGS, steps, values, walls, file_wall=c.BASE_WALL)
        dt = time.perf_counter() - t
        sample = c.check_sample(path, c.FILE_TAGS)
        done.write_text(f"{dt}\n{check['records']}\n{sample}\n")
    lines = done.read_text().split()
    info["gen"]["writer_rate"] = 5 * steps_10m / float(lines[0])
    info["gen"]["writer_checked_records"] = int(lines[1])
    info["gen"]["writer_sampled_records"] = int(lines[2])
    files["10M" if not quick else "1M"] = (big_dir, 5 * steps_10m)
    return files, info


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="10x smaller inputs (smoke run)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--code", type=Path, help="measure the sitegen of this checkout (its repo root) instead of this one")
    ap.add_argument("--save-as", default="", help="results name (default readers; e.g. readers-base with --code)")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "ARG"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.repeat)
        return

    t_start = time.perf_counter()
    files, info = make_inputs(args.quick)
    q = args.quick
    main_files = ["100k", "200k"] if q else ["1M", "2M"]
    big = "1M" if q else "10M"
    prefix_ref = "50k-prefix" if q else "200k-prefix"
    small = "10k" if q else "50k"

    def file_of(label: str) -> Path:
        return next(p for p in files[label][0].iterdir() if "tfevents" in p.name)

    res: dict = {"quick": q, "machine": c.machine(), "gen": info["gen"], "files": {}, "rows": [],
                "load_before": __import__("os").getloadavg()}
    for label, (d, n) in files.items():
        res["files"][label] = {"records": n, "bytes": file_of(label).stat().st_size, "dir": str(d.relative_to(c.HERE))}
        c.warm(d)

    py = sys.executable
    me = str(Path(__file__).resolve())

    def run(kind: str, label: str, arg: str, repeat: int, n: int, note: str = "") -> dict:
        r = c.measure([py, me, "--repeat", str(repeat), "--child", kind, arg], code=args.code)
        size = res["files"][label]["bytes"] if label in res["files"] else None
        row = {"bench": kind, "input": label, "records": n, "bytes": size, "seconds": r["seconds"],
               "first_s": r.get("first_s"), "peak_rss": r["peak_rss"], "base_rss": r.get("base_rss"),
               "rows_out": r.get("rows"), "note": note, "floor_here": r.get("floor_here")}
        res["rows"].append(row)
        rate = n / r["seconds"]
        xf = f"  {r['seconds'] / r['floor_here']:.2f}x floor" if r.get("floor_here") else ""
        print(f"{kind:14s} {label:12s} {c.secs(r['seconds']):>10s}  {rate / 1e6:7.2f} M rec/s  "
              f"peak {c.mb(r['peak_rss'])}{xf}", flush=True)
        if r.get("rows") is not None and kind != "downsample" and r["rows"] != n:
            raise SystemExit(f"{kind} on {label}: {r['rows']} rows, expected {n}")
        return r

    for label in main_files + [big]:
        n = files[label][1]
        run("floor", label, str(file_of(label)), args.repeat, n, "read_bytes + google_crc32c.value")
        a = run("fast", label, str(files[label][0]), args.repeat, n, "read_scalars, all CRCs verified")
        b = run("fast-noverify", label, str(files[label][0]), args.repeat, n, "ReadOptions(verify=False)")
        if (a["value_sum"], a["step_sum"]) != (b["value_sum"], b["step_sum"]):
            raise SystemExit("verify=True and verify=False disagree")
    ref = run("reference", prefix_ref, str(files[prefix_ref][0]), 1, files[prefix_ref][1], "ReadOptions(fast=False)")
    fast_ref = run("fast", prefix_ref, str(files[prefix_ref][0]), args.repeat, files[prefix_ref][1], "same prefix, fast path")
    res["reference_matches_fast"] = (ref["value_sum"], ref["step_sum"]) == (fast_ref["value_sum"], fast_ref["step_sum"])
    run("ea", small, str(files[small][0]), 1, files[small][1], "EventAccumulator.Reload + Scalars(every tag)")
    run("tbparse", small, str(files[small][0]), 1, files[small][1], "SummaryReader(dir).scalars")
    run("fast", small, str(files[small][0]), args.repeat, files[small][1], "same file, fast path")

    for label in [small] + main_files + ([] if q else [big]):
        n = files[label][1]
        r = c.rust_server_load(files[label][0], expect_points=n)
        row = {"bench": "rust-server", "input": label, "records": n, "bytes": res["files"][label]["bytes"],
               "seconds": r["seconds"], "load_s": r["load_s"], "peak_rss": r["peak_rss"], "rows_out": r["points"],
               "note": "start -> load cycle done -> every point fetched over gRPC"}
        res["rust_argv"] = r["argv"]
        res["rows"].append(row)
        print(f"{'rust-server':14s} {label:12s} {c.secs(r['seconds']):>10s}  {n / r['seconds'] / 1e6:7.2f} M rec/s  "
              f"(load {c.secs(r['load_s'])})  peak {c.mb(r['peak_rss'])}", flush=True)

    n_ds = 1_000_000 if q else 10_000_000
    for variant, note in (("", "one NaN and one spike"), (":finite", "one spike, no NaN")):
        r = c.measure([py, me, "--repeat", "5", "--child", "downsample", f"{n_ds}{variant}"])
        res["rows"].append({"bench": "downsample", "input": f"{n_ds // 1_000_000}M points", "records": n_ds, "bytes": None,
                            "seconds": r["seconds"], "first_s": r["first_s"], "peak_rss": r["peak_rss"],
                            "base_rss": r.get("base_rss"), "rows_out": r.get("step"), "note": note})
        print(f"downsample {n_ds:,} -> 2,000 ({note}): best {c.secs(r['seconds'])}, first {c.secs(r['first_s'])}",
              flush=True)
    res["load_after"] = __import__("os").getloadavg()
    res["total_s"] = time.perf_counter() - t_start
    if args.code is not None:
        res["code"] = str(args.code)
    c.save(args.save_as or ("readers-quick" if q else "readers"), res)
    c.write_doc()
    print(f"done in {res['total_s']:.0f} s; wrote {c.DOC.relative_to(c.ROOT)}")


if __name__ == "__main__":
    main()
