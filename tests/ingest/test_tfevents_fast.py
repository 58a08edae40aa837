"""The vectorized scalar decoder against an independent oracle.

Oracle: the reference framing walk (``iter_records``) plus tensorboard's own protobuf classes.
The fast rows together with the records handed back in ``other`` must give exactly the scalars
the oracle finds (bit for bit, NaN included, in file order), and problems/end must be identical.
"""
from __future__ import annotations

import functools
import itertools
import math
import struct
from pathlib import Path

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboardX import SummaryWriter

from sitegen.ingest.tfevents import fast as tfevents_fast
from sitegen.ingest.tfevents import frames as ff
from sitegen.ingest.tfevents import tfrecord
from sitegen.ingest.tfevents.fast import decode_scalars
from sitegen.ingest.tfevents.tfrecord import Framing, iter_records

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
    return b"".join(tfrecord.frame(p) for p in payloads)


# -- the oracle -----------------------------------------------------------------------------------
def bits(x: float) -> int:
    return int(np.array(x, np.float64).view(np.uint64))


@functools.lru_cache(maxsize=None)
def scalars_of(payload: bytes) -> tuple[tuple, ...]:
    """(tag, step, wall bits, value bits) of every scalar of one Event, protobuf-decoded."""
    try:
        e = Event.FromString(payload)
    except DecodeError:
        return (("undecodable",),)
    out = []
    for v in e.summary.value:
        if v.HasField("simple_value"):
            x = float(np.float32(v.simple_value))
        elif v.HasField("tensor") and v.tensor.dtype == 1 and not v.tensor.tensor_shape.dim and len(v.tensor.tensor_content) == 4:
            x = float(np.frombuffer(v.tensor.tensor_content, "<f4")[0])
        else:
            continue
        out.append((v.tag, e.step, bits(e.wall_time), bits(x)))
    return tuple(out)


def is_fast_layout(payload: bytes, tag: str, step: int, wall: float) -> bool:
    """Is ``payload`` what tensorboard serializes for this scalar (either layout), value aside?"""
    def event(v):
        return Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[v])).SerializeToString()

    simple = payload[:-4] + bytes(4)
    tf2 = payload[:-17] + bytes(4) + payload[-13:]
    return event(simple_value(tag, 0.0)) == simple or event(tf2_value(tag, 0.0)) == tf2


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
        got[fast_offs[i]] = ((r.tag[r.tag_id[i]], int(r.step[i]), bits(r.wall_time[i]), bits(r.value[i])),)
    for i in range(n):  # a fast row's record is exactly one of the two layouts
        assert is_fast_layout(payload_of[fast_offs[i]], r.tag[r.tag_id[i]], int(r.step[i]), float(r.wall_time[i]))
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
    assert len(r.record) == 120 + 6 + 6  # 2 per step, "y"*118 and the step-0 "loss" per decade
    assert len(r.other) == 6 * 5 + 1  # merged, neg, long, md, w0 per decade + file_version


def test_images_text_histograms_interleaved(tbx_mixed):
    r = check(tbx_mixed)
    assert len(r.record) == 900
    assert len(r.other) > 30


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_records_interleaved_anywhere_in_the_period(seed):
    rng = np.random.default_rng(seed)
    tags = ["a", "bb", "ccc", "dddd"]
    payloads = [Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()]
    for s in range(1500):
        for t in tags:
            payloads.append(Event(wall_time=1.7e9 + s, step=s, summary=summary_pb2.Summary(value=[simple_value(t, s)])).SerializeToString())
            if rng.random() < 0.01:  # an image of random size anywhere, even mid-period
                img = summary_pb2.Summary.Image(height=1, width=1, colorspace=1, encoded_image_string=rng.bytes(int(rng.integers(1, 300))))
                payloads.append(Event(wall_time=1.7e9 + s, step=s, summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="i", image=img)])).SerializeToString())
    buf = frame(payloads)
    r = check(buf)
    assert len(r.record) == 6000
    b = bytearray(buf)  # and with a few damaged scalars spread over the batches
    for k in rng.choice(len(r.record), 12, replace=False):
        b[int(r.record[k]) + 14] ^= 0x40
    assert len(check(bytes(b)).problems) == 12


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


