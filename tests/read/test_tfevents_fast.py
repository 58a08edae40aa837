"""The vectorized scalar decoder against an independent oracle.

Oracle: the reference framing walk (``iter_records``) plus tensorboard's own protobuf classes.
The fast rows together with the records handed back in ``other`` must give exactly the scalars
the oracle finds (bit for bit, NaN included, in file order), and problems/end must be identical.
"""
from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboardX import SummaryWriter

from sitegen.read import _fastframe as ff
from sitegen.read import tfevents_fast
from sitegen.read.tfevents_fast import decode_scalars
from sitegen.read.tfrecord import Framing, iter_records, masked_crc32c

Event = event_pb2.Event


# -- writing test files -------------------------------------------------------------------------
def _only_file(d: Path) -> Path:
    (f,) = [p for p in d.iterdir() if "tfevents" in p.name]
    return f


def write_tbx(d: Path, steps: range | list[int], tags: list[str], extras: bool = False, value=None) -> bytes:
    """A real tensorboardX file; ``extras`` interleaves images, text and histograms."""
    w = SummaryWriter(str(d), max_queue=100000, flush_secs=3600)
    for i, s in enumerate(steps):
        for j, t in enumerate(tags):
            w.add_scalar(t, value(i, j) if value else math.sin(i + j) * 10 ** (j - 2), s)
        if extras and i % 17 == 5:
            w.add_image("img", np.full((3, 4, 5), i % 255, np.uint8), s)
        if extras and i % 23 == 7:
            w.add_text("note", f"step {s}", s)
        if extras and i % 29 == 11:
            w.add_histogram("h", np.arange(i % 7 + 3, dtype=float), s)
    w.close()
    return _only_file(d).read_bytes()


def tf2_value(tag: str, x: float) -> summary_pb2.Summary.Value:
    return summary_pb2.Summary.Value(
        tag=tag,
        tensor=tensor_pb2.TensorProto(
            dtype=1, tensor_shape=tensor_shape_pb2.TensorShapeProto(), tensor_content=struct.pack("<f", x)
        ),
        metadata=summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")),
    )


def simple_value(tag: str, x: float) -> summary_pb2.Summary.Value:
    return summary_pb2.Summary.Value(tag=tag, simple_value=x)


def write_tb(d: Path, events: list[Event]) -> bytes:
    """Events written by tensorboard's own EventFileWriter (the PyTorch writer)."""
    w = EventFileWriter(str(d), max_queue_size=100000, flush_secs=3600)
    for e in events:
        w.add_event(e)
    w.close()
    return _only_file(d).read_bytes()


def frame(payloads: list[bytes]) -> bytes:
    out = bytearray()
    for p in payloads:
        ln = struct.pack("<Q", len(p))
        out += ln + struct.pack("<I", masked_crc32c(ln)) + p + struct.pack("<I", masked_crc32c(p))
    return bytes(out)


# -- the oracle -----------------------------------------------------------------------------------
def bits(x: float) -> int:
    return int(np.array(x, np.float64).view(np.uint64))


def scalars_of(payload: bytes) -> list[tuple]:
    """(tag, step, wall bits, value bits) of every scalar of one Event, protobuf-decoded."""
    e = Event.FromString(payload)
    out = []
    for v in e.summary.value:
        if v.HasField("simple_value"):
            x = float(np.float32(v.simple_value))
        elif v.HasField("tensor") and v.tensor.dtype == 1 and not v.tensor.tensor_shape.dim and len(v.tensor.tensor_content) == 4:
            x = float(np.frombuffer(v.tensor.tensor_content, "<f4")[0])
        else:
            continue
        out.append((v.tag, e.step, bits(e.wall_time), bits(x)))
    return out


def oracle(buf: bytes, verify: bool = True, start: int = 0):
    fr = Framing()
    recs = [(off, bytes(p)) for off, p in iter_records(buf, "f", fr, verify=verify, start=start)]
    return recs, fr


