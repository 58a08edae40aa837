"""Tests of the VisualDL reader against logs written by the real ``visualdl.LogWriter`` (2.5.3) and
read back with ``visualdl.LogReader`` and visualdl's generated protobuf code."""
from __future__ import annotations

import math
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from visualdl import LogReader, LogWriter
from visualdl.proto import record_pb2

from sitegen.ingest import visualdl as vdl
from sitegen.ingest.visualdl import fast as _vdlfast
from sitegen.model import ReadOptions, RunSource

OPTS = ReadOptions()


# --------------------------------------------------------------------------- helpers


def decode(path, options=OPTS, **kw):
    return vdl.decode_file(path, options, **kw)[0]


def f32bits(x) -> int:
    return int(np.array([x], np.float32).view(np.uint32)[0])


def wall(ts: int) -> float:
    return float(ts) if ts < 2_000_000_000 else float(ts) / 1000.0


def framed(path: Path) -> list[tuple[int, int, record_pb2.Record]]:
    """(offset, end, Record) of every record of an intact file, parsed by visualdl's own proto."""
    data = path.read_bytes()
    out, off = [], 0
    while off < len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        rec = record_pb2.Record()
        rec.ParseFromString(data[off + 8 : off + 8 + n])
        out.append((off, off + 8 + n, rec))
        off += 8 + n
    assert off == len(data)
    return out


def expected_scalars(records) -> list[tuple]:
    rows = []
    for _, _, rec in records:
        for v in rec.values:
            kind = v.WhichOneof("one_value")
            if kind == "value":
                rows.append((v.tag, v.id, wall(v.timestamp), f32bits(v.value)))
            elif kind == "tag_value":
                rows.append((f"{v.tag}/{v.tag_value.tag}", v.id, wall(v.timestamp), f32bits(v.tag_value.value)))
    return rows


def our_scalars(run) -> list[tuple]:
    t = run.scalars.to_pydict()
    return [(a, b, c, f32bits(d)) for a, b, c, d in zip(t["tag"], t["step"], t["wall_time"], t["value"])]


def assert_same_run(a, b) -> None:
    """Two decodes of the same bytes agree on everything."""
    assert a.scalars.schema == b.scalars.schema
    assert our_scalars(a) == our_scalars(b)  # (NaN-safe: values compared as float32 bits)
    assert [(i.tag, i.step, i.wall_time, i.data, i.mime) for i in a.images] == [
        (i.tag, i.step, i.wall_time, i.data, i.mime) for i in b.images
    ]
    assert [(t.tag, t.step, t.text) for t in a.texts] == [(t.tag, t.step, t.text) for t in b.texts]
    assert len(a.histograms) == len(b.histograms) and len(a.curves) == len(b.curves)
    assert a.hparams == b.hparams and a.meta == b.meta and a.problems == b.problems
    assert a.files[0].decoded_bytes == b.files[0].decoded_bytes


def write_bytes_log(path: Path, records: list[record_pb2.Record]) -> None:
    with open(path, "wb") as fh:
        for r in records:
            payload = r.SerializeToString()
            fh.write(struct.pack("<Q", len(payload)) + payload)


