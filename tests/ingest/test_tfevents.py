"""Decoded TensorBoard event files vs TensorBoard's own legacy reader (EventAccumulator).

Every archive here is written by the tests themselves, with tensorboardX's ``SummaryWriter`` and
with TensorBoard's own ``EventFileWriter`` + protos (TF2-style tensor scalars, TF1-style merged
summaries). For each run, every scalar series that EventAccumulator returns (``Scalars(tag)``, or
``Tensors(tag)`` for tensor scalars of the ``scalars`` plugin) is compared value by value, as
float64 bit patterns, with the rows :func:`sitegen.read_scalars` returns for that run and tag.
Non-scalar kinds are compared through :func:`sitegen.read_run`.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import struct
import sys
import tempfile
import types
import wave
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard import data_compat
from tensorboard.backend.event_processing import event_accumulator as ea_mod
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
from tensorboard.plugins.hparams import plugin_data_pb2 as hparams_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util
from tensorboardX import SummaryWriter

import sitegen

BASE = 1_700_000_000.0  # fixed wall times for everything the tests write
EVERYTHING = {kind: 0 for kind in ea_mod.STORE_EVERYTHING_SIZE_GUIDANCE}


# ---------------------------------------------------------------------------------------------
# Reference side: TensorBoard's EventAccumulator, and a run walk independent of sitegen.


def load_ea(run_dir: Path) -> EventAccumulator:
    ea = EventAccumulator(str(run_dir), size_guidance=EVERYTHING, purge_orphaned_data=False)
    ea.Reload()
    return ea


def plugin_of(ea: EventAccumulator, tag: str) -> str:
    md = ea.summary_metadata.get(tag)
    return md.plugin_data.plugin_name if md is not None else ""


def tb_scalars(ea: EventAccumulator) -> dict[str, list[tuple[int, float, float]]]:
    """tag -> [(step, wall_time, value)] for simple_value scalars and scalar-plugin tensors."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    tags = ea.Tags()
    for tag in tags[ea_mod.SCALARS]:
        out[tag] = [(e.step, e.wall_time, e.value) for e in ea.Scalars(tag)]
    for tag in tags[ea_mod.TENSORS]:
        if plugin_of(ea, tag) != "scalars":
            continue
        rows = []
        for e in ea.Tensors(tag):
            arr = tensor_util.make_ndarray(e.tensor_proto)
            assert arr.size == 1, (tag, arr.shape)
            rows.append((e.step, e.wall_time, float(arr.reshape(-1)[0])))
        assert tag not in out
        out[tag] = rows
    return out


def run_dirs(root: Path) -> dict[str, Path]:
    """Run name -> directory: every directory that directly holds a ``*tfevents*`` file."""
    runs = {}
    for d, _, files in os.walk(root):
        if any("tfevents" in f for f in files):
            rel = Path(d).relative_to(root).as_posix()
            runs[rel if rel != "" else "."] = Path(d)
    return runs


def tb_archive(root: Path) -> dict[tuple[str, str], list[tuple[int, float, float]]]:
    out = {}
    for run, d in run_dirs(root).items():
        for tag, rows in tb_scalars(load_ea(d)).items():
            out[(run, tag)] = rows
    return out


# ---------------------------------------------------------------------------------------------
# Side under test.


def sitegen_archive(root: Path) -> dict[tuple[str, str], list[tuple[int, float, float]]]:
    table = sitegen.read_scalars(root)
    assert isinstance(table, pa.Table)
    assert table.schema.names == ["run", "tag", "step", "wall_time", "value"]
    assert table.schema.field("run").type == pa.string()
    assert table.schema.field("tag").type == pa.string()
    assert table.schema.field("step").type == pa.int64()
    assert table.schema.field("wall_time").type == pa.float64()
    assert table.schema.field("value").type == pa.float64()
    out: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    cols = table.to_pydict()
    for run, tag, step, wall, value in zip(cols["run"], cols["tag"], cols["step"], cols["wall_time"], cols["value"]):
        out.setdefault((run, tag), []).append((step, wall, value))
    return out


