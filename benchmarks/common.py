"""Shared pieces of the benchmarks: input generation, fresh-process measurement, the report.

Inputs are cached under ``benchmarks/.cache/bench/`` (gitignored). Two writers make them:

* the real ``tensorboardX.SummaryWriter`` (about 23,000 records/s on the 2-core machine) for the
  2M-record file and its prefixes (1M, 200k, 50k records, cut at record boundaries);
* ``write_events`` below, a plain-Python writer that lays records out exactly as tensorboardX
  2.6.5 does (``Event{wall_time, step, summary{value{tag, simple_value}}}`` in field order, step 0
  omitted as proto3 does, simple_value always written since it sits in a oneof, masked CRC32C from ``sitegen.ingest.tfevents.tfrecord``), used
  for the 10M-record file and the 500-run archive because tensorboardX would take ~7 min for
  each. ``verify_writer`` writes the same values with both writers and checks the bytes are
  identical, and ``check_sample`` parses a sample of every generated file with TensorBoard's
  ``event_pb2.Event``.

Every measurement runs in a fresh child process (``measure``) so its peak RSS is its own.
"""
from __future__ import annotations

import json
import os
import platform
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from sitegen.ingest.protowire import encode_varint  # noqa: E402
from sitegen.ingest.tfevents.tfrecord import frame, masked_crc32c  # noqa: E402

CACHE = HERE / ".cache" / "bench"
RESULTS = CACHE / "results"
DOC = ROOT / "docs" / "benchmarks.md"

FILE_TAGS = ["train/loss", "train/acc", "lr", "val/loss", "grad_norm"]
ARCHIVE_TAGS = [
    "train/loss", "train/acc", "train/lr", "train/grad_norm", "train/throughput",
    "eval/loss", "eval/accuracy", "eval/f1", "system/gpu_mem", "system/step_time",
]
BASE_WALL = 1_750_000_000.0


def child_env(code: Path | None = None) -> dict[str, str]:
    """The environment for measured children: OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset, and
    PYTHONDONTWRITEBYTECODE unset: an installed package has its bytecode compiled (pip does it
    at install time), but this sandbox sets the variable, so every measured process compiled
    sitegen's ~40 modules from source again (~0.1 s each, a tenth of a rebuild)."""
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(code or ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# --------------------------------------------------------------------------- values


def file_value(tag_index: int, step):
    """Deterministic curve values (float64 in, stored as float32), never exactly 0.0."""
    import numpy as np

    s = np.asarray(step, dtype=np.float64)
    k = tag_index
    return (np.exp(-3e-6 * s) * (1 + 0.05 * np.sin(s / (7 + k))) + 0.1 * k + 1e-3).astype(np.float32)


# --------------------------------------------------------------------------- writers


def tbx_file_name(wall: float, host: str | None = None) -> str:
    """tensorboardX's name: ``events.out.tfevents.<first 10 chars of str(time)>.<hostname>``."""
    return f"events.out.tfevents.{str(wall)[:10]}.{host or socket.gethostname()}"


def write_events(path: Path, tags: list[str], steps, values, walls, *, file_wall: float) -> int:
    """Write a tensorboardX-layout event file: the ``brain.Event:2`` record, then for each step
    index i and each tag t one ``add_scalar(t, values[t][i], steps[i], walltime=walls[t][i])``.

    ``values[t]``/``walls[t]`` are sequences per tag (float32-representable values, float walls).
    Returns the number of records written.
    """
    pack_d, pack_f = struct.Struct("<d").pack, struct.Struct("<f").pack
    tag_fields = [b"\x0a" + encode_varint(len(t.encode())) + t.encode() for t in tags]
    step_fields: dict[int, bytes] = {}
    n = 0
    with open(path, "wb", buffering=1 << 22) as f:
        first = b"\x09" + pack_d(file_wall) + b"\x1a\x0dbrain.Event:2"
        f.write(frame(first))
        n += 1
        chunk: list[bytes] = []
        vals = [list(map(float, v)) for v in values]
        wls = [list(map(float, w)) for w in walls]
        for i, step in enumerate(map(int, steps)):
            sf = step_fields.get(step)
            if sf is None:
                sf = b"\x10" + encode_varint(step) if step else b""
                if len(step_fields) < 4096:
                    step_fields[step] = sf
            for k, tf in enumerate(tag_fields):
                v = vals[k][i]
                value = tf + b"\x15" + pack_f(v)  # simple_value is in a oneof: 0.0 is written too
                summ = b"\x0a" + encode_varint(len(value)) + value
                w = wls[k][i]
                payload = (b"\x09" + pack_d(w) if w != 0.0 else b"") + sf + b"\x2a" + encode_varint(len(summ)) + summ
                chunk.append(frame(payload))
            n += len(tags)
            if len(chunk) >= 65536:
                f.write(b"".join(chunk))
                chunk.clear()
        f.write(b"".join(chunk))
    return n


def write_tbx(out_dir: Path, tags: list[str], steps, values, walls) -> Path:
    """The same records through the real tensorboardX SummaryWriter; returns the file."""
    from tensorboardX import SummaryWriter

    out_dir.mkdir(parents=True, exist_ok=True)
    import contextlib
    import io
    import logging

    w = SummaryWriter(str(out_dir), max_queue=4096, flush_secs=3600)
    vals = [list(map(float, v)) for v in values]
    wls = [list(map(float, v)) for v in walls]
    logging.getLogger("tensorboardX").setLevel(logging.ERROR)  # "NaN or Inf found in input tensor."
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for i, step in enumerate(map(int, steps)):
            for k, tag in enumerate(tags):
                w.add_scalar(tag, vals[k][i], step, walltime=wls[k][i])
    w.close()
    return next(p for p in out_dir.iterdir() if "tfevents" in p.name)


def first_record_wall(path: Path) -> float:
    with open(path, "rb") as f:
        head = f.read(64)
    (n,) = struct.unpack_from("<Q", head, 0)
    assert head[12] == 0x09, "first record has no wall_time"
    return struct.unpack_from("<d", head, 13)[0]


def verify_writer(tags: list[str], steps, *, scratch: Path) -> dict:
    """Write the same values with tensorboardX and with ``write_events``; compare bytes."""
    import numpy as np
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)
    steps = np.asarray(steps, dtype=np.int64)
    values = [file_value(k, steps) for k in range(len(tags))]
    for v in values:  # the awkward cases: +0.0 (omitted), -0.0, NaN, +-inf
        v[:4] = [0.0, -0.0, np.nan, np.inf]
        v[4:6] = [-np.inf, -1.5]
    walls = [BASE_WALL + steps * 0.05 + k * 1e-4 for k in range(len(tags))]
    walls[0][1] = BASE_WALL + 0.123456789
    ref = write_tbx(scratch / "tbx", tags, steps, values, walls)
    mine = scratch / "mine" / ref.name
    mine.parent.mkdir(parents=True)
    n = write_events(mine, tags, steps, values, walls, file_wall=first_record_wall(ref))
    a, b = ref.read_bytes(), mine.read_bytes()
    ok = a == b
    shutil.rmtree(scratch, ignore_errors=True)
    if not ok:
        raise SystemExit(f"write_events differs from tensorboardX output ({len(a)} vs {len(b)} bytes)")
    return {"records": n, "bytes": len(a), "identical": ok}


