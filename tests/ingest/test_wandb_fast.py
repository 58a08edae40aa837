"""The vectorized parts of the W&B reader against their readable references, on the example
run (written by the real ``wandb``) and on damaged or random bytes: the one-pass CRC check
against one ``zlib.crc32`` per chunk, the field walk of regular messages against the walk one
field at a time, the record headers read from words against that walk.
"""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import numpy as np

from sitegen.ingest.wandb import fast, frames, summary
from tests.support import wandbgen

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "archive" / "wandb"


def example() -> bytes:
    return next(EXAMPLE.glob("*/run-*.wandb")).read_bytes()


def per_chunk_ok(buf: np.ndarray) -> bool:
    offs, lens, _, _, _ = frames._chunks(buf)
    data = buf.tobytes()
    return all(
        zlib.crc32(data[o + 6 : o + 7 + n]) == int.from_bytes(data[o : o + 4], "little") for o, n in zip(offs.tolist(), lens.tolist())
    )


def one_pass_ok(buf: np.ndarray) -> bool:
    offs, lens, _, _, _ = frames._chunks(buf)
    work = np.concatenate([buf, np.zeros(8, np.uint8)])  # (written over: a copy with room after the last chunk)
    return frames._crcs_hold(work, offs, lens, fast.words(buf, offs, 4).astype(np.uint32))


def test_crc_of_zero_bytes():
    for n in (0, 1, 7, 32768, 1_000_003):
        assert frames._crc_zeros(n) == zlib.crc32(bytes(n))


def test_one_pass_crc_check_agrees_with_chunk_by_chunk():
    original = example()
    assert one_pass_ok(np.frombuffer(original, np.uint8)) and per_chunk_ok(np.frombuffer(original, np.uint8))
    rng = random.Random(22)
    caught = 0
    for trial in range(300):
        data = bytearray(original)
        at = rng.randrange(len(MAGIC := wandbgen.MAGIC), len(data))
        if trial % 2:
            data[at] ^= 1 << rng.randrange(8)
        else:
            data[at : at + 16] = bytes(rng.randrange(256) for _ in range(len(data[at : at + 16])))
        buf = np.frombuffer(bytes(data), np.uint8)
        offs = frames._chunks(buf)[0]
        if not len(offs) or data[: len(MAGIC)] != MAGIC:
            continue
        want = per_chunk_ok(buf)
        assert one_pass_ok(buf) == want, (trial, at)
        caught += not want
    assert caught > 100


