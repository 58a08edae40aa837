"""Vectorized decoding of the scalar records of a TensorBoard event file.

:func:`decode_scalars` returns the same records, rows and problems as the reference walk
(:func:`sitegen.read.tfrecord.iter_records` plus a protobuf parse), without per-record Python work
where the file is regular. Everything it does not decode itself is handed back in ``other``.

What the fast path assumes
--------------------------
Training logs are periodic: the same few tags are written once per step, so the sequence of
record *shapes* (length, tag, step varint width) repeats with some period of ``p`` records and
``P`` bytes. The decoder

1. walks records one at a time (the reference damage policy, mirrored in :mod:`._fastframe`) and
   classifies each payload; as soon as the last ``2p`` shapes repeat, it
2. predicts the following periods and checks them in blocks of up to ~4 MB with one vectorized
   compare per 64-bit word of a byte template: length and length-CRC bytes, every fixed payload
   byte (field tags, lengths, tag bytes, TF2 tensor/metadata bytes) and the continuation bits of
   the step varint. Only wall_time, the step's value bits, the f32 and the payload CRC may vary.
   The verified run is accepted; where the pattern breaks (a step varint widens, an image or a
   histogram is interleaved, damage), it goes back to step 1 at the first differing period;
3. extracts wall_time, step and value of each period position as strided numpy views, and
4. (``verify=True``) checks payload CRCs in bulk, see below.

Fast layouts (anything else, however valid, goes to ``other``):

1. ``simple_value`` without metadata (tensorboardX, PyTorch, TF1 single value):
   ``09 f64 [10 step] 2a T+9 0a T+7 0a T tag 15 f32`` with T <= 118 and the payload ending there;
2. TF2 ``tf.summary.scalar``: ``09 f64 [10 step] 2a T+29 0a T+27 0a T tag 42 0a 08 01 12 00 22 04
   f32 4a 0b 0a 09 0a 07 "scalars"`` (T <= 98).

The step is absent (0) or a varint of 1..9 bytes (negative steps take 10 bytes: ``other``).
Tags must be valid UTF-8.

Payload CRCs in bulk, and the residual risk
-------------------------------------------
CRC32C is affine over GF(2), so one CRC call checks the XOR of all equal-length payloads of one
period position in one block against the XOR of their stored CRCs. Identical damage in several
records cancels in an XOR; the group is therefore also checked on each "bit b of the record's
index in the block is set" subset (an XOR tree, ~2x the work of one XOR). Any 1, 2 or 3 damaged
records of a group are detected. Damage is missed only if >= 4 records of one group carry exactly
the same error syndrome (e.g. the same bit flipped at the same place) at indices that pair up on
every subset, or by a CRC32C collision (2**-32 per group): far below the risk of damage that
the CRC itself cannot see. A failing group is rechecked record by record, so exactly the bad
records are reported (``bad-crc``) and skipped. ``verify=False`` skips payload CRCs; length
CRCs are always checked (as part of the header template).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import Problem
from . import _fastframe as ff
from .tfrecord import FOOTER, HEADER

BLOCK_BYTES = 4 << 20  # largest stretch verified and decoded at once
MAX_PERIOD = 256  # records per period considered


@dataclass
class FastScalars:
    tag: list[str]  # distinct tags in order of first appearance
    record: np.ndarray  # int64: byte offset of the record each scalar came from
    tag_id: np.ndarray  # int32 index into `tag`
    step: np.ndarray  # int64
    wall_time: np.ndarray  # float64
    value: np.ndarray  # float64
    other: list[tuple[int, int, int]] = field(default_factory=list)  # (record, payload, length)
    problems: list[Problem] = field(default_factory=list)
    end: int = 0


@dataclass
class _Pos:
    """One record position of a period."""

    c: int  # offset of the record inside the period
    n: int  # payload length
    layout: ff.Layout | None  # None: goes to `other`


def decode_scalars(
    buf: bytes | memoryview | np.ndarray, *, path: str, verify: bool = True, start: int = 0
) -> FastScalars:
    """Decode the fast scalar records of one event file; see the module docstring."""
    if isinstance(buf, np.ndarray):
        a = np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
    else:
        a = np.frombuffer(memoryview(buf).cast("B"), np.uint8)
    return _Decoder(a, path, verify).run(start)


class _Decoder:
    def __init__(self, a: np.ndarray, path: str, verify: bool) -> None:
        self.a, self.path, self.verify, self.size = a, path, verify, len(a)
        cap = self.size // ff.MIN_FAST_RECORD + 1
        self.rec = np.empty(cap, np.int64)
        self.tid = np.empty(cap, np.int32)
        self.step = np.empty(cap, np.int64)
        self.wall = np.empty(cap, np.float64)
        self.val = np.empty(cap, np.float64)
        self.n = 0
        self.tags: list[str] = []
        self.tag_ids: dict[bytes, int] = {}
        self.other: list[tuple[int, int, int]] = []
        self.problems: list[Problem] = []
        self.bad_rows: list[int] = []  # record offsets of fast rows written before their CRC failed

    def _tag_id(self, tag: bytes) -> int:
        tid = self.tag_ids.get(tag)
        if tid is None:
            tid = self.tag_ids[tag] = len(self.tags)
            self.tags.append(tag.decode("utf-8"))
        return tid

    def _problem(self, off: int, kind: str, message: str) -> None:
        self.problems.append(Problem(self.path, off, kind, message))

    # -- the walk: one record at a time until a period shows, then whole blocks ---------------
    def run(self, start: int) -> FastScalars:
        a, size = self.a, self.size
        off = end = start
        sigs: list[tuple] = []  # shapes of the records walked since the last stretch
        recs: list[int] = []  # their offsets
        last_seen: dict[tuple, list[int]] = {}
        retry_at, fails = 0, 0
        while off < size:
            if size - off < HEADER:
                self._problem(off, "truncated", f"incomplete record header ({size - off} bytes): not written yet")
                break
            if not ff.length_ok(a, off):
                nxt = ff.resync(a, off + 1)
                skipped = (nxt if nxt is not None else size) - off
                self._problem(off, "bad-length", f"bad length checksum; skipped {skipped} bytes to the next valid record")
                if nxt is None:
                    break
                off = nxt
                sigs, recs, last_seen = [], [], {}
                continue
            (length,) = struct.unpack_from("<Q", a, off)
            stop = off + HEADER + length + FOOTER
            if stop > size:
                self._problem(off, "truncated", f"incomplete record ({size - off} of {length + HEADER + FOOTER} bytes): not written yet")
                break
            if self.verify and not ff.crc_ok(a, off, length):
                self._problem(off, "bad-crc", "bad payload checksum; record skipped")
                sigs, recs, last_seen = [], [], {}
            else:
                sig = self._one(off, length)
                sigs.append(sig)
                recs.append(off)
                p = self._period(sigs, last_seen, sig)
                if p and len(sigs) >= retry_at:
                    nxt = self._stretch(recs[-p:], stop, sigs[-p:])
                    if nxt > stop:
                        stop = nxt
                        sigs, recs, last_seen, retry_at, fails = [], [], {}, 0, 0
                    else:  # back off so a false period does not cost a numpy round per record
                        fails += 1
                        retry_at = len(sigs) + p * (1 << min(fails, 6))
            off = end = stop
        return self._result(end)

    def _one(self, off: int, length: int) -> tuple:
        """Decode one record in Python (slow path); return its shape."""
        a = self.a
        hit = ff.classify(a[off + HEADER : off + HEADER + length].tobytes()) if length <= ff.MAX_FAST_PAYLOAD else None
        if hit is None:
            self.other.append((off, off + HEADER, length))
            return (0, length)
        lay, step = hit
        i = self.n
        self.rec[i], self.tid[i], self.step[i] = off, self._tag_id(lay.tag), step
        self.wall[i] = struct.unpack_from("<d", a, off + HEADER + 1)[0]
        self.val[i] = struct.unpack_from("<f", a, off + HEADER + lay.value_off)[0]
        self.n = i + 1
        return (lay, length)

    @staticmethod
    def _period(sigs: list[tuple], seen: dict[tuple, list[int]], sig: tuple) -> int:
        """Smallest p such that the last 2p shapes are one period repeated (0 if none)."""
        i = len(sigs) - 1
        prev = seen.setdefault(sig, [])
        found = 0
        for j in reversed(prev):  # a period must be the distance to an earlier equal shape
            p = i - j
            if 2 * p > i + 1 or p > MAX_PERIOD:
                break
            if sigs[-p:] == sigs[-2 * p : -p]:
                found = p
                break
        prev.append(i)
        if len(prev) > 8:
            del prev[0]
        return found

    def _stretch(self, recs: list[int], base: int, sigs: list[tuple]) -> int:
        """Verify and decode periods like the one at ``recs`` starting at ``base``; return the offset reached."""
        a = self.a
        first = recs[0]
        period = base - first
        pos = [_Pos(r - first, s[1], s[0] if s[0] else None) for r, s in zip(recs, sigs)]
        words = []
        for p in pos:
            m = ff.record_mask(p.layout, p.n)
            words += ff.template_words(a[first + p.c : first + p.c + len(m)], m, p.c)
        avail = (self.size - base) // period
        cap = max(1, BLOCK_BYTES // period)
        blk = min(16, cap)
        while avail:
            cnt = min(blk, avail)
            acc = None
            for w, mw, ew, full in words:
                t = np.bitwise_xor(ff.col(a, ff._U64, base + w, cnt, period), ew)
                if not full:
                    t &= mw
                if acc is None:
                    acc = t
                else:
                    acc |= t
            bad = np.flatnonzero(acc)
            ok = int(bad[0]) if bad.size else cnt
            if ok:
                self._block(base, ok, period, pos)
                base += ok * period
                avail -= ok
            if ok < cnt:
                break
            blk = min(blk * 4, cap)
        return base

    def _block(self, base: int, cnt: int, period: int, pos: list[_Pos]) -> None:
        """Decode ``cnt`` verified periods starting at ``base``."""
        a = self.a
        fast = [p for p in pos if p.layout is not None]
        nf = len(fast)
        if nf:
            r0, r1 = self.n, self.n + cnt * nf
            rec = self.rec[r0:r1].reshape(cnt, nf)
            tid = self.tid[r0:r1].reshape(cnt, nf)
            step = self.step[r0:r1].reshape(cnt, nf)
            wall = self.wall[r0:r1].reshape(cnt, nf)
            val = self.val[r0:r1].reshape(cnt, nf)
            for j, p in enumerate(fast):
                lay, o = p.layout, base + p.c
                rec[:, j] = np.arange(o, o + cnt * period, period, dtype=np.int64)
                tid[:, j] = self._tag_id(lay.tag)
                wall[:, j] = ff.col(a, "<f8", o + HEADER + 1, cnt, period)
                val[:, j] = ff.col(a, "<f4", o + HEADER + lay.value_off, cnt, period)
                step[:, j] = ff.decode_steps(a, o + HEADER + 10, lay.s, cnt, period) if lay.s else 0
            self.n = r1
        bad: set[int] = set()
        if self.verify:
            for p in pos:
                for k in ff.crc_group_bad(a, base + p.c, p.n, cnt, period):
                    bad.add(base + k * period + p.c)
            for off in sorted(bad):
                self._problem(off, "bad-crc", "bad payload checksum; record skipped")
            self.bad_rows += bad
        others = [p for p in pos if p.layout is None]
        if others:
            for k in range(cnt):
                for p in others:
                    o = base + k * period + p.c
                    if o not in bad:
                        self.other.append((o, o + HEADER, p.n))

    def _result(self, end: int) -> FastScalars:
        n = self.n
        cols = [self.rec[:n], self.tid[:n], self.step[:n], self.wall[:n], self.val[:n]]
        tags = self.tags
        if self.bad_rows:
            keep = ~np.isin(cols[0], np.array(sorted(set(self.bad_rows)), np.int64))
            cols = [c[keep] for c in cols]
            # a tag may have lost its first rows (or all of them): renumber by first appearance
            ids, first = np.unique(cols[1], return_index=True)
            order = ids[np.argsort(first)]
            remap = np.zeros(len(tags), np.int32)
            remap[order] = np.arange(len(order), dtype=np.int32)
            cols[1] = remap[cols[1]]
            tags = [tags[i] for i in order]
        self.problems.sort(key=lambda pr: pr.offset)
        return FastScalars(tags, *cols, other=self.other, problems=self.problems, end=end)