def record_offsets(path: Path, limit: int | None = None) -> list[int]:
    """Offsets of the records of a file (plain framing walk), at most ``limit``."""
    return record_offsets_bytes(path.read_bytes(), limit)


def record_offsets_bytes(data: bytes, limit: int | None = None) -> list[int]:
    offs, off, end = [], 0, len(data)
    unpack = struct.Struct("<Q").unpack_from
    while off + 12 <= end and (limit is None or len(offs) < limit):
        (n,) = unpack(data, off)
        if off + 16 + n > end:
            break
        offs.append(off)
        off += 16 + n
    return offs


def check_sample(path: Path, tags: list[str], every: int = 9973) -> int:
    """Parse every ``every``-th record of ``path`` with TensorBoard's event_pb2 and check CRCs.

    Returns how many were checked; raises on any mismatch.
    """
    from tensorboard.compat.proto.event_pb2 import Event

    data = path.read_bytes()
    offs = record_offsets(path)
    sample = offs[::every] + offs[-3:]
    for off in sample:
        (n,) = struct.unpack_from("<Q", data, off)
        assert struct.unpack_from("<I", data, off + 8)[0] == masked_crc32c(data[off:off + 8])
        payload = data[off + 12:off + 12 + n]
        assert struct.unpack_from("<I", data, off + 12 + n)[0] == masked_crc32c(payload)
        ev = Event.FromString(payload)
        if off == 0:
            assert ev.file_version == "brain.Event:2"
        else:
            assert len(ev.summary.value) == 1 and ev.summary.value[0].tag in tags, ev
    return len(sample)


def prefix_file(src: Path, records: int, dst_dir: Path) -> Path:
    """Copy the first ``records`` records (the header record included) of ``src`` into ``dst_dir``."""
    dst = dst_dir / src.name
    if dst.exists():
        return dst
    offs = record_offsets(src, records + 1)
    cut = offs[records] if len(offs) > records else src.stat().st_size
    dst_dir.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_suffix(".tmp")
    with open(src, "rb") as f:
        tmp.write_bytes(f.read(cut))
    tmp.rename(dst)
    return dst


def count_records(path: Path) -> int:
    return len(record_offsets(path))


# --------------------------------------------------------------------------- measurement