def check(buf: bytes, verify: bool = True, start: int = 0, as_type=bytes) -> tfevents_fast.FastScalars:
    """Assert the fast decoder agrees with the oracle on ``buf``; return its result."""
    data = {bytes: buf, memoryview: memoryview(buf), np.ndarray: np.frombuffer(buf, np.uint8)}[as_type]
    r = decode_scalars(data, path="f", verify=verify, start=start)
    recs, fr = oracle(buf, verify, start)
    assert r.problems == fr.problems
    assert r.end == fr.end
    # shapes and types of the contract
    n = len(r.record)
    assert r.record.dtype == np.int64 and r.tag_id.dtype == np.int32 and r.step.dtype == np.int64
    assert r.wall_time.dtype == np.float64 and r.value.dtype == np.float64
    assert len(r.tag_id) == len(r.step) == len(r.wall_time) == len(r.value) == n
    assert np.all(np.diff(r.record) > 0)
    assert [o[0] for o in r.other] == sorted(o[0] for o in r.other)
    # tags: distinct, in order of first appearance, all used
    assert len(set(r.tag)) == len(r.tag)
    if n:
        _, first = np.unique(r.tag_id, return_index=True)
        assert list(np.sort(first)) == list(first) and len(first) == len(r.tag)
    # every intact record exactly once: as fast rows or in `other`
    payload_of = dict(recs)
    fast_offs = [int(x) for x in r.record]
    other_offs = [o for o, _, _ in r.other]
    assert not set(fast_offs) & set(other_offs)
    assert sorted(fast_offs + other_offs) == [o for o, _ in recs]
    for o, po, ln in r.other:
        assert po == o + 12 and buf[po : po + ln] == payload_of[o]
    # the values, bit for bit, in file order
    got = {o: scalars_of(buf[po : po + ln]) for o, po, ln in r.other}
    for i in range(n):
        got[fast_offs[i]] = [(r.tag[r.tag_id[i]], int(r.step[i]), bits(r.wall_time[i]), bits(r.value[i]))]
    want = {o: scalars_of(p) for o, p in recs}
    assert [got[o] for o, _ in recs] == [want[o] for o, _ in recs]
    return r


# -- fixtures -------------------------------------------------------------------------------------
TAGS = ["loss", "acc", "lr/group_0", "val/loss", "训练/损失"]


@pytest.fixture(scope="module")
def tbx_plain(tmp_path_factory) -> bytes:
    return write_tbx(tmp_path_factory.mktemp("plain"), range(0, 200), TAGS)


@pytest.fixture(scope="module")
def tbx_small(tmp_path_factory) -> bytes:
    return write_tbx(tmp_path_factory.mktemp("small"), range(120, 140), TAGS[:3])


@pytest.fixture(scope="module")
def tbx_mixed(tmp_path_factory) -> bytes:
    return write_tbx(tmp_path_factory.mktemp("mixed"), range(0, 300), TAGS[:3], extras=True)


# -- well-formed files ----------------------------------------------------------------------------
def test_tensorboardx_file_is_decoded_fast(tbx_plain, monkeypatch):
    calls = []
    real = ff.classify
    monkeypatch.setattr(ff, "classify", lambda p: calls.append(1) or real(p))
    r = check(tbx_plain)
    assert len(r.record) == 200 * len(TAGS)
    assert r.other == [(0, 12, 24)]  # only the file_version record
    assert r.tag == TAGS
    assert list(r.step[: 2 * len(TAGS)]) == [0] * len(TAGS) + [1] * len(TAGS)
    # most records went through the vectorized stretches, not the per-record walk
    assert len(calls) < 0.25 * len(r.record)


@pytest.mark.parametrize("as_type", [bytes, memoryview, np.ndarray])
def test_input_types(tbx_small, as_type):
    r = check(tbx_small, as_type=as_type)
    assert len(r.record) == 60


def test_special_values_and_steps(tmp_path):
    steps = [0, 1, 127, 128, 129, 16383, 16384, 2**21 - 1, 2**21, 2**35, 2**56 - 1, 2**56, 2**62, 2**63 - 1]
    specials = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-45, 3.4e38, 1e39, -7.25]
    steps = [s for s in steps for _ in range(3)]  # repeat each so stretches can form

    def value(i, j):
        return specials[(i + j) % len(specials)]

    buf = write_tbx(tmp_path, steps, ["a", "b"], value=value)
    r = check(buf)
    assert len(r.record) == 2 * len(steps)
    assert r.step.max() == 2**63 - 1
    assert np.isnan(r.value).any() and np.isposinf(r.value).any() and np.isneginf(r.value).any()


def test_steps_crossing_varint_widths(tmp_path):
    steps = list(range(100, 140)) + list(range(16370, 16400)) + list(range(2**21 - 20, 2**21 + 20))
    r = check(write_tbx(tmp_path, steps, TAGS))
    assert list(r.step[:: len(TAGS)]) == steps


