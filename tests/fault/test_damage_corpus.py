"""Every truncation point and 500 bit flips + 500 byte-range overwrites of small real-writer logs.

The oracle is the reference decoder on the undamaged file, record by record (see conftest). For
each damaged file both the vectorized and the reference decoders must keep exactly the intact
records, report the damage as problems naming the record offsets, and never raise.
"""
from __future__ import annotations

import itertools
import random

import pytest

from tests.support import corpus

TRUNCATED = {"truncated"}
TF_DAMAGE = {"bad-crc", "bad-length"}
VDL_DAMAGE = {"bad-record", "bad-value", "unsupported", "bad-wall-time"}


def _check_truncations(orig, tmp_path, decode, name):
    cut_file = tmp_path / name
    starts = [o for o, _ in orig.offsets]
    for k in range(len(orig.data) + 1):
        cut_file.write_bytes(orig.data[:k])
        keep = [i for i, (o, s) in enumerate(orig.offsets) if o + s <= k]
        partial = k != len(orig.data) and k not in starts
        boundary = orig.offsets[len(keep)][0] if len(keep) < len(orig.offsets) else len(orig.data)
        for fast in (True, False):
            run, state = decode(cut_file, fast)
            where = f"cut at {k} (fast={fast})"
            assert corpus.items(run) == orig.expected(keep), where
            assert [(p.kind, p.offset) for p in run.problems] == ([("truncated", boundary)] if partial else []), where
            assert run.files[0].decoded_bytes == state["end"] == boundary, where


def test_tfevents_every_truncation(tbx, tmp_path):
    _check_truncations(tbx, tmp_path, lambda p, fast: corpus.tf_decode(p, fast=fast), "events.out.tfevents.1.cut")


def test_visualdl_every_truncation(vdl, tmp_path):
    _check_truncations(vdl, tmp_path, lambda p, fast: corpus.vdl_decode(p, fast=fast), "vdlrecords.1.log")


def _damages(data: bytes, seed: int):
    """500 single-bit flips, then 500 overwrites of 1-64 bytes with random bytes (fixed seed)."""
    rng = random.Random(seed)
    for trial in range(1000):
        buf = bytearray(data)
        if trial < 500:
            lo = rng.randrange(len(data))
            buf[lo] ^= 1 << rng.randrange(8)
            hi = lo + 1
        else:
            lo = rng.randrange(len(data))
            hi = min(len(data), lo + rng.randint(1, 64))
            buf[lo:hi] = bytes(rng.randrange(256) for _ in range(hi - lo))
        if buf != data:
            yield trial, bytes(buf)


def _hit(orig, buf: bytes) -> list[int]:
    return [i for i, (o, s) in enumerate(orig.offsets) if buf[o : o + s] != orig.data[o : o + s]]


def _alternatives(orig, buf: bytes, hit: list[int], decode, tmp_path):
    """Every acceptable outcome: each damaged record either lost, or -- when its damaged bytes
    still parse on their own (no CRC, or verify=False) -- replaced by what they parse to."""
    alone_file = tmp_path / "alone.events.out.tfevents.vdlrecords"
    choices = []
    for i in hit:
        o, s = orig.offsets[i]
        alone_file.write_bytes(buf[o : o + s])
        alone, _ = decode(alone_file)
        options = [[]]
        if not alone.problems:
            options.append(corpus.items(alone))
        choices.append(options)
    for combo in itertools.product(*choices):
        replaced = dict(zip(hit, combo))
        flat = [it for j in range(len(orig.offsets)) for it in (replaced[j] if j in replaced else orig.per_record[j])]
        yield corpus.group(flat)