def scalar_record(tag: str, step: int, value: float, ts: int = 1_700_000_000_123) -> record_pb2.Record:
    return record_pb2.Record(values=[record_pb2.Record.Value(id=step, tag=tag, timestamp=ts, value=value)])


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("vdl")
    run = root / "实验" / "运行一"
    rng = np.random.default_rng(0)
    specials = [float("nan"), float("inf"), float("-inf"), -0.0, 0.1, 1e-45, 3.4e38, -7.25]
    with LogWriter(logdir=str(run), display_name="我的实验", file_name="vdlrecords.0000000001.log") as w:
        for i, v in enumerate(specials):
            w.add_scalar("损失/训练", v, i - 1)  # the first step is -1
        for step in (0, 127, 128, 16383, 16384, 2**35, -(2**40)):
            w.add_scalar("steps", step * 0.5, step)
        w.add_scalar("seconds", 1.5, 3, walltime=1_700_000_000)  # a wall time in seconds
        w.add_scalars("lr", {"a": 1.0, "b": float("nan"), "子": 3.0}, 3)
        w.add_text("notes", "你好, world", step=7)
        w.add_text("notes", "no step")
        w.add_image("img", rng.random((4, 5, 3)), 1)
        w.add_image("img", (rng.random((6, 2, 3)) * 255).astype(np.uint8), 2)
        w.add_histogram("hist", rng.normal(size=1000), 2, buckets=7)
        w.add_audio("au", np.linspace(-1, 1, 100), 4, sample_rate=16000)
        w.add_embeddings("emb", mat=rng.random((5, 3)).tolist(), metadata=list("abcde"))
        w.add_hparams({"lr": 0.1, "bs": 32, "opt": "sgd"}, ["loss/val", "acc"])
        np.float = float  # add_pr_curve / add_roc_curve still use the removed alias
        try:
            labels, preds = rng.integers(0, 2, 50), rng.random(50)
            w.add_pr_curve("pr", labels, preds, 5, num_thresholds=9)
            w.add_roc_curve("roc", labels, preds, 5, num_thresholds=9)
        finally:
            del np.float
        for step in range(600):  # periodic: the vectorized path takes these
            for k in range(4):
                w.add_scalar(f"train/m{k}", math.sin(step + k), step)
            if step % 150 == 149:
                w.add_text("notes", f"at {step}", step=step)
    with LogWriter(logdir=str(run), file_name="vdlrecords.0000000002.log") as w:  # the restart
        for step in range(600, 1000):
            for k in range(4):
                w.add_scalar(f"train/m{k}", -step * 0.25 + k, step)
            w.add_scalars("lr", {"a": step * 0.001}, step)
    files = sorted(run.glob("vdlrecords*"))
    assert len(files) == 2
    return {"root": root, "run": run, "files": files}


# --------------------------------------------------------------------------- against LogReader


def test_every_value_matches_logreader(logs):
    for path in logs["files"]:
        ours = decode(path)
        ref = LogReader(file_path=str(path))
        tags = ref.get_tags()
        assert not ours.problems
        # scalars, tag by tag, value by value (float32 bit patterns, so NaN compares)
        mine: dict[str, list] = {}
        for tag, step, wt, bits in our_scalars(ours):
            mine.setdefault(tag, []).append((step, wt, bits))
        theirs: dict[str, list] = {}
        for tag in tags.get("scalar", []):
            for v in ref.get_data("scalar", tag):
                theirs.setdefault(v.tag, []).append((v.id, wall(v.timestamp), f32bits(v.value)))
        for tag in tags.get("scalars", []):
            for v in ref.get_data("scalars", tag):
                theirs.setdefault(f"{v.tag}/{v.tag_value.tag}", []).append((v.id, wall(v.timestamp), f32bits(v.tag_value.value)))
        assert mine == theirs
        assert ours.scalars.num_rows == sum(map(len, theirs.values()))

        def ref_values(component):
            return [v for tag in tags.get(component, []) for v in ref.get_data(component, tag)]

        assert [(t.tag, t.step, t.wall_time, t.text) for t in ours.texts] == [
            (v.tag, v.id, wall(v.timestamp), v.text.encoded_text_string) for v in ref_values("text")
        ]
        assert [(i.tag, i.step, i.wall_time, i.data) for i in ours.images] == [
            (v.tag, v.id, wall(v.timestamp), v.image.encoded_image_string) for v in ref_values("image")
        ]
        assert [(a.tag, a.step, a.data, a.sample_rate) for a in ours.audio] == [
            (v.tag, v.id, v.audio.encoded_audio_string, v.audio.sample_rate) for v in ref_values("audio")
        ]
        ref_h = ref_values("histogram")
        assert len(ours.histograms) == len(ref_h)
        for h, v in zip(ours.histograms, ref_h):
            edges = np.array(v.histogram.bin_edges)
            assert (h.tag, h.step, h.wall_time) == (v.tag, v.id, wall(v.timestamp))
            np.testing.assert_array_equal(h.count, v.histogram.hist)
            np.testing.assert_array_equal(h.left, edges[:-1])
            np.testing.assert_array_equal(h.right, edges[1:])
        ref_e = ref_values("embeddings")
        assert [(e.tag, e.step, e.rows, e.dims) for e in ours.embeddings] == [
            (v.tag, v.id, len(v.embeddings.embeddings), len(v.embeddings.embeddings[0].vectors)) for v in ref_e
        ]
        for kind, comp in (("pr", "pr_curve"), ("roc", "roc_curve")):
            mine_c = [c for c in ours.curves if c.kind == kind]
            ref_c = ref_values(comp)
            assert len(mine_c) == len(ref_c)
            for c, v in zip(mine_c, ref_c):
                msg = getattr(v, comp)
                assert (c.tag, c.step, c.wall_time) == (v.tag, v.id, wall(v.timestamp))
                for col, field in (("tp", "TP"), ("fp", "FP"), ("tn", "TN"), ("fn", "FN")):
                    np.testing.assert_array_equal(c.columns[col], list(getattr(msg, field)))
                if kind == "pr":
                    np.testing.assert_array_equal(c.columns["precision"], list(msg.precision))
                    np.testing.assert_array_equal(c.columns["recall"], list(msg.recall))
                else:
                    tp, fn = np.array(msg.TP, float), np.array(msg.FN, float)
                    np.testing.assert_array_equal(c.columns["tpr"], np.where(tp + fn > 0, tp / np.maximum(tp + fn, 1), 0))
                    np.testing.assert_array_equal(c.columns["fpr"], list(msg.fpr))
                    assert not np.array_equal(c.columns["tpr"], list(msg.tpr))  # the writer's wrong TPR was replaced
                n = len(msg.TP)
                np.testing.assert_allclose(c.columns["thresholds"], np.arange(n) / (n - 1))
        ref_hp = ref_values("hyper_parameters")
        want_hp, want_metrics = {}, []
        for v in ref_hp[:1]:
            for info in v.hparam.hparamInfos:
                want_hp[info.name] = getattr(info, info.WhichOneof("type"))
            want_metrics = [m.name for m in v.hparam.metricInfos]
        assert ours.hparams == want_hp and ours.hparam_metrics == want_metrics
        names = [v.meta_data.display_name for v in ref_values("meta_data") if v.meta_data.display_name]
        assert ours.meta == ({"title": names[0]} if names else {})