def test_tf2_tensor_scalars_and_oddities(tmp_path):
    events = []
    for s in range(60):
        events.append(Event(wall_time=1.7e9 + s, step=s, summary=summary_pb2.Summary(value=[tf2_value("loss", s / 7)])))
        events.append(Event(wall_time=1.7e9 + s, step=s, summary=summary_pb2.Summary(value=[tf2_value("深度/精度", math.nan if s % 9 == 0 else -s)])))
        if s % 10 == 3:  # TF1 merged: two values in one event -> other
            events.append(Event(wall_time=1.7e9, step=s, summary=summary_pb2.Summary(value=[simple_value("m1", 1.0), simple_value("m2", 2.0)])))
        if s % 10 == 4:  # negative step, long tag, tag with metadata -> other
            events.append(Event(wall_time=1.7e9, step=-s - 1, summary=summary_pb2.Summary(value=[simple_value("neg", 3.0)])))
            events.append(Event(wall_time=1.7e9, step=s, summary=summary_pb2.Summary(value=[simple_value("x" * 130, 4.0)])))
            events.append(Event(wall_time=1.7e9, step=s, summary=summary_pb2.Summary(value=[simple_value("y" * 118, 5.0)])))
            md = summary_pb2.SummaryMetadata(display_name="shown")
            events.append(Event(wall_time=1.7e9, step=s, summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="md", simple_value=6.0, metadata=md)])))
        if s % 10 == 5:  # step 0 and a zero wall_time (field omitted -> other)
            events.append(Event(wall_time=0.0, step=s, summary=summary_pb2.Summary(value=[simple_value("w0", 7.0)])))
            events.append(Event(wall_time=1.7e9, step=0, summary=summary_pb2.Summary(value=[tf2_value("loss", 8.0)])))
    buf = write_tb(tmp_path, events)
    r = check(buf)
    assert set(r.tag) == {"loss", "深度/精度", "y" * 118}
    assert len(r.record) == 126
    assert 5 + 6 * 6 + 1 == len(r.other)  # merged, neg, long, md, w0 per decade + file_version


def test_images_text_histograms_interleaved(tbx_mixed):
    r = check(tbx_mixed)
    assert len(r.record) == 900
    assert len(r.other) > 30


def test_start_offset(tbx_plain):
    r = decode_scalars(tbx_plain, path="f")
    mid = int(r.record[337])
    r2 = check(tbx_plain, start=mid)
    assert int(r2.record[0]) == mid and len(r2.record) == len(r.record) - 337
    check(tbx_plain, start=mid + 3)  # not a record boundary: resync
    check(tbx_plain, start=len(tbx_plain))


def test_empty_and_tiny_buffers():
    for buf in [b"", b"\x00", b"\x18" + b"\x00" * 10, b"\x00" * 12, b"\x00" * 16, b"\xff" * 40]:
        check(buf)


# -- damage ---------------------------------------------------------------------------------------
def test_truncated_everywhere(tbx_small, tbx_plain):
    for cut in range(len(tbx_small) + 1):
        check(tbx_small[:cut])
    for cut in range(0, len(tbx_plain), 97):
        check(tbx_plain[:cut])


def _flip(buf: bytes, pos: int, xor: int = 0x01) -> bytes:
    b = bytearray(buf)
    b[pos] ^= xor
    return bytes(b)


@pytest.mark.parametrize("verify", [True, False])
def test_flipped_bytes_in_every_field(tbx_plain, verify):
    r = decode_scalars(tbx_plain, path="f")
    for i in [0, 1, 7, 40, 333, 500, 998]:
        o = int(r.record[i])
        ln = struct.unpack_from("<Q", tbx_plain, o)[0]
        for rel in [0, 3, 7, 8, 11, 12, 13, 20, 21, 22, 12 + ln - 5, 12 + ln - 1, 12 + ln, 12 + ln + 3]:
            for x in [0x01, 0x80, 0xFF]:
                res = check(_flip(tbx_plain, o + rel, x), verify=verify)
                if verify and 12 <= rel < 16 + ln:
                    assert [p.kind for p in res.problems] == ["bad-crc"]