def test_same_length_tag_changes_inside_a_stretch():
    # same lengths and step widths throughout: only the tag bytes (or the layout bytes) differ
    payloads = [Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()]
    for i in range(400):
        a, b = ("lossA", "lossB") if i < 150 or i >= 300 else ("lossC", "lossB")
        if 200 <= i < 210:
            b = "lossD"
        for t in (a, b):
            payloads.append(Event(wall_time=1.7e9 + i, step=200 + i, summary=summary_pb2.Summary(value=[simple_value(t, i)])).SerializeToString())
        v = tf2_value("tf2", i)
        if i % 50 == 20:  # same length, another plugin name: not the TF2 scalar layout
            v.metadata.plugin_data.plugin_name = "scalarz"
        payloads.append(Event(wall_time=1.7e9 + i, step=200 + i, summary=summary_pb2.Summary(value=[v])).SerializeToString())
    r = check(frame(payloads))
    assert r.tag == ["lossA", "lossB", "tf2", "lossC", "lossD"]
    assert len(r.record) == 800 + 392 and len(r.other) == 1 + 8


def raw_simple(tag: bytes, step_varint: bytes, wall: float, x: float) -> bytes:
    """A simple_value Event laid out by hand (to write non-canonical step varints)."""
    t = len(tag)
    step = b"\x10" + step_varint if step_varint else b""
    return b"\x09" + struct.pack("<d", wall) + step + bytes([0x2A, t + 9, 0x0A, t + 7, 0x0A, t]) + tag + b"\x15" + struct.pack("<f", x)


def test_non_canonical_step_varints_go_to_other():
    assert Event.FromString(raw_simple(b"ab", b"\x05", 1.5, 2.0)) == Event(
        wall_time=1.5, step=5, summary=summary_pb2.Summary(value=[simple_value("ab", 2.0)]))
    payloads = [raw_simple(b"ab", bytes([0x80 | (i & 0x7F), 0x01]), 1.7e9 + i, i) for i in range(300)]
    for i in (40, 41, 200):  # 2-byte varints for step 0 and for a 1-byte value
        payloads[i] = raw_simple(b"ab", b"\x80\x00" if i != 41 else b"\x85\x00", 1.7e9, 1.0)
    payloads[100] = raw_simple(b"ab", b"\x00", 1.7e9, 1.0)[:-3] + b"\x00\x00\x00"  # explicit step 0 (1 byte)
    payloads[101] = raw_simple(b"ab", b"\x00", 1.7e9, 1.0)
    r = check(frame(payloads))
    assert [o for o, _, _ in r.other] == [int(np.sum([len(p) + 16 for p in payloads[:i]])) for i in (40, 41, 100, 101, 200)]


def test_periodic_non_scalar_records_are_framed_and_crc_checked():
    # a constant-length text record in every period: a stretch position that goes to `other`
    payloads = [Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString()]
    for i in range(300):
        payloads.append(Event(wall_time=1.7e9 + i, step=300 + i, summary=summary_pb2.Summary(value=[simple_value("loss", i)])).SerializeToString())
        text = summary_pb2.Summary.Value(tag="t", tensor=tensor_pb2.TensorProto(dtype=7, string_val=[b"abc"]))
        payloads.append(Event(wall_time=1.7e9 + i, step=300 + i, summary=summary_pb2.Summary(value=[text])).SerializeToString())
    buf = frame(payloads)
    r = check(buf)
    assert len(r.record) == 300 and len(r.other) == 301
    for k in (150, 151, 152):  # damage two text records and one scalar in the middle
        o, po, ln = r.other[k] if k != 151 else (int(r.record[151]), 0, 0)
        res = check(_flip(buf, o + 20, 0x08))
        assert [p.offset for p in res.problems] == [o]