def test_first_file_contents(logs):
    """Spot checks that do not lean on LogReader's grouping."""
    run = decode(logs["files"][0])
    rows = our_scalars(run)
    loss = [r for r in rows if r[0] == "损失/训练"]
    assert [r[1] for r in loss] == list(range(-1, 7))
    vals = [np.array([r[3]], np.uint32).view(np.float32)[0] for r in loss]
    assert math.isnan(vals[0]) and vals[1] == np.inf and vals[2] == -np.inf
    assert f32bits(-0.0) == loss[3][3] and loss[4][3] == 0x3DCCCCCD  # 0.1 narrowed to float32
    assert [r[1] for r in rows if r[0] == "steps"] == [0, 127, 128, 16383, 16384, 2**35, -(2**40)]
    assert [r[2] for r in rows if r[0] == "seconds"] == [1_700_000_000.0]
    assert {r[0] for r in rows} >= {"lr/a", "lr/b", "lr/子", "train/m0"}
    assert run.meta == {"title": "我的实验"}
    assert run.hparams == {"lr": 0.1, "bs": 32, "opt": "sgd"} and run.hparam_metrics == ["loss/val", "acc"]
    assert [(i.mime, i.width, i.height) for i in run.images] == [("image/png", 5, 4), ("image/png", 2, 6)]
    assert [(a.mime, a.sample_rate) for a in run.audio] == [("audio/wav", 16000.0)]
    assert [(e.rows, e.dims) for e in run.embeddings] == [(5, 3)]
    assert run.histograms[0].count.sum() == 1000 and len(run.histograms[0].left) == 7
    assert [t.step for t in run.texts if t.text == "no step"] == [0]
    size = logs["files"][0].stat().st_size
    assert run.files[0].size == size and run.files[0].decoded_bytes == size


def test_read_merges_files_in_order(logs):
    src = RunSource(name="实验/运行一", format=vdl.FORMAT, directory=logs["run"], files=tuple(logs["files"]))
    run = vdl.read(src, OPTS)
    assert run.name == "实验/运行一" and run.format == "visualdl"
    parts = [decode(p) for p in logs["files"]]
    assert our_scalars(run) == our_scalars(parts[0]) + our_scalars(parts[1])
    m0 = [r[1] for r in our_scalars(run) if r[0] == "train/m0"]
    assert m0 == list(range(1000))  # the restart continues the curve
    assert [f.path for f in run.files] == logs["files"]
    assert run.meta == {"title": "我的实验"}
    assert run.hparams == parts[0].hparams and not run.problems
    assert len(run.texts) == len(parts[0].texts) + len(parts[1].texts)