def bits(xs) -> list[int]:
    return np.asarray(list(xs), dtype=np.float64).view(np.uint64).tolist()


def assert_series_equal(actual, expected, where) -> None:
    assert len(actual) == len(expected), (where, len(actual), len(expected))
    assert [r[0] for r in actual] == [r[0] for r in expected], where
    assert bits(r[1] for r in actual) == bits(r[1] for r in expected), where
    assert bits(r[2] for r in actual) == bits(r[2] for r in expected), where


def assert_matches_tensorboard(root: Path) -> dict:
    """Every (run, tag) series of sitegen equals EventAccumulator's; returns the reference."""
    expected = tb_archive(root)
    actual = sitegen_archive(root)
    assert sorted(actual) == sorted(expected)
    for key in expected:
        assert_series_equal(actual[key], expected[key], key)
    return expected


def f32(x: float) -> float:
    """What a simple_value / DT_FLOAT holds after the writer's cast, widened back."""
    return float(np.float32(x))


# ---------------------------------------------------------------------------------------------
# Writers.


def tbx_writer(run_dir: Path, **kw) -> SummaryWriter:
    return SummaryWriter(logdir=str(run_dir), flush_secs=3600, **kw)


def tb_write(run_dir: Path, events: list[event_pb2.Event]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    w = EventFileWriter(str(run_dir))
    for ev in events:
        w.add_event(ev)
    w.close()


def scalars_metadata() -> summary_pb2.SummaryMetadata:
    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )


def tensor_event(tag: str, step: int, wall: float, tensor: tensor_pb2.TensorProto) -> event_pb2.Event:
    value = summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=scalars_metadata())
    return event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[value]))


def rank0() -> tensor_shape_pb2.TensorShapeProto:
    return tensor_shape_pb2.TensorShapeProto()


TENSOR_STYLES = {
    # TF2 tf.summary.scalar: DT_FLOAT, present empty shape, 4 bytes of tensor_content
    "f32_content": lambda v: tensor_pb2.TensorProto(
        dtype=types_pb2.DT_FLOAT, tensor_shape=rank0(), tensor_content=np.float32(v).tobytes()
    ),
    # torch add_scalar(new_style=True): DT_FLOAT float_val, no shape
    "f32_val": lambda v: tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[v]),
    # torch add_scalar(new_style=True, double_precision=True): DT_DOUBLE double_val
    "f64_val": lambda v: tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, double_val=[v]),
    "f64_content": lambda v: tensor_pb2.TensorProto(
        dtype=types_pb2.DT_DOUBLE, tensor_shape=rank0(), tensor_content=np.float64(v).tobytes()
    ),
}

SPECIAL_VALUES = [0.5, float("nan"), float("inf"), float("-inf"), 0.1, -3.25e-8, 1.0 / 3.0, 0.0, -0.0, 6.02e23]
SPECIAL_STEPS = [0, 1, -5, 127, 128, 16384, 2**31, -(2**40), 2**62, 7]
LONG_TAG = "metrics/" + "very_long_segment/" * 8 + "value"  # well over 127 bytes
CHINESE_TAG = "训练/损失"


@pytest.fixture
def soundfile_available(monkeypatch):
    """tensorboardX's add_audio encodes WAV with ``soundfile``; stand in with the stdlib if absent
    (16-bit PCM, what soundfile writes for format='wav' by default)."""
    try:
        import soundfile  # noqa: F401

        return
    except ImportError:
        pass

    def write(file, data, samplerate, format="wav", **_kw):  # noqa: A002
        data = np.asarray(data, dtype=np.float64)
        if data.ndim == 1:
            data = data[:, None]
        pcm = np.clip(np.round(data * 32767.0), -32768, 32767).astype("<i2")
        with wave.open(file, "wb") as w:
            w.setnchannels(data.shape[1])
            w.setsampwidth(2)
            w.setframerate(int(samplerate))
            w.writeframes(pcm.tobytes())

    shim = types.ModuleType("soundfile")
    shim.write = write
    monkeypatch.setitem(sys.modules, "soundfile", shim)


