"""Benchmark: sitegen's VisualDL decoder against ``visualdl.LogReader``.

Run: ``python benchmarks/bench_visualdl.py [--tags 5] [--steps 100000] [--ref-records 100000]``
Timings are best-of-N wall times (the machine is shared; run it when it is quiet).

The log is written once with the real ``visualdl.LogWriter`` (about 50 us per record, ~30 s for
500,000 records) and cached under ``benchmarks/.cache/``. LogReader is timed on a prefix of the
file (``--ref-records`` records, cut at a record boundary) because it takes ~6 us per record;
rates are compared per record. Both readers decode every scalar: LogReader gives Value protos
(we touch id/timestamp/value of each), ours gives the Arrow table.
"""
from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from sitegen.ingest.visualdl import fast as _vdlfast  # noqa: E402
from sitegen.ingest import visualdl


def make_log(tags: int, steps: int) -> Path:
    cache = HERE / ".cache" / f"visualdl-{tags}x{steps}"
    done = cache / "DONE"
    if done.exists():
        return next(cache.glob("vdlrecords*"))
    from visualdl import LogWriter

    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    t = time.perf_counter()
    with LogWriter(logdir=str(cache), display_name="bench") as w:
        for step in range(steps):
            for k in range(tags):
                w.add_scalar(f"train/metric_{k}", (step % 997) * 0.001 + k, step)
    done.write_text("ok")
    print(f"wrote the log with LogWriter in {time.perf_counter() - t:.1f} s")
    return next(cache.glob("vdlrecords*"))


def prefix(path: Path, records: int, out: Path) -> int:
    """Copy the first ``records`` records of ``path`` to ``out``; return how many were copied."""
    data = path.read_bytes()
    off = n = 0
    while n < records and off + 8 <= len(data):
        (size,) = struct.unpack_from("<Q", data, off)
        off += 8 + size
        n += 1
    out.write_bytes(data[:off])
    return n


def time_reference(path: Path) -> tuple[float, int]:
    from visualdl import LogReader

    t = time.perf_counter()
    reader = LogReader(file_path=str(path))
    n = 0
    for tag in reader.get_tags().get("scalar", []):
        for v in reader.get_data("scalar", tag):
            v.id, v.timestamp, v.value  # noqa: B018
            n += 1
    return time.perf_counter() - t, n


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tags", type=int, default=5)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--ref-records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    path = make_log(args.tags, args.steps)
    size = path.stat().st_size
    print(f"file: {path.name}, {size / 1e6:.1f} MB")

    t = time.perf_counter()
    run = visualdl.decode_file(path)[0]
    cold = time.perf_counter() - t  # includes pyarrow's one-time kernel set-up
    rows = run.scalars.num_rows
    ours, run = best_of(lambda: visualdl.decode_file(path)[0], args.repeat)
    slow, slow_run = best_of(lambda: visualdl.decode_file(path, fast=False)[0], 1)
    assert slow_run.scalars.equals(run.scalars), "fast and slow paths disagree"
    buf = path.read_bytes()
    framing, w = best_of(lambda: _vdlfast.walk(buf, str(path), lambda b, p, e, s: visualdl.parse_record(b, p, e, s, visualdl.ReadOptions())), args.repeat)

    with tempfile.TemporaryDirectory() as tmp:
        cut = Path(tmp) / "vdlrecords.prefix.log"
        copied = prefix(path, args.ref_records, cut)
        ref, ref_n = min(time_reference(cut) for _ in range(3))
        ours = min(ours, best_of(lambda: visualdl.decode_file(path), args.repeat)[0])  # interleaved
    ref_rate = ref_n / ref
    our_rate = rows / ours
    print(f"records (scalar rows): {rows:,}; decoded by the vectorized path: {w.fast_records:,}")
    print(f"sitegen decode_file  : {ours * 1e3:8.1f} ms  {our_rate / 1e6:8.2f} M records/s  (first call {cold * 1e3:.0f} ms)")
    print(f"  of which walk only : {framing * 1e3:8.1f} ms")
    print(f"sitegen slow oracle  : {slow * 1e3:8.1f} ms  {rows / slow / 1e6:8.2f} M records/s")
    print(f"visualdl.LogReader   : {ref * 1e3:8.1f} ms  {ref_rate / 1e6:8.3f} M records/s  (on the first {copied:,} records)")
    our_rate = rows / ours
    print(f"sitegen (best)       : {ours * 1e3:8.1f} ms  {our_rate / 1e6:8.2f} M records/s")
    print(f"speed-up vs LogReader: {our_rate / ref_rate:.0f}x  (slow oracle: {rows / slow / ref_rate:.1f}x)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