def test_claims():
    assert vdl.claims("vdlrecords.1796220322.log")
    assert vdl.claims("vdlrecords.1796220322.log.gpu0")
    assert vdl.claims("my_vdlrecords_x")
    assert not vdl.claims("vdlgraph.1796220322.log")
    assert not vdl.claims("events.out.tfevents.1.host")


# --------------------------------------------------------------------------- fast path == oracle


def test_fast_path_equals_oracle(logs):
    for path in logs["files"]:
        fast, slow = decode(path), decode(path, fast=False)
        assert_same_run(fast, slow)
        assert our_scalars(fast) == expected_scalars(framed(path))
    for path, periodic in zip(logs["files"], (2400, 2000)):
        buf = path.read_bytes()
        w = _vdlfast.walk(buf, "x", lambda b, p, e, s: vdl.parse_record(b, p, e, s, OPTS))
        assert w.fast_records > 0.85 * periodic  # the periodic part really went through numpy


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tags=st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=4, unique=True),
    steps=st.integers(1, 60),
    start=st.integers(-(2**63), 2**63 - 6000),
    step_every=st.sampled_from([0, 1, 97]),
    ts0=st.integers(-(2**40), 2**45),
    values=st.lists(st.floats(width=32, allow_nan=True), min_size=1, max_size=8),
    odd=st.lists(st.integers(0, 400), max_size=3),
)
def test_fast_path_property(tmp_path, tags, steps, start, step_every, ts0, values, odd):
    recs = [record_pb2.Record(values=[record_pb2.Record.Value(tag="meta_data_tag", timestamp=ts0, meta_data=record_pb2.Record.MetaData())])]
    for s in range(steps):
        for j, tag in enumerate(tags):
            step = start + s * step_every
            v = values[(s + j) % len(values)]
            if (s + j) % 5 == 4:
                recs.append(record_pb2.Record(values=[record_pb2.Record.Value(id=step, tag="m", timestamp=ts0 + s, tag_value=record_pb2.Record.TagValue(tag=tag, value=v))]))
            recs.append(scalar_record(tag, step, v, ts0 + s * 1000))
    for k in odd:  # irregular records in between
        k = min(k, len(recs))
        recs.insert(k, record_pb2.Record(values=[record_pb2.Record.Value(id=k, tag="t", timestamp=5, text=record_pb2.Record.Text(encoded_text_string="x" * k))]))
    path = tmp_path / "vdlrecords.prop.log"
    write_bytes_log(path, recs)
    fast, slow = decode(path), decode(path, fast=False)
    assert_same_run(fast, slow)
    assert our_scalars(fast) == expected_scalars(framed(path))
    assert not fast.problems


# --------------------------------------------------------------------------- damage


def test_truncated_tail_every_cut(logs, tmp_path):
    """Cut a real file at every byte of its last records: everything before is kept."""
    src = logs["files"][0]
    data = src.read_bytes()
    records = framed(src)
    full = our_scalars(decode(src))
    tail = records[-3][0]
    for cut in range(tail, len(data)):
        path = tmp_path / "vdlrecords.cut.log"
        path.write_bytes(data[:cut])
        run = decode(path)
        kept = [r for r in records if r[1] <= cut]
        assert our_scalars(run) == expected_scalars(kept)
        assert run.files[0].decoded_bytes == kept[-1][1]
        if cut == kept[-1][1]:
            assert run.problems == []
        else:
            assert [(p.kind, p.offset) for p in run.problems] == [("truncated", kept[-1][1])]
        if cut % 4 == 0:
            assert our_scalars(decode(path, fast=False)) == our_scalars(run)
    assert full[: len(expected_scalars(records[:-1]))] == expected_scalars(records[:-1])