def test_identical_flips_in_several_records_are_caught(tbx_plain):
    r = decode_scalars(tbx_plain, path="f")
    loss = r.record[r.tag_id == 0]
    for idx in [(10, 11), (10, 12), (3, 150), (20, 21, 22), (40, 41, 43), (5, 6, 7, 8, 9), (1, 2, 5, 9, 17, 33)]:
        b = bytearray(tbx_plain)
        for k in idx:
            b[int(loss[k]) + 12 + 22] ^= 0x10  # same bit of the same value byte in each record
        res = check(bytes(b))
        assert [p.offset for p in res.problems] == [int(loss[k]) for k in idx]


def test_crc_group_bad_is_exact():
    rng = np.random.default_rng(5)
    n, stride, count = 37, 53, 300
    payloads = [rng.integers(0, 256, n, np.uint8).tobytes() for _ in range(count)]
    buf = bytearray(frame(payloads))
    assert len(buf) == stride * count
    a = np.frombuffer(bytes(buf), np.uint8)
    assert ff.crc_group_bad(a, 0, n, count, stride) == []
    bad = [0, 1, 2, 3, 64, 65, 66, 67, 299]  # identical syndromes in a whole aligned run of 4
    for k in bad:
        buf[k * stride + 12 + 5] ^= 0x44
    a = np.frombuffer(bytes(buf), np.uint8)
    found = set(ff.crc_group_bad(a, 0, n, count, stride))
    assert found <= set(bad)
    assert found  # an odd number of identical flips can never cancel in the total


def test_overwritten_ranges(tbx_plain, tbx_mixed):
    rng = np.random.default_rng(1)
    for buf in [tbx_plain, tbx_mixed]:
        for _ in range(25):
            lo = int(rng.integers(0, len(buf) - 10))
            hi = lo + int(rng.integers(1, 3000))
            b = bytearray(buf)
            fill = rng.choice([0, 1, 2])
            seg = b[lo:hi]
            if fill == 0:
                b[lo:hi] = bytes(len(seg))
            elif fill == 1:
                b[lo:hi] = rng.integers(0, 256, len(seg), np.uint8).tobytes()
            else:  # a copy of other records, misaligned: valid records at strange places
                src = int(rng.integers(0, len(buf) - len(seg)))
                b[lo:hi] = buf[src : src + len(seg)]
            check(bytes(b))
            check(bytes(b), verify=False)


def test_duplicated_and_dropped_blocks(tbx_plain):
    r = decode_scalars(tbx_plain, path="f")
    o = [int(x) for x in r.record]
    spliced = tbx_plain[: o[100]] + tbx_plain[o[50] : o[90]] + tbx_plain[o[100] : o[300]] + tbx_plain[o[303] :]
    res = check(spliced)
    assert not res.problems


# -- properties -----------------------------------------------------------------------------------
tag_st = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40) | st.sampled_from(
    ["loss", "acc", "a" * 118, "b" * 119, "c" * 98, "d" * 99, "训练/损失"]
)
float_st = st.floats(width=32, allow_nan=True, allow_infinity=True) | st.sampled_from([math.nan, math.inf, -math.inf])
step_st = st.sampled_from(["seq", "zero", "big", "random", "negative"])


def _events(tags: list[str], nsteps: int, steps: str, style: list[int], vals: list[float], seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = [Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()]
    for i in range(nsteps):
        s = {"seq": 120 + i, "zero": 0, "big": 2**40 + i * 2**30, "random": int(rng.integers(0, 2**62)),
             "negative": int(rng.integers(-5, 5))}[steps]
        for j, t in enumerate(tags):
            x = vals[(i * len(tags) + j) % len(vals)]
            v = (simple_value, tf2_value)[style[j % len(style)]](t, x)
            out.append(Event(wall_time=1.7e9 + i * 0.25, step=s, summary=summary_pb2.Summary(value=[v])).SerializeToString())
    return out


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    tags=st.lists(tag_st, min_size=1, max_size=6, unique=True),
    nsteps=st.integers(1, 60),
    steps=step_st,
    style=st.lists(st.integers(0, 1), min_size=1, max_size=3),
    vals=st.lists(float_st, min_size=1, max_size=8),
    damage=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), max_size=4),
    cut=st.none() | st.floats(0, 1),
    verify=st.booleans(),
)
def test_property_random_files(tags, nsteps, steps, style, vals, damage, cut, verify):
    buf = bytearray(frame(_events(tags, nsteps, steps, style, vals, seed=nsteps)))
    for where, x in damage:
        buf[min(int(where * len(buf)), len(buf) - 1)] ^= x
    if cut is not None:
        buf = buf[: int(cut * len(buf))]
    check(bytes(buf), verify=verify)