def test_tfevents_bit_flips_and_overwrites(tbx, tmp_path):
    damaged = tmp_path / "events.out.tfevents.1.damaged"
    for trial, buf in _damages(tbx.data, seed=20240601):
        hit = _hit(tbx, buf)
        damaged.write_bytes(buf)
        offsets = {tbx.offsets[i][0] for i in hit}
        for fast in (True, False):
            where = f"trial {trial}, records {hit} damaged (fast={fast})"
            # verify=True: every damaged record is lost, every intact one kept (CRCs catch all)
            run, state = corpus.tf_decode(damaged, fast=fast)
            assert corpus.items(run) == tbx.expected([i for i in range(len(tbx.offsets)) if i not in hit]), where
            kinds = {(p.kind, p.offset) for p in run.problems}
            assert run.problems and all(k in TF_DAMAGE and o in offsets for k, o in kinds), (where, run.problems)
            if len(tbx.offsets) - 1 not in hit:
                assert state["end"] == len(buf), where
            # verify=False: a damaged payload that still parses is a changed record, not a loss
            run, _ = corpus.tf_decode(damaged, fast=fast, verify=False)
            got = corpus.items(run)
            alts = list(_alternatives(tbx, buf, hit, lambda p: corpus.tf_decode(p, fast=False, verify=False), tmp_path))
            assert got in alts, where


def test_tfevents_single_flip_loses_exactly_that_record(tbx, tmp_path):
    """A flip in the payload -> bad-crc at that record; a flip in the length -> bad-length there;
    all later records recovered (checked at every byte of every record's framing and one
    payload byte per record)."""
    damaged = tmp_path / "events.out.tfevents.1.flip"
    for i, (o, s) in enumerate(tbx.offsets):
        for pos, kind in [(o + b, "bad-length") for b in range(12)] + [(o + 12 + (s - 16) // 2, "bad-crc"), (o + s - 1, "bad-crc")]:
            buf = bytearray(tbx.data)
            buf[pos] ^= 0x10
            damaged.write_bytes(bytes(buf))
            for fast in (True, False):
                run, _ = corpus.tf_decode(damaged, fast=fast)
                where = f"record {i}, byte {pos} (fast={fast})"
                assert corpus.items(run) == tbx.expected([j for j in range(len(tbx.offsets)) if j != i]), where
                assert [(p.kind, p.offset) for p in run.problems] == [(kind, o)], where


def test_visualdl_bit_flips_and_overwrites(vdl, tmp_path):
    damaged = tmp_path / "vdlrecords.1.log"
    lost = changed = 0
    for trial, buf in _damages(vdl.data, seed=20240602):
        hit = _hit(vdl, buf)
        damaged.write_bytes(buf)
        offsets = {vdl.offsets[i][0] for i in hit}
        alts = list(_alternatives(vdl, buf, hit, lambda p: corpus.vdl_decode(p, fast=False), tmp_path))
        for fast in (True, False):
            where = f"trial {trial}, records {hit} damaged (fast={fast})"
            run, state = corpus.vdl_decode(damaged, fast=fast)
            got = corpus.items(run)
            # every intact record is recovered; a damaged one is lost or (no CRC) changed
            assert got in alts, where
            assert all(p.kind in VDL_DAMAGE and p.offset in offsets for p in run.problems), (where, run.problems)
            if len(vdl.offsets) - 1 not in hit:
                assert state["end"] == len(buf), where
        lost += got == alts[0]
        changed += got != alts[0]
    assert lost > 300 and changed > 0  # the corpus exercises both outcomes


@pytest.mark.parametrize("fast", [True, False])
def test_visualdl_flip_in_length_loses_that_record_only(vdl, tmp_path, fast):
    damaged = tmp_path / "vdlrecords.1.log"
    for i, (o, s) in enumerate(vdl.offsets):
        for b in range(8):
            buf = bytearray(vdl.data)
            buf[o + b] ^= 0x40
            damaged.write_bytes(bytes(buf))
            run, _ = corpus.vdl_decode(damaged, fast=fast)
            where = f"record {i}, length byte {b}"
            assert corpus.items(run) == vdl.expected([j for j in range(len(vdl.offsets)) if j != i]), where
            assert [(p.kind, p.offset) for p in run.problems] == [("bad-record", o)], where