def _vm(pid: int, key: str) -> int:
    """VmHWM / VmRSS of a live process in bytes (0 when gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class TreeSampler:
    """Samples the summed RSS of a process and all its descendants every 20 ms."""

    def __init__(self, pid: int):
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0
        self.peak_single = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.proc] + self.proc.children(recursive=True)
                total = 0
                for p in procs:
                    try:
                        rss = p.memory_info().rss
                    except psutil.Error:
                        continue
                    total += rss
                    self.peak_single = max(self.peak_single, rss)
                self.peak = max(self.peak, total)
            except psutil.Error:
                pass
            self._stop.wait(0.02)

    def stop(self) -> int:
        self._stop.set()
        self._t.join()
        return self.peak


def measure(argv: list[str], *, timeout: float = 3600, sample: bool = True, code: Path | None = None) -> dict:
    """Run ``argv`` in a fresh process; return its JSON result (last stdout line) plus
    ``wall_s`` (process start to exit), ``peak_rss`` (largest single process, getrusage of the
    children) and ``tree_rss`` (sampled sum over the process tree).

    ``sample=False``: no sampler, for timings (``peak_rss`` and ``tree_rss`` None): it walks
    ``/proc`` every 20 ms on one of the machine's two cores, which a short build (or one whose
    processes use both cores) loses. (The child's own rusage cannot stand in: its peak counts
    the copy of this large process it was forked from, before the exec.)"""
    import resource
    import tempfile

    if not sample:
        with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
            t = time.perf_counter()
            p = subprocess.Popen(argv, stdout=out_f, stderr=err_f, text=True, env=child_env(code), cwd=code or ROOT)
            p.wait(timeout=timeout)
            wall = time.perf_counter() - t
            out_f.seek(0)
            err_f.seek(0)
            out, err = out_f.read(), err_f.read()
        peak = tree = None
    else:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(code), cwd=code or ROOT)
        sampler = TreeSampler(p.pid)
        out, err = p.communicate(timeout=timeout)
        wall = time.perf_counter() - t
        tree = sampler.stop()
        after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        # getrusage(RUSAGE_CHILDREN) only rises when this child beats every earlier one: fall back
        # to the sampled largest single process then
        peak = after * 1024 if after > before else sampler.peak_single
    if p.returncode != 0:
        raise RuntimeError(f"{argv} failed ({p.returncode}):\n{err[-3000:]}")
    res: dict = {}
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if lines:
        res = json.loads(lines[-1])
    res["wall_s"] = wall
    res.setdefault("peak_rss", peak)
    res["tree_rss"] = tree
    return res


def child_result(**fields) -> None:
    """Print a child's result as the JSON line ``measure`` reads (adds its own VmHWM)."""
    fields.setdefault("peak_rss", _vm(os.getpid(), "VmHWM"))
    print(json.dumps(fields), flush=True)


def warm(path: Path) -> None:
    """Read a file or every file below a folder once so all timings see a warm page cache."""
    paths = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


# --------------------------------------------------------------------------- TensorBoard's Rust data server


def rust_server_load(logdir: Path, *, expect_points: int | None = None, sample: bool = True) -> dict:
    """Start tensorboard-data-server on ``logdir`` (reload once, keep every scalar), wait for
    its load cycle, fetch every scalar over gRPC; time from process start to all data fetched.
    ``sample=False``: no tree sampler, as for the builds it is timed against (see ``measure``)."""
    import grpc
    import tensorboard_data_server
    from tensorboard.data.proto import data_provider_pb2 as pb
    from tensorboard.data.proto import data_provider_pb2_grpc as pbg

    binary = tensorboard_data_server.server_binary()
    port_file = CACHE / f"rust-port-{os.getpid()}"
    port_file.unlink(missing_ok=True)
    argv = [binary, "--logdir", str(logdir), "--reload", "once", "--port", "0", "--port-file", str(port_file),
            "--samples-per-plugin", "scalars=all", "-v"]
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=child_env())
    sampler = TreeSampler(p.pid) if sample else None
    try:
        t_load = None
        for line in p.stderr:  # -v logs "Starting load cycle" / "Finished load cycle (…)"
            if "Finished load cycle" in line:
                t_load = time.perf_counter() - t0
                break
        if t_load is None:
            raise RuntimeError("data server exited before finishing its load cycle")
        threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
        port = port_file.read_text().strip()
        ch = grpc.insecure_channel(f"localhost:{port}", options=[("grpc.max_receive_message_length", -1)])
        stub = pbg.TensorBoardDataProviderStub(ch)
        runs = stub.ListRuns(pb.ListRunsRequest())
        listing = stub.ListScalars(pb.ListScalarsRequest(plugin_filter=pb.PluginFilter(plugin_name="scalars")))
        run_names = [r.name for r in runs.runs]
        tags = sorted({t.tag_name for r in listing.runs for t in r.tags})
        max_points = 1 << 31
        resp = stub.ReadScalars(pb.ReadScalarsRequest(
            plugin_filter=pb.PluginFilter(plugin_name="scalars"),
            run_tag_filter=pb.RunTagFilter(runs=pb.RunFilter(names=run_names), tags=pb.TagFilter(names=tags)),
            downsample=pb.Downsample(num_points=max_points)))
        points = sum(len(t.data.step) for r in resp.runs for t in r.tags)
        t_all = time.perf_counter() - t0
        hwm = _vm(p.pid, "VmHWM")
        ch.close()
    finally:
        p.kill()
        p.wait()
        tree = sampler.stop() if sampler is not None else None
        port_file.unlink(missing_ok=True)
    if expect_points is not None and points != expect_points:
        raise RuntimeError(f"data server returned {points} points, expected {expect_points}")
    return {"seconds": t_all, "load_s": t_load, "points": points, "runs": len(run_names),
            "peak_rss": hwm, "tree_rss": tree,
            "argv": " ".join(["tensorboard-data-server"] + argv[1:]).replace(str(port_file), "PORT_FILE")
            .replace(str(ROOT) + "/", "")}


