"""Real-writer logs for the fault tests (tensorboardX SummaryWriter, visualdl LogWriter)."""
from __future__ import annotations

import glob
import math
import struct
import warnings
from pathlib import Path

import numpy as np

from sitegen.ingest import tfevents, visualdl
from sitegen.ingest.protowire import encode_varint
from sitegen.ingest.tfevents.tfrecord import frame
from sitegen.model import ReadOptions


def small_png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3)).save(buf, format="PNG")
    return buf.getvalue()


def write_tbx(directory: Path, *, steps: int = 30, seed: int = 0) -> Path:
    """A ~3 KB tensorboardX file: two scalar tags per step, one text and one image record
    (``seed`` shifts the values, so that runs written with different seeds differ)."""
    from tensorboardX import SummaryWriter

    directory.mkdir(parents=True, exist_ok=True)
    w = SummaryWriter(str(directory), flush_secs=3600)
    for i in range(steps):
        w.add_scalar("train/loss", 1.0 / (i + 1 + seed), i, walltime=1_700_000_000 + i)
        w.add_scalar("train/acc", (i + seed) / (steps + seed), i, walltime=1_700_000_000 + i)
        if i == steps // 2:
            w.add_text("notes", f"halfway **{i}**", i, walltime=1_700_000_000 + i)
            w.add_image("sample", np.arange(48, dtype=np.uint8).reshape(3, 4, 4), i, walltime=1_700_000_000 + i)
    w.close()
    (path,) = glob.glob(str(directory / "*tfevents*"))
    return Path(path)


def write_metrics(directory: Path, first: int, steps: int, seed: int, start: float = 1_700_000_000) -> None:
    """``steps`` steps of eval/acc and train/loss from step ``first`` by tensorboardX; a writer
    opened again on a run's folder adds a file (the run grew). ``seed`` shifts both values up;
    ``start``: the wall time of step 0."""
    from tensorboardX import SummaryWriter

    directory.mkdir(parents=True, exist_ok=True)
    w = SummaryWriter(str(directory), flush_secs=3600, filename_suffix=f".{first}")
    for i in range(first, first + steps):
        w.add_scalar("eval/acc", 0.5 + 0.4 * i / 100 + 0.01 * seed, i, walltime=start + i)
        w.add_scalar("train/loss", 2.0 / (i + 1) + 0.01 * seed, i, walltime=start + i)
    w.close()