def test_truncated_tail_of_every_prefix_of_a_small_file(tmp_path):
    recs = [scalar_record("a", i, i * 0.5) for i in range(5)]
    recs.insert(2, record_pb2.Record(values=[record_pb2.Record.Value(tag="t", timestamp=9, text=record_pb2.Record.Text(encoded_text_string="hi"))]))
    full = tmp_path / "vdlrecords.full.log"
    write_bytes_log(full, recs)
    records, data = framed(full), full.read_bytes()
    for cut in range(len(data) + 1):
        path = tmp_path / "vdlrecords.p.log"
        path.write_bytes(data[:cut])
        run = decode(path)
        kept = [r for r in records if r[1] <= cut]
        assert our_scalars(run) == expected_scalars(kept)
        assert all(p.kind == "truncated" for p in run.problems)
        assert len(run.problems) == (0 if cut in {0, *[r[1] for r in records]} else 1)


def damage_cases(records, data):
    """(name, damaged bytes, indices of damaged records) for a file of intact records."""
    mid = len(records) // 2
    o, e = records[mid][0], records[mid][1]
    cases = []
    huge = bytearray(data)
    huge[o : o + 8] = struct.pack("<Q", 2**60)
    cases.append(("huge length", bytes(huge), {mid}))
    past = bytearray(data)
    past[o : o + 8] = struct.pack("<Q", len(data))
    cases.append(("length past EOF", bytes(past), {mid}))
    garbled = bytearray(data)
    garbled[o + 8] = 0xFF  # wire type 7
    cases.append(("garbled payload", bytes(garbled), {mid}))
    cases.append(("bytes deleted", data[: o + 11] + data[o + 14 :], {mid}))
    cases.append(("zeros inserted", data[:o] + b"\0" * 37 + data[o:], set()))
    noise = np.random.default_rng(1).integers(0, 256, e - o + 50, np.uint8).tobytes()
    cases.append(("random bytes", data[:o] + noise + data[e + 50 :], {i for i, r in enumerate(records) if r[0] < e + 50 and r[1] > o}))
    shorter = bytearray(data)
    shorter[o : o + 8] = struct.pack("<Q", e - o - 8 - 3)
    cases.append(("length too short", bytes(shorter), {mid}))
    return cases