# --------------------------------------------------------------------------- machine + report


def machine() -> dict:
    import numpy
    import pyarrow

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        mem = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import importlib.metadata as md

    def ver(name: str) -> str:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return "not installed"

    import hashlib

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    h = hashlib.sha256()
    for p in sorted((ROOT / "sitegen").rglob("*.py")):
        h.update(p.relative_to(ROOT).as_posix().encode() + b"\0" + p.read_bytes())
    return {
        "sitegen": f"git {head or '?'} + working tree, sitegen/**/*.py sha256 {h.hexdigest()[:12]}",
        "nproc": os.cpu_count(), "cpu": cpu, "mem_gb": round(mem / 2**30, 1), "python": platform.python_version(),
        "numpy": numpy.__version__, "pyarrow": pyarrow.__version__, "kernel": platform.release(),
        "tensorboard": ver("tensorboard"), "tensorboardX": ver("tensorboardX"),
        "tensorboard-data-server": ver("tensorboard-data-server"), "tbparse": ver("tbparse"),
        "google-crc32c": ver("google-crc32c"), "protobuf": ver("protobuf"),
    }


def save(name: str, data: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=1))


def load(name: str) -> dict | None:
    p = RESULTS / f"{name}.json"
    return json.loads(p.read_text()) if p.exists() else None


def mb(n: float | None) -> str:
    return "–" if n is None else f"{n / 1e6:,.0f} MB"


def secs(t: float | None) -> str:
    if t is None:
        return "–"
    return f"{t * 1e3:,.1f} ms" if t < 1 else f"{t:,.2f} s"