def test_tf2_file_is_decoded_fast(tmp_path, monkeypatch):
    events = [Event(wall_time=1.7e9 + s, step=s, summary=summary_pb2.Summary(value=[tf2_value(t, s * 0.5)]))
              for s in range(500) for t in ("epoch_loss", "epoch_accuracy")]
    buf = write_tb(tmp_path, events)
    calls = []
    real = ff.classify
    monkeypatch.setattr(ff, "classify", lambda p: calls.append(1) or real(p))
    r = check(buf)
    assert len(r.record) == 1000 and len(r.other) == 1
    assert len(calls) < 100


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


def _framed_block(n: int, count: int, seed: int) -> tuple[bytearray, int]:
    rng = np.random.default_rng(seed)
    buf = bytearray(frame([rng.integers(0, 256, n, np.uint8).tobytes() for _ in range(count)]))
    assert len(buf) == (n + 16) * count
    return buf, n + 16


def test_crc_block_bad_catches_any_two_or_three_identical_flips():
    n, count = 29, 16
    clean, stride = _framed_block(n, count, 3)
    a = np.frombuffer(bytes(clean), np.uint8)
    assert ff.crc_block_bad(a, 0, stride, count, [(0, n)]) == []
    sets = list(itertools.combinations(range(count), 2)) + list(itertools.combinations(range(count), 3))
    _all_flips_found(clean, stride, n, count, sets, at=7, bit=0x21)


def _all_flips_found(clean: bytearray, stride: int, n: int, count: int, sets: list, *, at: int, bit: int) -> None:
    """Flipping ``bit`` of payload byte ``at`` in the records of each set: exactly those are reported."""
    for idx in sets:
        buf = bytearray(clean)
        for k in idx:
            buf[k * stride + 12 + at] ^= bit
        a = np.frombuffer(bytes(buf), np.uint8)
        assert ff.crc_block_bad(a, 0, stride, count, [(0, n)]) == [k * stride for k in idx]


def test_crc_block_bad_residual_risk_is_as_documented():
    n, count = 37, 300  # one group of 300 periods: subsets by bits 0..8 of the index, and all
    buf, stride = _framed_block(n, count, 5)
    for k in (64, 65, 66, 67):  # the same flip in 4 records that pair up on every subset
        buf[k * stride + 12 + 5] ^= 0x44
    a = np.frombuffer(bytes(buf), np.uint8)
    assert ff.crc_block_bad(a, 0, stride, count, [(0, n)]) == []
    buf[299 * stride + 12 + 5] ^= 0x44  # a fifth: now an odd number, which never cancels
    a = np.frombuffer(bytes(buf), np.uint8)
    assert ff.crc_block_bad(a, 0, stride, count, [(0, n)]) == [k * stride for k in (64, 65, 66, 67, 299)]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 17, 100, 129, 300])
def test_crc_block_bad_any_count(count):
    """Counts that are not powers of two are one group: every single, double and triple flip found."""
    n = 23
    clean, stride = _framed_block(n, count, count)
    a = np.frombuffer(bytes(clean), np.uint8)
    assert ff.crc_block_bad(a, 0, stride, count, [(0, n)]) == []
    rng = np.random.default_rng(count)
    sets = [tuple(sorted(rng.choice(count, size=min(k, count), replace=False))) for k in (1, 2, 3) for _ in range(20)]
    _all_flips_found(clean, stride, n, count, sets, at=3, bit=0x10)


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
    damage=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255), st.integers(1, 80), st.sampled_from("xzc")), max_size=4),
    cut=st.none() | st.floats(0, 1),
    verify=st.booleans(),
)
def test_property_random_files(tags, nsteps, steps, style, vals, damage, cut, verify):
    buf = bytearray(frame(_events(tags, nsteps, steps, style, vals, seed=nsteps)))
    for where, x, span, how in damage:  # flip one byte, zero a range, or paste a shifted copy
        at = min(int(where * len(buf)), len(buf) - 1)
        if how == "x":
            buf[at] ^= x
        elif how == "z":
            buf[at : at + span] = bytes(len(buf[at : at + span]))
        else:
            src = (at + x * 7) % len(buf)
            seg = bytes(buf[src : src + span])
            buf[at : at + len(seg)] = seg
    if cut is not None:
        buf = buf[: int(cut * len(buf))]
    check(bytes(buf), verify=verify)