def write_vdl(directory: Path, *, steps: int = 30) -> Path:
    """A small VisualDL file: two scalar tags per step, one text and one image record."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from visualdl import LogWriter

    directory.mkdir(parents=True, exist_ok=True)
    with LogWriter(logdir=str(directory)) as w:
        for i in range(steps):
            w.add_scalar("train/loss", 1.0 / (i + 1), i, walltime=1_700_000_000_000 + i)
            w.add_scalar("train/acc", i / steps, i, walltime=1_700_000_000_000 + i)
            if i == steps // 2:
                w.add_text("notes", f"halfway **{i}**", i, walltime=1_700_000_000_000 + i)
                w.add_image("sample", np.arange(48, dtype=np.uint8).reshape(4, 4, 3), i, walltime=1_700_000_000_000 + i)
    (path,) = glob.glob(str(directory / "vdlrecords*"))
    return Path(path)


# ---- framing ---------------------------------------------------------------------------------


def tf_offsets(data: bytes) -> list[tuple[int, int]]:
    """(record offset, record size) of every record of an intact TFRecord file."""
    out, off = [], 0
    while off < len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        out.append((off, n + 16))
        off += n + 16
    assert off == len(data)
    return out


def vdl_offsets(data: bytes) -> list[tuple[int, int]]:
    out, off = [], 0
    while off < len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        out.append((off, n + 8))
        off += n + 8
    assert off == len(data)
    return out


def tf_record(payload: bytes) -> bytes:
    return frame(payload)


# ---- what a decode keeps, in a comparable form --------------------------------------------------


def _f(x: float):
    return "nan" if isinstance(x, float) and math.isnan(x) else x


def summary(run) -> dict:
    """Every decoded item of a RunData as plain tuples (NaN-safe), by kind."""
    s = run.scalars
    return {
        "scalars": list(zip(s["tag"].to_pylist(), s["step"].to_pylist(), map(_f, s["wall_time"].to_pylist()), map(_f, s["value"].to_pylist()))),
        "images": [(i.tag, i.step, i.data) for i in run.images],
        "texts": [(t.tag, t.step, t.text) for t in run.texts],
        "audio": [(a.tag, a.step, a.data) for a in run.audio],
        "histograms": [(h.tag, h.step, h.count.tolist()) for h in run.histograms],
        "hparams": sorted(run.hparams.items()),
    }


def items(run) -> list:
    """All decoded items as one flat list (order inside a kind kept)."""
    out = []
    for kind, vals in summary(run).items():
        out += [(kind, v) for v in vals]
    return out


def tf_decode(path: Path, *, fast: bool, verify: bool = True):
    return tfevents.decode_file(path, ReadOptions(fast=fast, verify=verify))


def vdl_decode(path: Path, *, fast: bool):
    return visualdl.decode_file(path, ReadOptions(fast=fast))


KINDS = ("scalars", "images", "texts", "audio", "histograms", "hparams")


def group(flat: list) -> list:
    """Items of several records in file order, grouped by kind as :func:`items` lists them."""
    return sorted(flat, key=lambda it: KINDS.index(it[0]))


def per_record_items(data: bytes, offsets: list[tuple[int, int]], decode, tmp: Path) -> list[list]:
    """What each record of the intact file contributes: every record decoded alone."""
    out = []
    p = tmp / "one-record"
    p.mkdir(exist_ok=True)
    one = p / "events.out.tfevents.0.one.vdlrecords"
    for off, size in offsets:
        one.write_bytes(data[off : off + size])
        run, _ = decode(one)
        assert run.problems == [], run.problems
        out.append(items(run))
    return out


# ---- raw records -----------------------------------------------------------------------------


def tf_scalar_payload(tag: str, step: int, value: float, wall: float) -> bytes:
    """An Event{wall_time, step, summary{value{tag, simple_value}}} built by hand."""
    t = tag.encode()
    val = b"\x0a" + encode_varint(len(t)) + t + b"\x15" + struct.pack("<f", value)
    summ = b"\x0a" + encode_varint(len(val)) + val
    return b"\x09" + struct.pack("<d", wall) + (b"\x10" + encode_varint(step) if step else b"") + b"\x2a" + encode_varint(len(summ)) + summ


def tf_file(records: list[tuple[str, int, float, float]]) -> bytes:
    """Scalar events ``(tag, step, value, wall time)``, framed as TFRecords."""
    return b"".join(tf_record(tf_scalar_payload(*r)) for r in records)


def append_scalars(path: Path, tag: str, steps: range) -> int:
    """Append a scalar event of ``tag`` per step to the event file ``path``, as a writer that is
    still running adds its next records; the file's size before."""
    size = path.stat().st_size
    with path.open("ab") as f:
        f.write(tf_file([(tag, s, 1.0 / (s + 1), 1_700_000_000.0 + s) for s in steps]))
    return size


def write_mlflow(root: Path, metric_lines: bytes = b"1700000000000 0.5 0\n1700000001000 0.25 1\n", *, run_id: str = "0123456789abcdef0123456789abcdef",
                 run_name: str = "mlrun", params: dict[str, str] | None = None) -> Path:
    """A minimal MLflow file store (mlruns/1/<run>) with one metric file ``loss``."""
    exp = root / "mlruns" / "1"
    run = exp / run_id
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    (run / "params").mkdir(exist_ok=True)
    (run / "tags").mkdir(exist_ok=True)
    (exp / "meta.yaml").write_text(f"artifact_location: file://{exp}\nexperiment_id: '1'\nlifecycle_stage: active\nname: exp\n")
    (run / "meta.yaml").write_text(
        f"artifact_uri: file://{run}/artifacts\nend_time: 1700000100000\nexperiment_id: '1'\nlifecycle_stage: active\n"
        f"run_id: {run_id}\nrun_name: {run_name}\nrun_uuid: {run_id}\nsource_type: 4\nstart_time: 1700000000000\nstatus: 3\n"
    )
    (run / "metrics" / "loss").write_bytes(metric_lines)
    for k, v in (params or {"lr": "0.1"}).items():
        (run / "params" / k).write_text(v)
    return run


def _ld(field: int, body: bytes) -> bytes:
    n, out = len(body), bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            break
    return bytes([field << 3 | 2]) + bytes(out) + body


def tf_audio_record(tag: str, wav: bytes, step: int = 1, wall: float = 1.7e9) -> bytes:
    """An Event carrying Summary.Value{tag, audio{sample_rate 8000, encoded_audio_string}}."""
    audio = b"\x0d" + struct.pack("<f", 8000.0) + _ld(4, wav) + _ld(5, b"audio/wav")
    value = _ld(1, tag.encode()) + _ld(6, audio)
    event = b"\x09" + struct.pack("<d", wall) + bytes([0x10, step]) + _ld(5, _ld(1, value))
    return tf_record(event)


def wav(samples: int) -> bytes:
    import io
    import wave

    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\0\0" * samples)
    return buf.getvalue()