@pytest.mark.parametrize("which", [0, 1])
def test_mid_file_damage_recovers_every_later_record(logs, tmp_path, which):
    src = logs["files"][which]
    data, records = src.read_bytes(), framed(src)
    for name, damaged, lost in damage_cases(records, data):
        path = tmp_path / "vdlrecords.bad.log"
        path.write_bytes(damaged)
        for fast in (True, False):
            run = decode(path, fast=fast)
            kept = [r for i, r in enumerate(records) if i not in lost]
            assert our_scalars(run) == expected_scalars(kept), name
            bad = [p for p in run.problems if p.kind == "bad-record"]
            assert len(bad) == 1 and not [p for p in run.problems if p.kind != "bad-record"], (name, run.problems)
            assert bad[0].offset == records[len(records) // 2][0] and bad[0].path == str(path)
            assert run.files[0].decoded_bytes == len(damaged)


def test_damage_at_the_end_and_everywhere(tmp_path):
    recs = [scalar_record("x", i, float(i)) for i in range(50)]
    path = tmp_path / "vdlrecords.end.log"
    write_bytes_log(path, recs)
    data = path.read_bytes()
    records = framed(path)
    # garbage after the last record: reported, nothing lost, end stays at the last record
    path.write_bytes(data + b"\x07" * 30)
    run = decode(path)
    assert our_scalars(run) == expected_scalars(records)
    assert [p.kind for p in run.problems] == ["bad-record"] and run.files[0].decoded_bytes == len(data)
    # flip each byte of one record in turn: never raises, later records always come back
    o, e = records[20][0], records[21][1]
    for at in range(o, e):
        d = bytearray(data)
        d[at] ^= 0xA5
        path.write_bytes(bytes(d))
        run = decode(path)
        got = our_scalars(run)
        assert got[:20] == expected_scalars(records[:20])
        assert got[-28:] == expected_scalars(records[22:])
        assert our_scalars(decode(path, fast=False)) == got


def test_zero_length_and_empty_record(tmp_path):
    path = tmp_path / "vdlrecords.z.log"
    good = scalar_record("a", 1, 1.0).SerializeToString()
    frame = struct.pack("<Q", len(good)) + good
    path.write_bytes(frame + b"\0" * 8 + frame + struct.pack("<Q", 2) + b"\x10\x01" + frame)
    run = decode(path)
    assert run.scalars.num_rows == 3
    assert [p.kind for p in run.problems] == ["bad-record", "bad-record"]


# --------------------------------------------------------------------------- components built by hand


def test_hand_built_components(tmp_path):
    V = record_pb2.Record.Value
    R = record_pb2.Record
    hp = R.HParam(
        hparamInfos=[R.HParam.HparamInfo(name="flag", int_value=1), R.HParam.HparamInfo(name="drop", float_value=0.5)],
        metricInfos=[R.HParam.HparamInfo(name="val/acc", float_value=0.0)],
        name="x",
    )
    recs = [
        R(values=[V(tag="meta_data_tag", timestamp=1, meta_data=R.MetaData(display_name="first"))]),
        R(values=[V(id=1, tag="hparam", timestamp=2, hparam=hp)]),  # a bool as old protobuf stored it
        R(values=[V(id=1, tag="hparam", timestamp=3, hparam=R.HParam(hparamInfos=[R.HParam.HparamInfo(name="drop", float_value=9.0), R.HParam.HparamInfo(name="new", string_value="s")]))]),
        R(values=[V(id=2, tag="img", timestamp=4, image=R.Image(encoded_image_string=b"not an image"))]),
        R(values=[V(id=3, tag="jpg", timestamp=5, image=R.Image(encoded_image_string=b"\xff\xd8\xff\xe0\x00\x02\xff\xc0\x00\x11\x08\x00\x20\x00\x40\x03"))]),
        R(values=[V(id=4, tag="two", timestamp=6, value=1.0), V(id=5, tag="two", timestamp=7, value=2.0)]),
        R(values=[V(id=6, tag="meta_data_tag", timestamp=8, meta_data=R.MetaData(display_name="second"))]),
        R(values=[V(id=7, tag="nothing", timestamp=9)]),
        R(values=[V(id=8, tag="roc", timestamp=10, roc_curve=R.ROC_Curve(TP=[4, 0], FP=[1, 0], TN=[0, 1], FN=[0, 4], tpr=[4.0, 0.0], fpr=[1.0, 0.0]))]),
        R(values=[V(id=9, tag="hist", timestamp=11, histogram=R.Histogram(hist=[1.0], bin_edges=[0.0]))]),
        R(values=[V(id=10, tag="au", timestamp=12, audio=R.Audio(sample_rate=8000, encoded_audio_string=b"xx", content_type="text/plain"))]),
    ]
    path = tmp_path / "vdlrecords.hand.log"
    write_bytes_log(path, recs)
    run = decode(path)
    assert run.hparams == {"flag": 1, "drop": 0.5, "new": "s"} and run.hparam_metrics == ["val/acc"]
    assert run.meta == {"title": "first"}
    assert [(i.tag, i.mime, i.width, i.height) for i in run.images] == [("jpg", "image/jpeg", 64, 32)]
    assert our_scalars(run) == [("two", 4, 6.0, f32bits(1.0)), ("two", 5, 7.0, f32bits(2.0))]
    np.testing.assert_array_equal(run.curves[0].columns["tpr"], [1.0, 0.0])
    assert not run.histograms and not run.audio
    kinds = sorted((p.kind, p.offset) for p in run.problems)
    offs = [r[0] for r in framed(path)]
    assert kinds == sorted([("bad-value", offs[3]), ("unsupported", offs[7]), ("bad-value", offs[9]), ("bad-value", offs[10])])


def test_limits(tmp_path):
    R, V = record_pb2.Record, record_pb2.Record.Value
    png = b"\x89PNG\r\n\x1a\n" + b"\0\0\0\rIHDR" + struct.pack(">II", 3, 2) + b"\0" * 100
    recs = [R(values=[V(id=1, tag="i", timestamp=1, image=R.Image(encoded_image_string=png))]),
            R(values=[V(id=1, tag="t", timestamp=1, text=R.Text(encoded_text_string="abcdef"))])]
    path = tmp_path / "vdlrecords.lim.log"
    write_bytes_log(path, recs)
    run = decode(path, ReadOptions(max_image_bytes=50, max_text_chars=3))
    assert not run.images and run.texts[0].text.startswith("abc") and "d" not in run.texts[0].text
    assert sorted(p.kind for p in run.problems) == ["too-large", "too-large"]  # the image and the cut text
    run = decode(path)
    assert run.images[0].width == 3 and run.images[0].height == 2 and run.texts[0].text == "abcdef"


def test_incremental_start(logs):
    src = logs["files"][1]
    records = framed(src)
    mid = records[len(records) // 2][0]
    first = decode(src)
    second = decode(src, start=mid)
    assert our_scalars(second) == expected_scalars(records[len(records) // 2 :])
    assert second.files[0].decoded_bytes == first.files[0].decoded_bytes


def test_same_second_writers_share_one_file(tmp_path):
    """Two LogWriters in one dir within a second interleave into one file: read it like VisualDL."""
    run = tmp_path / "r"
    with LogWriter(logdir=str(run), filename_suffix=".same") as a, LogWriter(logdir=str(run), filename_suffix=".same") as b:
        for i in range(20):
            a.add_scalar("a", i, i)
            b.add_scalar("b", -i, i)
    for path in run.glob("vdlrecords*"):
        assert our_scalars(decode(path)) == expected_scalars(framed(path))
    shutil.rmtree(run)


def test_read_merge_policy(tmp_path):
    """hparams: the first file's values win, later files only add names; title: the first one."""
    R, V = record_pb2.Record, record_pb2.Record.Value
    info = R.HParam.HparamInfo

    def hp(**kv):
        infos = [info(name=k, float_value=v) if isinstance(v, float) else info(name=k, string_value=v) for k, v in kv.items()]
        return R(values=[V(id=1, tag="hparam", timestamp=1, hparam=R.HParam(hparamInfos=infos, metricInfos=[info(name="m")]))])

    def meta(name):
        return R(values=[V(tag="meta_data_tag", timestamp=1, meta_data=R.MetaData(display_name=name))])

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_bytes_log(run_dir / "vdlrecords.1.log", [meta("one"), hp(lr=0.1, opt="sgd"), scalar_record("m", 1, 0.5)])
    write_bytes_log(run_dir / "vdlrecords.2.log", [meta(""), hp(lr=0.2, wd=0.01), scalar_record("m", 2, 0.25)])
    write_bytes_log(run_dir / "vdlrecords.3.log", [meta("three")])
    files = tuple(sorted(run_dir.glob("vdlrecords*")))
    run = vdl.read(RunSource("run", vdl.FORMAT, run_dir, files), OPTS)
    assert run.hparams == {"lr": 0.1, "opt": "sgd", "wd": 0.01} and run.hparam_metrics == ["m"]
    assert run.meta == {"title": "one"}
    assert our_scalars(run) == [("m", 1, 1_700_000_000.123, f32bits(0.5)), ("m", 2, 1_700_000_000.123, f32bits(0.25))]
    run2 = vdl.read(RunSource("run", vdl.FORMAT, run_dir, files[1:]), OPTS)
    assert run2.meta == {"title": "three"} and run2.hparams == {"lr": 0.2, "wd": 0.01}


def test_incremental_append_with_state(logs, tmp_path):
    """A file read while it grows: prefix (cut mid-record) + tail == the whole file."""
    from sitegen.model import merge_parts

    data = logs["files"][0].read_bytes()
    path = tmp_path / "vdlrecords.live.log"
    for cut in (len(data) // 3, len(data) // 2 + 5, len(data) - 3):
        path.write_bytes(data[:cut])
        head, state = vdl.decode_file(path, OPTS)
        assert state == {"end": head.files[0].decoded_bytes} and state["end"] <= cut
        path.write_bytes(data)
        tail, state2 = vdl.decode_file(path, OPTS, start=state["end"], state=state)
        whole = merge_parts("x", vdl.FORMAT, [head, tail])
        full = decode(logs["files"][0])
        assert our_scalars(whole) == our_scalars(full)
        assert [t.text for t in whole.texts] == [t.text for t in full.texts]
        assert whole.meta == full.meta and whole.hparams == full.hparams
        assert state2 == {"end": len(data)} and not tail.problems
    missing, st = vdl.decode_file(tmp_path / "nope" / "vdlrecords.x", OPTS)
    assert [p.kind for p in missing.problems] == ["unreadable"] and st == {"end": 0}