def record_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each complete TFRecord, by walking the length fields."""
    spans, off = [], 0
    while off + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        end = off + 16 + n
        if end > len(data):
            break
        spans.append((off, end))
        off = end
    return spans


def only_event_file(run_dir: Path) -> Path:
    files = [p for p in run_dir.iterdir() if p.is_file() and "tfevents" in p.name]
    assert len(files) == 1, files
    return files[0]


# ---------------------------------------------------------------------------------------------
# Scalars: tensorboardX.


def test_tensorboardx_scalars_special_values_steps_and_tags(tmp_path):
    run = tmp_path / "run"
    written: dict[str, list[tuple[int, float, float]]] = {}
    with tbx_writer(run) as w:
        for i, (step, value) in enumerate(zip(SPECIAL_STEPS, SPECIAL_VALUES)):
            for tag in ("loss", LONG_TAG, CHINESE_TAG):
                wall = BASE + i * 1.25 + len(tag) / 1000
                w.add_scalar(tag, value, step, walltime=wall)
                written.setdefault(tag, []).append((step, wall, f32(value)))
        # a scalar with metadata (display name): a different record layout
        w.add_scalar("acc", 0.75, 3, walltime=BASE + 99.5, display_name="Accuracy", summary_description="top-1")
        written["acc"] = [(3, BASE + 99.5, f32(0.75))]

    expected = assert_matches_tensorboard(tmp_path)
    # and both agree with what was written (f32 values, exact steps and wall times)
    assert sorted(expected) == sorted(("run", t) for t in written)
    for tag, rows in written.items():
        assert_series_equal(expected[("run", tag)], rows, tag)
    assert len(LONG_TAG.encode()) > 127 and ("run", LONG_TAG) in expected


def test_path_that_is_itself_a_run_is_named_dot(tmp_path):
    with tbx_writer(tmp_path) as w:
        for step in range(5):
            w.add_scalar("x", step * 0.5, step, walltime=BASE + step)
    expected = assert_matches_tensorboard(tmp_path)
    assert list(expected) == [(".", "x")]
    table = sitegen.read_scalars(tmp_path)
    assert set(table.column("run").to_pylist()) == {"."}
    assert table.column("step").to_pylist() == list(range(5))


def test_many_runs_nested_and_interleaved(tmp_path):
    # runs nest: a/ and a/b/ are two runs; records of one run keep their file order
    rng = np.random.default_rng(0)
    written_order = {}
    for run in ("a", "a/b", "c/d/e"):
        order = []
        with tbx_writer(tmp_path / run) as w:
            for step in range(30):
                for tag in ("train/loss", "train/lr", "eval/acc"):
                    if tag == "eval/acc" and step % 5:
                        continue
                    v = float(rng.normal())
                    wall = BASE + step + rng.random()
                    w.add_scalar(tag, v, step, walltime=wall)
                    order.append((tag, step, bits([wall])[0], bits([f32(v)])[0]))
        written_order[run] = order
    assert_matches_tensorboard(tmp_path)
    cols = sitegen.read_scalars(tmp_path).to_pydict()
    for run, order in written_order.items():
        got = [
            (t, s, bits([wt])[0], bits([v])[0])
            for r, t, s, wt, v in zip(cols["run"], cols["tag"], cols["step"], cols["wall_time"], cols["value"])
            if r == run
        ]
        assert got == order, run  # every record, in file order


def test_restart_two_files_read_in_name_order(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    names = ["events.out.tfevents.1700000100.host", "events.out.tfevents.1700000200.host"]
    # write the later-named file FIRST (so neither mtime nor creation order matches name order)
    steps = {names[0]: range(0, 10), names[1]: range(5, 15)}  # restart from a checkpoint at 5
    for name in reversed(names):
        scratch = tmp_path / "scratch"
        with tbx_writer(scratch) as w:
            for step in steps[name]:
                w.add_scalar("loss", 1.0 / (step + 1) + (name == names[1]), step, walltime=BASE + step)
        only_event_file(scratch).rename(run / name)
        shutil.rmtree(scratch)
    expected = assert_matches_tensorboard(tmp_path)
    rows = expected[("run", "loss")]
    # no purge, no dedup: 0..9 from the first file then 5..14 from the second
    assert [r[0] for r in rows] == list(range(0, 10)) + list(range(5, 15))
    assert bits(r[2] for r in rows) == bits(
        [f32(1.0 / (s + 1)) for s in range(10)] + [f32(1.0 / (s + 1) + 1) for s in range(5, 15)]
    )


def test_sub_runs_from_add_scalars_and_add_hparams(tmp_path):
    r1 = tmp_path / "r1"
    with tbx_writer(r1) as w:
        for step in range(0, 50, 5):
            wall = BASE + step
            w.add_scalar("train/loss", 2.0 / (step + 1), step, walltime=wall)
            w.add_scalars("loss", {"train": 2.0 / (step + 1), "val": 2.5 / (step + 1)}, step, walltime=wall)
        w.add_hparams({"lr": 0.01, "batch_size": 32, "optimizer": "adam", "amp": True},
                      {"hparam/accuracy": 0.875, "hparam/loss": 0.25})
    subdirs = sorted(p.name for p in r1.iterdir() if p.is_dir())
    hp = [d for d in subdirs if d != "loss"]
    assert len(hp) == 1, subdirs  # the timestamp directory add_hparams made
    expected = assert_matches_tensorboard(tmp_path)
    assert set(expected) == {
        ("r1", "train/loss"),
        ("r1/loss/train", "loss"),
        ("r1/loss/val", "loss"),
        (f"r1/{hp[0]}", "hparam/accuracy"),
        (f"r1/{hp[0]}", "hparam/loss"),
    }
    assert bits(r[2] for r in expected[("r1/loss/val", "loss")]) == bits(f32(2.5 / (s + 1)) for s in range(0, 50, 5))
    assert bits([expected[(f"r1/{hp[0]}", "hparam/accuracy")][0][2]]) == bits([0.875])

    # the same run read from inside: the run itself is ".", sub-runs keep their relative path
    inner = sitegen.read_scalars(r1)
    assert set(inner.column("run").to_pylist()) == {".", "loss/train", "loss/val", hp[0]}


# ---------------------------------------------------------------------------------------------
# Scalars: TensorBoard's own writer (TF2 tensor scalars, TF1 merged summaries).


@pytest.mark.parametrize("style", sorted(TENSOR_STYLES))
def test_tensor_scalars(tmp_path, style):
    make = TENSOR_STYLES[style]
    events = []
    for i, (step, value) in enumerate(zip(SPECIAL_STEPS, SPECIAL_VALUES)):
        for tag in ("loss", LONG_TAG, CHINESE_TAG):
            events.append(tensor_event(tag, step, BASE + i / 3 + len(tag), make(value)))
    tb_write(tmp_path / "tf2", events)
    expected = assert_matches_tensorboard(tmp_path)
    assert sorted(expected) == sorted(("tf2", t) for t in ("loss", LONG_TAG, CHINESE_TAG))
    cast = float if style.startswith("f64") else f32  # doubles keep their precision
    for tag in ("loss", LONG_TAG, CHINESE_TAG):
        rows = expected[("tf2", tag)]
        assert [r[0] for r in rows] == SPECIAL_STEPS
        assert bits(r[2] for r in rows) == bits(cast(v) for v in SPECIAL_VALUES)


def test_tf1_many_values_in_one_summary(tmp_path):
    rng = np.random.default_rng(1)
    events, written = [], {}
    for step in range(-3, 40, 4):
        values = []
        for tag in ("loss", "acc", LONG_TAG, CHINESE_TAG):
            v = float(rng.normal()) if step != 13 else float("nan")
            values.append(summary_pb2.Summary.Value(tag=tag, simple_value=v))
            written.setdefault(tag, []).append((step, BASE + step * 0.5, f32(v)))
        # a TF2-style tensor scalar and a histogram in the same event: only the scalar counts
        values.append(summary_pb2.Summary.Value(tag="lr", tensor=TENSOR_STYLES["f32_content"](0.001 * step),
                                                metadata=scalars_metadata()))
        written.setdefault("lr", []).append((step, BASE + step * 0.5, f32(0.001 * step)))
        histo = summary_pb2.HistogramProto(min=-1, max=1, num=4, sum=0, sum_squares=2,
                                           bucket_limit=[-0.5, 0.5, 1.0], bucket=[1, 2, 1])
        values.append(summary_pb2.Summary.Value(tag="w", histo=histo))
        events.append(event_pb2.Event(wall_time=BASE + step * 0.5, step=step,
                                      summary=summary_pb2.Summary(value=values)))
    tb_write(tmp_path / "tf1", events)
    expected = assert_matches_tensorboard(tmp_path)
    assert sorted(expected) == sorted(("tf1", t) for t in written)
    for tag, rows in written.items():
        assert_series_equal(expected[("tf1", tag)], rows, tag)


def test_tensorboardx_and_tf2_files_in_one_archive(tmp_path):
    with tbx_writer(tmp_path / "tbx") as w:
        for step in range(20):
            w.add_scalar("loss", math.exp(-step / 7), step, walltime=BASE + step)
    tb_write(tmp_path / "tf2", [tensor_event("loss", s, BASE + s, TENSOR_STYLES["f32_content"](s / 7)) for s in range(20)])
    expected = assert_matches_tensorboard(tmp_path)
    assert set(expected) == {("tbx", "loss"), ("tf2", "loss")}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["loss", "a/b/c", CHINESE_TAG, LONG_TAG, "x" * 200]),
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            st.floats(min_value=0, max_value=4e9, allow_nan=False),
            st.floats(width=32),
            st.booleans(),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_property_random_records(records):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        events = []
        for tag, step, wall, value, tensor in records:
            tag = tag + ("/t" if tensor else "")  # a tag's kind stays the same
            if tensor:
                events.append(tensor_event(tag, step, wall, TENSOR_STYLES["f32_content"](value)))
            else:
                v = summary_pb2.Summary.Value(tag=tag, simple_value=value)
                events.append(event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[v])))
        tb_write(root / "run", events)
        expected = assert_matches_tensorboard(root)
        assert sum(len(r) for r in expected.values()) == len(records)


# ---------------------------------------------------------------------------------------------
# Damage.


def write_damage_run(run: Path) -> None:
    rng = np.random.default_rng(2)
    with tbx_writer(run) as w:
        for step in range(40):
            w.add_scalar("loss", float(rng.normal()), step, walltime=BASE + step)
            w.add_scalar("acc", float(rng.random()), step, walltime=BASE + step + 0.5)


def test_truncated_tail(tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    write_damage_run(whole / "run")
    shutil.copytree(whole, cut)
    path = only_event_file(cut / "run")
    data = path.read_bytes()
    start, end = record_spans(data)[-1]
    path.write_bytes(data[: start + (end - start) // 2])  # the last record cut in half

    got = assert_matches_tensorboard(cut)  # EventAccumulator stops at the partial record
    # ... which is exactly the undamaged file minus its last record
    reference = tb_archive(whole)
    last = event_pb2.Event.FromString(data[start + 12 : end - 4])
    (lost,) = last.summary.value
    reference[("run", lost.tag)] = [r for r in reference[("run", lost.tag)] if r[0] != last.step]
    assert sorted(got) == sorted(reference)
    for key in reference:
        assert_series_equal(got[key], reference[key], key)
    assert sum(map(len, got.values())) == 79
    assert sitegen.read_run(cut / "run").problems  # reported, not raised


@pytest.mark.parametrize("where", ["payload", "length"])
def test_flipped_byte_in_the_middle(tmp_path, where):
    whole, bad = tmp_path / "whole", tmp_path / "bad"
    write_damage_run(whole / "run")
    shutil.copytree(whole, bad)
    path = only_event_file(bad / "run")
    data = bytearray(path.read_bytes())
    spans = record_spans(bytes(data))
    k = len(spans) // 2
    start, end = spans[k]
    damaged = event_pb2.Event.FromString(bytes(data[start + 12 : end - 4]))
    flip_at = start + 12 + (end - start - 16) // 2 if where == "payload" else start
    data[flip_at] ^= 0x5A
    path.write_bytes(bytes(data))

    # EventAccumulator stops at the damage; the project's reader skips just that record and
    # keeps every record after it: compare with the undamaged file minus the damaged record.
    expected = tb_archive(whole)
    (lost,) = damaged.summary.value
    key = ("run", lost.tag)
    before = len(expected[key])
    expected[key] = [r for r in expected[key] if r[0] != damaged.step]
    assert len(expected[key]) == before - 1
    actual = sitegen_archive(bad)
    assert sorted(actual) == sorted(expected)
    for key in expected:
        assert_series_equal(actual[key], expected[key], key)
    assert sum(map(len, actual.values())) == 79
    # records after the damage are there (the last one written included)
    assert actual[("run", "acc")][-1][0] == 39
    assert sitegen.read_run(bad / "run").problems


# ---------------------------------------------------------------------------------------------
# Non-scalar kinds through read_run.


def write_media_run(run: Path) -> dict:
    rng = np.random.default_rng(3)
    cfg = {"lr": 0.003, "batch_size": 64, "optimizer": "adamw", "layers": [64, 128], "名前": "試験"}
    with tbx_writer(run) as w:
        w.add_text("hyperparameters/config", json.dumps(cfg, ensure_ascii=False), 0, walltime=BASE)
        w.add_text("notes", "# Notes\n\n*first* run, `lr` **warm-up**\n\n| a | b |\n|---|---|\n| 1 | 2 |", 0,
                   walltime=BASE + 0.5)
        w.add_text("notes", "第二步：继续训练", 10, walltime=BASE + 10.5)
        for step in (0, 10, 20):
            rgb = (rng.random((3, 8, 12)) * 255).astype(np.uint8)
            w.add_image("samples/rgb", rgb, step, walltime=BASE + step + 0.1)
            gray = rng.random((1, 6, 5)).astype(np.float32)
            w.add_image("samples/gray", gray, step, walltime=BASE + step + 0.2)
            w.add_histogram("weights/layer1", rng.normal(0, 1 + step / 10, 500), step, walltime=BASE + step + 0.3)
            w.add_histogram("weights/head", rng.uniform(-1, 1, 300), step, bins=20, walltime=BASE + step + 0.4)
        for step in (5, 15):
            clip = 0.5 * np.sin(np.linspace(0, 40 * np.pi, 800)) * (step / 15)
            w.add_audio("samples/audio", clip, step, sample_rate=8000, walltime=BASE + step + 0.6)
        labels = rng.integers(0, 2, 200)
        w.add_pr_curve("eval/pr", labels, np.clip(labels * 0.4 + rng.random(200) * 0.6, 0, 1), 20,
                       num_thresholds=33, walltime=BASE + 21)
    return cfg


@pytest.fixture
def media_run(tmp_path, soundfile_available) -> tuple[Path, dict]:
    return tmp_path, write_media_run(tmp_path)


def test_images_match_tensorboard(media_run):
    tmp_path, _ = media_run
    ea, rd = load_ea(tmp_path), sitegen.read_run(tmp_path)
    tags = ea.Tags()[ea_mod.IMAGES]
    assert sorted(tags) == ["samples/gray", "samples/rgb"]
    assert sorted({im.tag for im in rd.images}) == sorted(tags)
    for tag in tags:
        ref = ea.Images(tag)
        got = [im for im in rd.images if im.tag == tag]
        assert len(got) == len(ref) == 3
        for g, r in zip(got, ref):
            assert g.step == r.step and bits([g.wall_time]) == bits([r.wall_time])
            assert g.data == r.encoded_image_string
            assert (g.width, g.height) == (r.width, r.height)
            assert g.mime == "image/png"


def test_texts_match_tensorboard(media_run):
    tmp_path, cfg = media_run
    ea, rd = load_ea(tmp_path), sitegen.read_run(tmp_path)
    tags = [t for t in ea.Tags()[ea_mod.TENSORS] if plugin_of(ea, t) == "text"]
    assert sorted(tags) == ["hyperparameters/config/text_summary", "notes/text_summary"]
    assert sorted({t.tag for t in rd.texts}) == sorted(tags)  # the tag as written
    for tag in tags:
        ref = ea.Tensors(tag)
        got = [t for t in rd.texts if t.tag == tag]
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            arr = tensor_util.make_ndarray(r.tensor_proto)
            assert arr.shape == (1,)
            assert g.step == r.step and bits([g.wall_time]) == bits([r.wall_time])
            assert g.text == arr[0].decode("utf-8")
    (config,) = [t for t in rd.texts if t.tag == "hyperparameters/config/text_summary"]
    assert json.loads(config.text) == cfg
    assert [t.text for t in rd.texts if t.tag == "notes/text_summary"][1] == "第二步：继续训练"


def tf2_text(tag: str, step: int, text: str, shape: list[int], cells: list[str]) -> event_pb2.Event:
    md = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=n) for n in shape]),
        string_val=[c.encode() for c in cells],
    )
    return event_pb2.Event(wall_time=BASE + step, step=step,
                           summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=md)]))


def test_tf2_rank0_text(tmp_path):
    tb_write(tmp_path, [tf2_text("notes", s, "", [], [f"step **{s}** 好"]) for s in (0, 3, 9)])
    ea, rd = load_ea(tmp_path), sitegen.read_run(tmp_path)
    ref = ea.Tensors("notes")
    assert [t.tag for t in rd.texts] == ["notes"] * 3
    for g, r in zip(rd.texts, ref):
        assert g.step == r.step
        assert g.text == tensor_util.make_ndarray(r.tensor_proto).item().decode()


def expected_histogram_rows(h) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TensorBoard's legacy->tensor conversion (data_compat), in float64: empty buckets at both
    ends dropped, first left edge = min, last right edge = max."""
    counts = list(h.bucket)
    nonzero = [i for i, c in enumerate(counts) if c > 0]
    start, end = nonzero[0], nonzero[-1]
    inner = list(h.bucket_limit[start:end])
    return np.array([h.min] + inner), np.array(inner + [h.max]), np.array(counts[start : end + 1], dtype=np.float64)