def verdict(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


def _rate(n: float, t: float) -> str:
    return f"{n / t / 1e6:,.2f} M/s" if n / t >= 1e5 else f"{n / t / 1e3:,.1f} k/s"


def _table(head: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return out + [""]


BENCH_NAMES = {
    "floor": "floor: read bytes + one crc32c pass",
    "fast": "sitegen `read_scalars` (fast path, all CRCs verified)",
    "fast-noverify": "sitegen `read_scalars`, `ReadOptions(verify=False)`",
    "reference": "sitegen reference decoder, `ReadOptions(fast=False)`",
    "ea": "TensorBoard `EventAccumulator.Reload()` + `Scalars()`",
    "tbparse": "tbparse `SummaryReader(dir).scalars`",
}


def write_doc() -> None:
    """Regenerate docs/benchmarks.md from the saved results (full ones if present, else quick)."""
    rd = load("readers") or load("readers-quick")
    bd = load("build") or load("build-quick")
    L: list[str] = ["# Benchmarks", "",
                    "<!-- generated by benchmarks/bench_readers.py and benchmarks/bench_build.py: do not edit by hand -->", "",
                    "Every number below is written by the benchmark scripts from their own measurements.", "",
                    "## How to run", "", "```sh",
                    "python benchmarks/bench_readers.py && python benchmarks/bench_build.py   # or: benchmarks/run_all.sh",
                    "benchmarks/run_all.sh --quick                                             # 10x smaller smoke run",
                    "```", "",
                    "Benchmark-only dependencies: `pip install tbparse tensorboard-data-server psutil grpcio` "
                    "(tensorboardX and tensorboard too). Inputs are generated once and cached in "
                    "`benchmarks/.cache/bench/` (gitignored); raw results are in `benchmarks/.cache/bench/results/*.json`. "
                    "`OPENBLAS_CORETYPE` and `OPENBLAS_L2_SIZE` are "
                    "removed from the environment of every measured process.", ""]
    m = (rd or bd or {}).get("machine") or machine()
    L += ["## Machine", ""]
    L += _table(["", ""], [
        ["sitegen", m.get("sitegen", "?")], ["CPU", f"{m['cpu']} ({m['nproc']} cores as seen by `nproc`)"], ["memory", f"{m['mem_gb']} GB"],
        ["kernel", m["kernel"]], ["Python", m["python"]], ["numpy / pyarrow", f"{m['numpy']} / {m['pyarrow']}"],
        ["tensorboard / tensorboard-data-server", f"{m['tensorboard']} / {m['tensorboard-data-server']}"],
        ["tensorboardX / tbparse", f"{m['tensorboardX']} / {m['tbparse']}"],
        ["google-crc32c / protobuf", f"{m['google-crc32c']} / {m['protobuf']}"],
    ])
    loads = []
    for name, d in (("readers", rd), ("build", bd)):
        if d and d.get("load_before"):
            loads.append(f"{name}: {d['load_before'][0]:.1f} at start, {d.get('load_after', [0])[0]:.1f} at end")
    if loads:
        L += [f"Load average (1 min) during the runs — {'; '.join(loads)}. On a 2-core machine anything above 2 "
              "means other processes competed for the CPU: treat times as upper bounds.", ""]

    checks: list[list] = []
    sd = load("side-by-side")
    if sd:
        L += _side_section(sd, checks)
    if rd:
        L += _readers_section(rd, checks)
    rdb = load("readers-base")
    if rdb:  # the same readers benchmark on the other checkout (bench_readers.py --code ... --save-as readers-base)
        base_checks: list[list] = []
        _readers_section(rdb, base_checks)
        name = (sd or {}).get("labels", {}).get("base", rdb.get("code", "base"))
        checks += [[f"[{name}] {row[0]}", *row[1:]] for row in base_checks]
    if bd:
        L += _build_section(bd, rd, checks)
    out = ["## Figures the issue asks for", ""]
    out += _table(["figure", "target", "measured", "result"], checks)
    # the verdicts go right after the machine section
    at = next(i for i, line in enumerate(L) if line.startswith("## ") and i > L.index("## Machine"))
    L = L[:at] + out + L[at:]
    L += _other_results()
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text("\n".join(L).rstrip() + "\n")


def _other_results() -> list[str]:
    """The output of the other benchmark scripts (VisualDL, index, Dask), as they printed it."""
    folder = HERE / "results"
    files = sorted(folder.glob("*.txt")) if folder.is_dir() else []
    if not files:
        return []
    L = ["## Other benchmarks", "",
         "Printed by `benchmarks/bench_visualdl.py`, `benchmarks/bench_index.py --runs 10000` and "
         "`benchmarks/bench_dask.py --quick` (`benchmarks/run_all.sh` keeps their output in `benchmarks/results/`).", ""]
    for f in files:
        L += [f"### {f.stem}", "", "```text", f.read_text().rstrip(), "```", ""]
    return L


def _readers_section(rd: dict, checks: list[list]) -> list[str]:
    L = ["## Inputs (readers)", ""]
    g = rd["gen"]
    rows = []
    for label, f in rd["files"].items():
        writer = "tensorboardX-layout writer" if label in ("10M",) or (rd["quick"] and label == "1M") else "tensorboardX `SummaryWriter`"
        if "prefix" in f["dir"]:
            writer = "first records of the tensorboardX file (cut at a record boundary)"
        rows.append([label, f"{f['records']:,}", mb(f["bytes"]), writer, f"`{f['dir']}`"])
    L += _table(["input", "scalar records", "size", "written by", "cached in"], rows)
    L += [f"Each file holds the `brain.Event:2` record and then 5 tags (`{'`, `'.join(FILE_TAGS)}`) written once per step. "
          f"tensorboardX wrote {g['tensorboardX_rate']:,.0f} records/s here, so the 10M-record file comes from "
          f"`benchmarks/common.py:write_events` ({g['writer_rate']:,.0f} records/s), which lays records out exactly as "
          "tensorboardX 2.6.5 does (`Event{wall_time, step, summary{value{tag, simple_value}}}`, step 0 omitted, "
          "masked CRC32C from `sitegen.ingest.tfevents.tfrecord.masked_crc32c`). Before it is used, the same values "
          f"(including 0.0, -0.0, NaN, ±inf, steps with 1- to 3-byte varints) are written by both tensorboardX and it: "
          f"the two files were **byte-identical** ({g['writer_checked_records']:,} records). "
          f"{g['writer_sampled_records']:,} records spread over the generated file were then parsed with "
          "TensorBoard's `event_pb2.Event` and their CRCs checked.", ""]

    L += ["## Decoding scalars", "",
          "Each row is a fresh process; time is the best of the repeats inside it (first call in brackets), "
          "peak RSS is that process's VmHWM (interpreter and imports included: the baseline column is its RSS "
          "before the first call). Rates count scalar records. The *× floor* of a sitegen row divides by the floor "
          "measured in that same process, alternating with the decode (best of each, shown in brackets), so load "
          "from other processes hits both alike; the separate floor rows give the floor's own memory.", ""]
    floors = {r["input"]: r["seconds"] for r in rd["rows"] if r["bench"] == "floor"}
    rows = []
    for r in rd["rows"]:
        if r["bench"] not in BENCH_NAMES:
            continue
        if r.get("floor_here"):
            xf = f"{r['seconds'] / r['floor_here']:.2f}× ({secs(r['floor_here'])})"
        else:
            xf = f"{r['seconds'] / floors[r['input']]:.2f}×" if r["input"] in floors else "–"
        first = f" ({secs(r['first_s'])})" if r.get("first_s") and r["first_s"] != r["seconds"] else ""
        rows.append([BENCH_NAMES[r["bench"]], r["input"], f"{r['records']:,}", secs(r["seconds"]) + first,
                     _rate(r["records"], r["seconds"]), f"{r['bytes'] / r['seconds'] / 1e6:,.0f}" if r.get("bytes") else "–",
                     xf, mb(r["peak_rss"]), mb(r.get("base_rss"))])
    L += _table(["reader", "input", "records", "time", "records/s", "MB/s", "× floor", "peak RSS", "baseline RSS"], rows)
    if "reference_matches_fast" in rd:
        L += [f"The reference decoder and the fast path returned the same steps and values on the prefix: "
              f"{'yes' if rd['reference_matches_fast'] else '**NO**'}.", ""]

    rust = [r for r in rd["rows"] if r["bench"] == "rust-server"]
    if rust:
        L += ["## TensorBoard's Rust data server", "",
              f"Command: `{rd.get('rust_argv', '')}` (`--samples-per-plugin scalars=all` keeps every point instead "
              "of a 1,000-point reservoir; `-v` makes it log `Finished load cycle`). Time runs from process start "
              "until every point has been fetched over gRPC (`ListRuns`, `ListScalars`, one `ReadScalars` for all "
              "runs and tags with `Downsample(num_points=2^31)`); the point count is checked. Peak RSS is the "
              "server's VmHWM read before it is killed.", ""]
        rows = [[r["input"], f"{r['records']:,}", secs(r["load_s"]), secs(r["seconds"]), _rate(r["records"], r["seconds"]),
                 mb(r["peak_rss"])] for r in rust]
        L += _table(["input", "records", "load cycle", "start → all fetched", "records/s", "peak RSS"], rows)

    ds = [r for r in rd["rows"] if r["bench"] == "downsample"]
    if ds:
        r = ds[0]
        L += ["## Downsampling", "",
              f"`sitegen.downsample.downsample(step, wall, value, 2000)` on {r['records']:,} points (steps int64 "
              "arange, values standard normal with one spike of 1e6, and one NaN — the case the issue asks "
              "for; the all-finite row is there for comparison), best of 5 calls in a fresh process.", ""]
        L += _table(["points", "values", "best", "first call", "peak RSS"],
                    [[f"{r['records']:,}", r.get("note", ""), secs(r["seconds"]), secs(r["first_s"]), mb(r["peak_rss"])]
                     for r in ds])

    # verdicts
    by = {(r["bench"], r["input"]): r for r in rd["rows"]}
    q = rd["quick"]
    labels = ["100k", "200k"] if q else ["1M", "2M"]
    small = "10k" if q else "50k"
    ea = by.get(("ea", small))
    for lab in labels:
        f, fl = by.get(("fast", lab)), by.get(("floor", lab))
        if f and (fl or f.get("floor_here")):
            x = f["seconds"] / (f.get("floor_here") or fl["seconds"])
            checks.append([f"{lab} file: decode time / floor", "≤ 2×", f"{x:.2f}×", verdict(x <= 2)])
        rs = by.get(("rust-server", lab))
        if f and rs:
            x = rs["seconds"] / f["seconds"]
            checks.append([f"{lab} file: vs Rust data server (start → all fetched)", "≥ 10× faster", f"{x:.1f}×", verdict(x >= 10)])
            x2 = rs["load_s"] / f["seconds"]
            checks.append([f"{lab} file: vs Rust data server (load cycle only, for reference)", "–", f"{x2:.1f}×", "–"])
        if f and ea:
            x = (f["records"] / f["seconds"]) / (ea["records"] / ea["seconds"])
            checks.append([f"{lab} file: vs EventAccumulator (records/s; EA on the {small} file)", "≥ 250×", f"{x:,.0f}×", verdict(x >= 250)])
    big = "1M" if q else "10M"
    f = by.get(("fast", big))
    if f:
        checks.append([f"{big} file: peak memory of `read_scalars` (whole process)", "< 1.5 GB", mb(f["peak_rss"]),
                       verdict(f["peak_rss"] < 1.5e9)])
    if ds:
        r = ds[0]
        checks.append([f"downsampling {r['records']:,} → 2,000 (best of 5; first call {secs(r['first_s'])})", "< 50 ms",
                       secs(r["seconds"]), verdict(r["seconds"] < 0.05)])
    return L


def _build_section(bd: dict, rd: dict | None, checks: list[list]) -> list[str]:
    a = bd["archive"]
    note = "" if a["runs"] == 500 else (f" **Scaled down: the issue's archive (b) has 500 runs; this run used "
                                         f"`--runs {a['runs']}`** (the default is 500).")
    state = bd.get("machine", {}).get("sitegen")
    if state and rd and rd.get("machine", {}).get("sitegen") != state:
        note += f" sitegen at this run: {state}."
    L = ["## Building a site", "",
         f"Archive (b): `logs/{{project}}/{{model}}/{{run}}/`, {a['runs']:,} runs × {len(ARCHIVE_TAGS)} tags × 2,000 steps "
         f"= {a['records']:,} records ({mb(a['bytes'])}), one tensorboardX-layout file per run, written by "
         f"`write_events` in {a['gen_s']:.0f} s after the byte-identical check against tensorboardX "
         f"({a['checked']:,} records) and with {a['sampled']:,} sampled records parsed by `event_pb2`.{note}", "",
         "`python -m sitegen build ARCHIVE --out OUT --cache CACHE --quiet` (default `--jobs`: one worker per core), "
         "each in a fresh process. *Peak RSS* is the largest single process (getrusage of the children, or the "
         "20 ms sampler when getrusage cannot tell), *tree RSS* the sampled sum over the build and its workers, "
         "both from the memory rows (cold builds of their own, and the Rust server's own peak): the timed steps and "
         "the Rust server run without that sampler (it walks `/proc` every 20 ms, on a 2-core machine a share of the "
         "CPU that the build's processes, and the server's threads, compete for).", ""]
    rows = []
    for r in bd["rows"]:
        pct = f"{r['pct_of_full']:.1f} %" if "pct_of_full" in r else "–"
        every = ", ".join(f"{t:.2f}" for t in r.get("runs_s") or []) or "–"
        rows.append([r["bench"], secs(r["seconds"]), pct, every, mb(r.get("peak_rss")), mb(r.get("tree_rss"))])
    if bd.get("repeat", 1) > 1:
        L += [f"Each timed step ran {bd['repeat']} times, in rounds (cold build, unchanged rebuild, appended "
              "rebuild, Rust server; again): *time* is the fastest, every run's "
              "seconds are listed: this virtual machine's speed drifts by up to 2× from one minute to the next, in "
              "both directions for every program, so the fastest run is the one that measures the code, and each "
              "figure is sampled in the same minutes as the one it is divided by. Memory is "
              "the largest of the runs.", ""]
    L += _table(["step", "time", "% of full build", "every run (s)", "peak RSS", "tree RSS"], rows)
    if bd.get("appended"):
        ap = bd["appended"]
        L += [f"Append: {ap['records_each']:,} valid records (100 more steps × 10 tags, same layout) appended to "
              f"{ap['files']} files; the files are truncated back afterwards.", ""]
    if bd.get("rust_argv"):
        L += [f"Rust data server: `{bd['rust_argv']}`, start → every point fetched.", ""]
    by = {r["bench"]: r for r in bd["rows"]}
    full = by.get("full build, cold cache")
    unch = by.get("rebuild, unchanged")
    app = next((r for r in bd["rows"] if r["bench"].startswith("rebuild,") and "appended" in r["bench"]), None)
    rust = next((r for r in bd["rows"] if r["bench"].startswith("Rust")), None)
    mbase = next((r for r in bd["rows"] if r.get("mem_base")), None)
    big = next((r for r in bd["rows"] if r.get("mem_big")), None)
    if full and rust:
        checks.append([f"full build of ({a['runs']} runs) vs Rust server loading it", "build faster",
                       f"{secs(full['seconds'])} vs {secs(rust['seconds'])}", verdict(full["seconds"] < rust["seconds"])])
    if unch:
        checks.append(["unchanged rebuild", "≤ 5 % of full build", f"{unch['pct_of_full']:.1f} %", verdict(unch["pct_of_full"] <= 5)])
    if app:
        checks.append(["rebuild after appending to 3 files", "≤ 10 % of full build", f"{app['pct_of_full']:.1f} %",
                       verdict(app["pct_of_full"] <= 10)])
    if mbase and big:
        xt = big["tree_rss"] / mbase["tree_rss"]
        xs = big["peak_rss"] / mbase["peak_rss"] if big.get("peak_rss") and mbase.get("peak_rss") else float("nan")
        L += ["## Memory scaling", "",
              f"Peak memory of a cold build of a {mbase['runs']:,}-run archive vs {bd['copies']} copies of it side by side "
              f"({big['runs']:,} runs, projects renamed, same depth): tree RSS {mb(mbase['tree_rss'])} → "
              f"{mb(big['tree_rss'])} ({xt:.2f}×), largest process {mb(mbase.get('peak_rss'))} → "
              f"{mb(big.get('peak_rss'))} ({xs:.2f}×). Pick a base archive above sitegen's `MIN_PARALLEL_BYTES` "
              "(64 MB; `--mem-runs 100` or more here): below it the build runs in one process while the 4× build "
              "starts workers, which inflates the tree ratio.", ""]
        checks.append([f"memory, {bd['copies']}× a {mbase['runs']}-run archive vs the archive (tree RSS; largest "
                       f"process {xs:.2f}×)", "≤ 1.3×", f"{xt:.2f}×", verdict(xt <= 1.3)])
    return L


def _side_section(sd: dict, checks: list[list]) -> list[str]:
    """Two versions of sitegen timed in the same rounds (``bench_side_by_side.py``)."""
    t = sd["times"]
    lab = sd["labels"]
    n, big = sd["runs"], sd["scale_runs"]
    best = {k: min(v) for k, v in t.items()}
    med = {k: sorted(v)[len(v) // 2] for k, v in t.items()}
    L = ["## Side by side: this version and an earlier one", "",
         f"`python benchmarks/bench_side_by_side.py --base <checkout> --repeat {sd['repeat']}`: this checkout "
         f"({lab['this']}) and the checkout at {lab['base']}, each step timed {sd['repeat']} times in rounds (both "
         "versions in the same minutes, taking turns to go first, the disk synced and 3 s of rest before each version's steps and the Rust server; this machine's speed drifts by up to 2×). *best* is the fastest round, "
         "*median* the middle one; every round's seconds are listed. Archives: "
         f"{n} runs and {big:,} runs of the same shape (archive (b) below); appended rebuilds append 1,000 records to "
         f"3 files (truncated back afterwards). Load average: {sd['load_before'][0]:.1f} at start, "
         f"{sd['load_after'][0]:.1f} at end.", ""]
    rows = []
    for step in ("cold build", "unchanged rebuild", "appended rebuild", f"appended rebuild, {big} runs"):
        for who in ("base", "this"):
            k = f"{who}: {step}"
            if k in t:
                rows.append([step, lab[who], secs(best[k]), secs(med[k]), ", ".join(f"{x:.2f}" for x in t[k])])
    if "Rust data server" in t:
        k = "Rust data server"
        rows.append([f"Rust data server loading the {n}-run archive", "–", secs(best[k]), secs(med[k]),
                     ", ".join(f"{x:.2f}" for x in t[k])])
    L += _table(["step", "version", "best", "median", "every round (s)"], rows)
    for who in ("base", "this"):
        name = lab[who]
        cold, same, grown, grown_big = (f"{who}: cold build", f"{who}: unchanged rebuild", f"{who}: appended rebuild",
                                        f"{who}: appended rebuild, {big} runs")
        if cold in best and "Rust data server" in best:
            ok = best[cold] <= best["Rust data server"]
            checks.append([f"[{name}] cold {n}-run build vs Rust server", "no slower",
                           f"{secs(best[cold])} vs {secs(best['Rust data server'])} (medians {secs(med[cold])} vs "
                           f"{secs(med['Rust data server'])})", verdict(ok)])
        if same in best and cold in best:
            pct = 100 * best[same] / best[cold]
            checks.append([f"[{name}] unchanged rebuild", "≤ 5 % of a full build", f"{pct:.1f} %", verdict(pct <= 5)])
        if grown in best and grown_big in best:
            ratio = best[grown_big] / best[grown]
            checks.append([f"[{name}] appended rebuild, {big:,} vs {n} runs", "≤ 1.5×",
                           f"{secs(best[grown_big])} / {secs(best[grown])} = {ratio:.2f}× (medians "
                           f"{med[grown_big] / med[grown]:.2f}×)", verdict(ratio <= 1.5)])
    L.append("")
    return L


# Read in the page, not by polling it from here: the time of the first frame that paints a chart's
# lines (a poll answers only when the page is idle, after every chart it is busy drawing). The
# watch starts when the document is parsed (charts are drawn after that): watching the parse of
# 19,000 nodes would cost the page itself some 70 ms
FIRST_FRAME = """
document.addEventListener('DOMContentLoaded', function () {
  new MutationObserver(function (_, obs) {
    if (!document.querySelector('.chart.overlay svg g.smooth_marks path, .chart.overlay canvas')) return;
    obs.disconnect();
    requestAnimationFrame(function () { window.__firstChart = performance.now(); });
  }).observe(document.body, { subtree: true, childList: true });
}, { capture: true });
"""
