"""Benchmark: the W&B reader against wandb's own protobuf classes reading the same file.

Run: ``python benchmarks/bench_wandb.py [--steps 50000] [--repeat 5]``. The input is written once
by the real ``wandb`` package in offline mode (``run.log`` of 3 metrics a step; wandb 0.31 adds a
history record and two summary records a step: ~150,000 records, 21 MB) and cached under
``benchmarks/.cache/bench/``.

The reference is what issue 22 names: the records framed the way wandb's ``DataStore`` scans
them (a chunk at a time, ``zlib.crc32`` each; wandb >= 0.2x no longer ships that Python class,
its Go core reads the file), each parsed with ``wandb_internal_pb2.Record.ParseFromString``,
each history value with ``json.loads``, into the same (tag, step, wall time, value) rows.
sitegen's reader does more (config, summary fold, run and environment records) in its time.
Rounds take turns (reference, sitegen, sitegen without CRC checks); the machine is shared, so
the best, the median and every round are printed. A ratio above 1: sitegen is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
# --code DIR: measure the sitegen of another checkout (e.g. main's), side by side with this one's
CODE = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else str(HERE.parent)
sys.path.insert(0, CODE)

from sitegen.ingest import READERS  # noqa: E402
from sitegen.ingest.scan import scan  # noqa: E402
from sitegen.model import ReadOptions  # noqa: E402

WRITE = textwrap.dedent(
    """
    import math, sys, wandb
    run = wandb.init(mode="offline", dir=sys.argv[1], project="bench", name="big", id="bench01", config={"lr": 0.1})
    for i in range(int(sys.argv[2])):
        run.log({"loss": math.exp(-i / 20000) + 1e-3 * math.sin(i), "acc": i / 1e5, "lr": 0.1 * 0.9999 ** i})
    run.finish()
    """
)


def make(steps: int) -> Path:
    root = HERE / ".cache" / "bench" / f"wandb-{steps}"
    done = root / "DONE"
    if not done.exists():
        root.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "WANDB_SILENT": "true", "WANDB_CONSOLE": "off", "WANDB_DISABLE_GIT": "true"}
        subprocess.run([sys.executable, "-c", WRITE, str(root), str(steps)], check=True, env=env, cwd=root)
        done.write_text("")
    return root


def reference(path: Path) -> int:
    """Rows decoded the reference way; returns their number."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    head = struct.Struct("<IHB")
    tags, steps, walls, values = [], [], [], []
    off, part = 7, b""
    while off + 7 <= len(data):
        left = 32768 - off % 32768
        if left < 7:
            off += left
            continue
        crc, n, kind = head.unpack_from(data, off)
        if zlib.crc32(data[off + 6 : off + 7 + n]) != crc:
            break
        payload = data[off + 7 : off + 7 + n]
        off += 7 + n
        if kind == 2:
            part = payload
            continue
        if kind == 3:
            part += payload
            continue
        if kind == 4:
            payload = part + payload
        r = pb.Record()
        r.ParseFromString(payload)
        if r.WhichOneof("record_type") != "history":
            continue
        row = {(".".join(it.nested_key) if it.nested_key else it.key): json.loads(it.value_json) for it in r.history.item}
        step, wall = row.get("_step", r.history.step.num), row.get("_timestamp", float("nan"))
        for k, v in row.items():
            if k not in ("_step", "_timestamp", "_runtime") and isinstance(v, (int, float)):
                tags.append(k)
                steps.append(step)
                walls.append(wall)
                values.append(float(v))
    return len(values)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50_000)
    ap.add_argument("--code", default=CODE, help="the checkout whose sitegen is measured (default: this one)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    root = make(args.steps)
    source = scan(root)[0]
    path = source.files[0]
    reader = READERS["wandb"]
    checked = reader.read(source)
    assert not checked.problems, checked.problems
    want = reference(path)
    assert checked.scalars.num_rows == want, (checked.scalars.num_rows, want)
    times: dict[str, list[float]] = {"reference": [], "sitegen": [], "sitegen, no CRC": []}
    cpu: dict[str, list[float]] = {name: [] for name in times}  # CPU seconds: less moved by other processes
    for _ in range(args.repeat):
        for name in times:
            t, c = time.perf_counter(), time.process_time()
            if name == "reference":
                reference(path)
            else:
                reader.read(source, ReadOptions(verify=name == "sitegen"))
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    size = path.stat().st_size
    print(f"{path.name}: {size / 1e6:.1f} MB, {want:,} scalars, {args.steps:,} steps; load average {os.getloadavg()[0]:.1f}")
    ref = statistics.median(times["reference"])
    for name, ts in times.items():
        med = statistics.median(ts)
        rounds = " ".join(f"{t:.3f}" for t in ts)
        print(f"{name:16s} best {min(ts):.3f} s  median {med:.3f} s  ratio {ref / med:5.1f}x  rounds: {rounds}")
    per_round = [r / s for r, s in zip(times["reference"], times["sitegen"])]
    print(f"ratio per round (reference / sitegen): {min(per_round):.1f}x .. {max(per_round):.1f}x")
    per_cpu = [r / s for r, s in zip(cpu["reference"], cpu["sitegen"])]
    print(
        f"CPU seconds: reference median {statistics.median(cpu['reference']):.3f}, sitegen median {statistics.median(cpu['sitegen']):.3f}"
        f" = {statistics.median(cpu['reference']) / statistics.median(cpu['sitegen']):.1f}x (per round {min(per_cpu):.1f}x .. {max(per_cpu):.1f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