def test_histograms_match_tensorboard(media_run):
    tmp_path, _ = media_run
    ea, rd = load_ea(tmp_path), sitegen.read_run(tmp_path)
    tags = ea.Tags()[ea_mod.HISTOGRAMS]
    assert sorted(tags) == ["weights/head", "weights/layer1"]
    assert sorted({h.tag for h in rd.histograms}) == sorted(tags)
    for tag in tags:
        ref = ea.Histograms(tag)
        got = [h for h in rd.histograms if h.tag == tag]
        assert len(got) == len(ref) == 3
        for g, r in zip(got, ref):
            hv = r.histogram_value
            assert g.step == r.step and bits([g.wall_time]) == bits([r.wall_time])
            left, right, count = expected_histogram_rows(hv)
            assert np.array_equal(np.asarray(g.count), count)  # bucket counts equal
            assert float(np.sum(g.count)) == hv.num == sum(hv.bucket)
            assert bits(np.asarray(g.left)) == bits(left)
            assert bits(np.asarray(g.right)) == bits(right)
            # TensorBoard's own conversion (which rounds to float32) agrees
            proto = summary_pb2.Summary.Value(tag=tag, histo=summary_pb2.HistogramProto(
                min=hv.min, max=hv.max, num=hv.num, sum=hv.sum, sum_squares=hv.sum_squares,
                bucket_limit=hv.bucket_limit, bucket=hv.bucket))
            rows = tensor_util.make_ndarray(data_compat.migrate_value(proto).tensor)
            mine = np.stack([g.left, g.right, g.count], axis=1).astype(np.float32)
            assert np.array_equal(mine, rows)


