"""Benchmark: the HF Trainer, Lightning, Keras and dvclive readers against pyarrow reading the
same numbers (``pyarrow.json`` for the JSON state, ``pyarrow.csv`` for the CSV/TSV files).

Run: ``python benchmarks/bench_trackers.py [--rows 200000] [--repeat 7]``. Timings are the best
of ``--repeat`` in-process wall times, the readers taking turns (the machine is shared).

The inputs are laid out byte for byte as the real writers lay them out (checked against the
fixtures of ``tests/fixtures/trackers/``, written by the real packages): ``trainer_state.json``
with ``json.dumps(indent=2, sort_keys=True)`` and a train row (4 values) every step plus an eval
row every 10; a Lightning ``metrics.csv`` (CRLF, sorted header, sparse rows); a Keras
``training.log`` (``epoch`` first, ``NA``); dvclive ``plots/metrics/*.tsv`` (timestamp, step,
value), one file per metric. pyarrow reads the same numbers three ways: the files themselves, by
path as a user would (the log rows as JSON lines, one object per row; each CSV/TSV file as it is,
with type inference), the same from bytes already in memory ("pyarrow bytes"), and
the run's scalars as one long CSV (``tag,step,value``). A ratio above 1: sitegen is faster.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# --code DIR: measure the sitegen of another checkout (e.g. main's), side by side with this one's
CODE = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else str(HERE.parent)
sys.path.insert(0, CODE)

from sitegen.ingest import READERS  # noqa: E402
from sitegen.ingest.scan import scan  # noqa: E402


def _v(i: int, k: int) -> float:
    return math.exp(-i / 50_000) * (1 + 0.05 * math.sin(i / (7 + k))) + 0.1 * k + 1e-3


def make(root: Path, rows: int) -> dict[str, Path]:
    done = root / f"DONE-{rows}"
    paths = {
        "hftrainer": root / "hf" / "out",
        "lightning": root / "pl" / "lightning_logs" / "version_0",
        "keras": root / "keras",
        "dvclive": root / "dv" / "dvclive",
    }
    if done.exists():
        return paths
    shutil.rmtree(root, ignore_errors=True)
    for p in paths.values():
        p.mkdir(parents=True)
    history, lines = [], []
    for i in range(1, rows + 1):
        row = {"epoch": round(i / 1000, 4), "grad_norm": _v(i, 1), "learning_rate": 5e-5 * (1 - i / rows), "loss": _v(i, 0), "step": i}
        history.append(row)
        lines.append(json.dumps(row))
        if i % 10 == 0:
            ev = {"epoch": row["epoch"], "eval_accuracy": _v(i, 3), "eval_loss": _v(i, 2), "step": i}
            history.append(ev)
            lines.append(json.dumps(ev))
    state = {"best_metric": None, "global_step": rows, "log_history": history, "max_steps": rows}
    (paths["hftrainer"] / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    (root / "hf-rows.jsonl").write_text("\n".join(lines) + "\n")
    pl = ["epoch,step,train_loss_step,val_acc,val_loss\r\n"]
    for i in range(rows):
        pl.append(f"{i // 1000},{i},{_v(i, 0)!r},,\r\n")
        if i % 10 == 9:
            pl.append(f"{i // 1000},{i},,{_v(i, 3)!r},{_v(i, 2)!r}\r\n")
    (paths["lightning"] / "metrics.csv").write_text("".join(pl), newline="")
    (paths["lightning"] / "hparams.yaml").write_text("lr: 0.01\n")
    ks = ["epoch,loss,mae,val_loss,val_mae\n"] + [f"{i},{_v(i, 0)!r},{_v(i, 1)!r},{_v(i, 2)!r},{_v(i, 3)!r}\n" for i in range(rows)]
    (paths["keras"] / "training.log").write_text("".join(ks))
    metrics = paths["dvclive"] / "plots" / "metrics"
    for k, name in enumerate(("train/loss", "train/acc", "val/loss", "val/acc")):
        f = metrics / f"{name}.tsv"
        f.parent.mkdir(parents=True, exist_ok=True)
        base = name.rsplit("/", 1)[-1]
        f.write_text(f"timestamp\tstep\t{base}\n" + "".join(f"{1750000000000 + i}\t{i}\t{_v(i, k)!r}\n" for i in range(rows // 4)))
    done.write_text("ok")
    return paths


def best_of(fns: dict, repeat: int, rounds: dict | None = None) -> dict:
    """The best wall time of each function, the functions taking turns (the machine is shared:
    its load changes within seconds); ``rounds``: filled with every round's times."""
    times: dict = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    if rounds is not None:
        rounds.update(times)
    return {k: min(v) for k, v in times.items()}