def walk_sorted(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> list[tuple]:
    w = fast.walk(buf, start, stop)
    return sorted(
        zip(w.owner.tolist(), w.tag_at.tolist(), w.number.tolist(), w.wire.tolist(), w.start.tolist(), w.stop.tolist(), w.value.tolist())
    )


def test_fields_equal_the_walk_one_field_at_a_time():
    raw = example()
    buf = np.frombuffer(raw, np.uint8)
    recs = frames.frame_records(buf, "x", True)
    top = fast.records(recs.buf, recs.start, recs.end)
    cases = [(recs.buf, top.start[top.wire == 2], top.stop[top.wire == 2])]
    rng = np.random.default_rng(5)
    for _ in range(30):  # random bytes, rich in the tags and lengths the fast path reads
        g = rng.integers(0, 256, 20000).astype(np.uint8)
        g[rng.random(20000) < 0.5] = rng.choice(np.array([0x0A, 0x12, 0x1A, 0x08, 0x82, 0x01, 0x7F, 0x80, 0x00], np.uint8))
        st = np.sort(rng.integers(0, 19000, 300))
        cases.append((g, st, np.minimum(st + rng.integers(0, 300, 300), 20000)))
    for buf_, st, en in cases:
        f = fast.fields(buf_, st, en)
        got = sorted(
            zip(
                f.owner.tolist(), f.tag_at.tolist(), f.number.tolist(), f.wire.tolist(), f.start.tolist(), f.stop.tolist(), f.value.tolist()
            )
        )
        assert got == walk_sorted(buf_, st, en)
        assert (f.broken == fast.walk(buf_, st, en).broken).all()
        assert f.head is not None
        padded = fast.padded(buf_, en)
        assert ((f.head ^ fast.words(padded, f.start)) & 0xFFFFFFFFFF == 0).all()  # the first 5 bytes of each field


def test_record_headers_equal_the_walk():
    rng = np.random.default_rng(7)
    raw = example()
    recs = frames.frame_records(np.frombuffer(raw, np.uint8), "x", True)
    cases = [(recs.buf, recs.start, recs.end)]
    for _ in range(30):
        g = rng.integers(0, 256, 5000).astype(np.uint8)
        g[rng.random(5000) < 0.4] = rng.choice(np.array([0x08, 0x12, 0x1A, 0x0A, 0x82, 0x01, 0x7F, 0x80, 0xFF, 0x00], np.uint8))
        st = np.sort(rng.integers(0, 4900, 40))
        cases.append((g, st, np.minimum(st + rng.integers(0, 120, 40), 5000)))
    for buf, st, en in cases:
        got = fast.records(buf, st, en)
        ref = fast.walk(buf, st, en)
        keep = ref.number != 1  # (records leave the ``num`` field out)
        assert got.owner.tolist() == ref.owner[keep].tolist() and got.start.tolist() == ref.start[keep].tolist()
        assert got.number.tolist() == ref.number[keep].tolist() and got.stop.tolist() == ref.stop[keep].tolist()
        assert (got.broken == ref.broken).all()


def test_item_keys_equal_the_full_item_check():
    """The summary fold's key-only reading of items accepts exactly what the full check does."""
    rng = np.random.default_rng(1)
    for _ in range(40):
        g = rng.integers(0, 256, 20000).astype(np.uint8)
        g[rng.random(20000) < 0.5] = rng.choice(np.array([0x0A, 0x12, 0x82, 0x01, 0x03, 0x05, 0x7F, 0x80], np.uint8))
        st = np.sort(rng.integers(0, 19000, 300))
        f = fast.fields(g, st, np.minimum(st + rng.integers(0, 200, 300), 20000))
        sel = np.flatnonzero(f.number > 0)
        (ke, ok), (_, ke_full, _, _, ok_full) = fast.item_key(g, f, sel), fast.items(g, f, sel)
        assert (ok == ok_full).all() and (ke[ok] == ke_full[ok]).all()


def test_repeated_messages_are_those_equal_to_one_of_the_next_two():
    rng = np.random.default_rng(3)
    for _ in range(30):
        pieces = [bytes(rng.integers(0, 3, rng.integers(0, 40)).astype(np.uint8)) for _ in range(6)]
        msgs = [pieces[i] for i in rng.integers(0, len(pieces), 200)]
        data = b"".join(msgs)
        stop = np.cumsum([len(m) for m in msgs])
        start = stop - np.array([len(m) for m in msgs])
        got = summary.repeated(np.frombuffer(data, np.uint8), start, stop)
        want = [len(m) >= 8 and m in msgs[i + 1 : i + 3] for i, m in enumerate(msgs)]
        assert got.tolist() == want


def test_chunk_sequence_stepped_through_the_records_in_several_only():
    """frames._sequence against a walk of every chunk (the LevelDB reader's state machine)."""

    def walk(kinds: list[int]) -> tuple[int, int]:
        inside, first = False, 0
        for i, k in enumerate(kinds):
            if (k in (frames.FULL, frames.FIRST)) == inside:
                return i, first if inside else i
            inside = k in (frames.FIRST, frames.MIDDLE)
            first = i if k == frames.FIRST else first
        return len(kinds), first if inside else len(kinds)

    rng = random.Random(5)
    for _ in range(20000):
        kinds: list[int] = []
        while len(kinds) < rng.randint(0, 12):
            kinds += [1] if rng.random() < 0.6 else [2] + [3] * rng.randint(0, 2) + [4]
        kinds = [k if rng.random() > 0.05 else rng.randint(1, 4) for k in kinds]
        assert frames._sequence(np.array(kinds, np.int64)) == walk(kinds), kinds