def test_tf2_tensor_histogram(tmp_path):
    rows = np.array([[-1.0, -0.25, 3], [-0.25, 0.5, 0], [0.5, 2.0, 7]], dtype=np.float64)
    md = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="histograms"))
    events = [
        event_pb2.Event(wall_time=BASE + s, step=s, summary=summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag="w", metadata=md, tensor=tensor_util.make_tensor_proto(rows * (s + 1)))]))
        for s in range(3)
    ]
    tb_write(tmp_path, events)
    ea, rd = load_ea(tmp_path), sitegen.read_run(tmp_path)
    ref = ea.Tensors("w")
    assert len(rd.histograms) == len(ref) == 3
    for g, r in zip(rd.histograms, ref):
        arr = tensor_util.make_ndarray(r.tensor_proto)
        assert g.tag == "w" and g.step == r.step
        assert np.array_equal(np.stack([g.left, g.right, g.count], axis=1), arr)


def test_audio_matches_tensorboard(media_run):
    tmp_path, _ = media_run
    ea, rd = load_ea(tmp_path), sitegen.read_run(tmp_path)
    assert ea.Tags()[ea_mod.AUDIO] == ["samples/audio"]
    ref = ea.Audio("samples/audio")
    assert len(rd.audio) == len(ref) == 2
    for g, r in zip(rd.audio, ref):
        assert g.tag == "samples/audio" and g.step == r.step
        assert bits([g.wall_time]) == bits([r.wall_time])
        assert g.data == r.encoded_audio_string and g.data[:4] == b"RIFF"
        assert g.mime == r.content_type == "audio/wav"
        assert g.sample_rate == r.sample_rate == 8000