def long_csv(run) -> bytes:
    """The run's scalars as a long CSV (tag, step, value): the same numbers, one per line."""
    import pyarrow.csv as pacsv

    buf = io.BytesIO()
    pacsv.write_csv(run.scalars.select(["tag", "step", "value"]), buf)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--code", default=CODE, help="the checkout whose sitegen is measured (default: this one)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--offline", action="store_true", help="the Comet, ClearML and Neptune readers instead")
    args = ap.parse_args(argv)
    if args.offline:
        main_offline(args.rows, args.repeat)
        return 0
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson

    root = HERE / ".cache" / "trackers"
    paths = make(root, args.rows)
    print(
        f"{'format':<10} {'scalars':>9} {'sitegen s':>10} {'pyarrow file s':>15} {'ratio':>6} {'pyarrow bytes s':>16} {'ratio':>6}"
        f" {'pyarrow long s':>15} {'ratio':>6}   (load {os.getloadavg()[0]:.1f})"
    )
    for fmt, folder in paths.items():
        (source,) = [s for s in scan(folder.parent if fmt != "keras" else folder) if s.format == fmt]
        reader = READERS[fmt]
        run = reader.read(source)
        long = long_csv(run)
        fns = {"ours": lambda: reader.read(source)}  # noqa: B023
        if fmt == "hftrainer":
            rows = str(root / "hf-rows.jsonl")
            data = (root / "hf-rows.jsonl").read_bytes()
            fns["file"] = lambda: pajson.read_json(rows)  # noqa: B023
            fns["bytes"] = lambda: pajson.read_json(io.BytesIO(data))  # noqa: B023
        else:
            files = [str(p) for p in source.files if p.suffix in (".csv", ".log", ".tsv")]
            blobs = [p.read_bytes() for p in source.files if p.suffix in (".csv", ".log", ".tsv")]
            opts = pacsv.ParseOptions(delimiter="\t" if fmt == "dvclive" else ",")
            conv = pacsv.ConvertOptions(null_values=["", "NA"])
            fns["file"] = lambda: [pacsv.read_csv(f, parse_options=opts, convert_options=conv) for f in files]  # noqa: B023
            fns["bytes"] = lambda: [pacsv.read_csv(io.BytesIO(b), parse_options=opts, convert_options=conv) for b in blobs]  # noqa: B023
        fns["long"] = lambda: pacsv.read_csv(io.BytesIO(long))  # noqa: B023
        t = best_of(fns, args.repeat)
        n = run.scalars.num_rows
        print(
            f"{fmt:<10} {n:>9,} {t['ours']:>10.3f} {t['file']:>15.3f} {t['file'] / t['ours']:>6.2f} {t['bytes']:>16.3f}"
            f" {t['bytes'] / t['ours']:>6.2f} {t['long']:>15.3f} {t['long'] / t['ours']:>6.2f}"
        )
    return 0


def make_offline(root: Path, rows: int) -> dict[str, Path]:
    """A Comet zip, a ClearML session and a Neptune run of ``rows`` points of 3 tags, laid out as
    the real clients write them (see tests/support/offline.py)."""
    import zipfile

    root.mkdir(parents=True, exist_ok=True)
    tags = ("loss", "acc", "lr")
    comet = root / "comet" / ".cometml-runs"
    comet.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(rows):
        for k, t in enumerate(tags):
            m = {"epoch": None, "metricName": t, "metricValue": _v(i, k), "step": i}
            lines.append(
                json.dumps(
                    {"payload": {"local_timestamp": 1796446660018 + i, "message_id": 3 * i + k, "metric": m}, "type": "metric_msg"},
                    separators=(",", ":"),
                )
            )
    with zipfile.ZipFile(comet / ("ab" * 16 + ".zip"), "w") as zf:
        zf.writestr("experiment.json", json.dumps({"offline_id": "ab" * 16, "project_name": "p"}))
        zf.writestr("messages.json", "\n".join(lines) + "\n")
    session = root / "clearml" / "offline-bench"
    session.mkdir(parents=True, exist_ok=True)
    (session / "task.json").write_text(json.dumps({"name": "b"}))
    ev = [
        {
            "timestamp": 1796446801770 + i,
            "type": "training_stats_scalar",
            "task": "offline-bench",
            "iter": i,
            "metric": t,
            "variant": "v",
            "value": _v(i, k),
            "method": "get",
        }
        for i in range(rows)
        for k, t in enumerate(tags)
    ]
    (session / "metrics.jsonl").write_text("".join(json.dumps(ev[j : j + 100]) + "\n" for j in range(0, len(ev), 100)))
    nep = root / "neptune" / ".neptune" / "offline" / "run__x__1__y"
    nep.mkdir(parents=True, exist_ok=True)
    (nep / "data-1.log").write_text("".join(
        json.dumps({"obj": {"type": "LogFloats", "path": ["train", t], "values": [{"value": _v(i, k), "step": i, "ts": 1796446833.8 + i}]}, "version": 3 * i + k, "at": 1796446833.8 + i}) + "\n"
        for i in range(rows) for k, t in enumerate(tags)))  # fmt: skip
    return {"comet": root / "comet", "clearml": root / "clearml", "neptune": root / "neptune"}


def main_offline(rows: int, repeat: int) -> None:
    """The three JSON-lines readers against ``json.loads`` of every line of the same bytes."""
    paths = make_offline(HERE / ".cache" / f"offline-{rows}", rows)
    print(f"{'format':<10} {'scalars':>9} {'sitegen s':>10} {'json.loads s':>13} {'ratio':>6}   (sitegen from {CODE}; load {os.getloadavg()[0]:.1f})")
    for fmt, folder in paths.items():
        (source,) = [s for s in scan(folder) if s.format == fmt]
        reader = READERS[fmt]
        if fmt == "comet":
            import zipfile

            with zipfile.ZipFile(source.files[0]) as zf:
                blob = zf.read("messages.json")
        else:
            blob = next(p for p in source.files if p.suffix in (".jsonl", ".log")).read_bytes()
        fns = {"ours": lambda: reader.read(source), "json": lambda: [json.loads(x) for x in blob.splitlines()]}  # noqa: B023
        rounds: dict = {}
        t = best_of(fns, repeat, rounds)
        n = reader.read(source).scalars.num_rows
        per = [j / o for j, o in zip(rounds["json"], rounds["ours"])]
        print(f"{fmt:<10} {n:>9,} {t['ours']:>10.3f} {t['json']:>13.3f} {t['json'] / t['ours']:>6.2f}   per round {min(per):.2f}-{max(per):.2f}")


if __name__ == "__main__":
    sys.exit(main())