def test_pr_curve_matches_tensorboard(media_run):
    tmp_path, _ = media_run
    ea, rd = load_ea(tmp_path), sitegen.read_run(tmp_path)
    (ref,) = ea.Tensors("eval/pr")
    arr = tensor_util.make_ndarray(ref.tensor_proto)
    assert arr.shape == (6, 33)
    (curve,) = rd.curves
    assert (curve.kind, curve.tag, curve.step) == ("pr", "eval/pr", 20)
    for i, name in enumerate(("tp", "fp", "tn", "fn", "precision", "recall")):
        assert bits(np.asarray(curve.columns[name])) == bits(arr[i].astype(np.float64)), name


def test_hparams_match_what_add_hparams_wrote(tmp_path):
    hp = {"lr": 0.0003, "batch_size": 64, "optimizer": "adamw", "amp": False, "dropout": 0.1}
    metrics = {"hparam/accuracy": 0.91, "hparam/eval_loss": 0.33}
    with tbx_writer(tmp_path / "run") as w:
        w.add_scalar("loss", 1.0, 1, walltime=BASE)
        w.add_hparams(hp, metrics)
    (sub,) = [p for p in (tmp_path / "run").iterdir() if p.is_dir()]
    rd = sitegen.read_run(sub)
    assert rd.hparams == {k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                          for k, v in hp.items()}
    assert type(rd.hparams["amp"]) is bool and type(rd.hparams["optimizer"]) is str
    assert rd.hparam_metrics == list(metrics)

    # ... and what TensorBoard decodes from the same plugin data
    ea = load_ea(sub)
    content = ea.PluginTagToContent("hparams")
    start = hparams_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    ref = {k: getattr(v, v.WhichOneof("kind")) for k, v in start.session_start_info.hparams.items()}
    assert rd.hparams == ref
    exp = hparams_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert rd.hparam_metrics == [m.name.tag for m in exp.metric_infos]
    # the metric values are ordinary scalars of the sub-run
    assert_matches_tensorboard(tmp_path)
    got = sitegen.read_scalars(sub).to_pydict()
    assert dict(zip(got["tag"], got["value"])) == {k: f32(v) for k, v in metrics.items()}
