"""Vectorized decoding of the scalar records of a TensorBoard event file.

:func:`decode_scalars` returns the same records, rows and problems as the reference walk
(:func:`sitegen.ingest.tfevents.tfrecord.iter_records` plus a protobuf parse), without per-record Python work
where the file is regular. Everything it does not decode itself is handed back in ``other``.

What the fast path assumes
--------------------------
Training logs are periodic: the same few tags are written once per step, so the sequence of
record *shapes* (length, tag, step varint width) repeats with some period of ``p`` records and
``P`` bytes. The decoder

1. walks records one at a time (the reference damage policy, mirrored in :mod:`._fastframe`) and
   classifies each payload; as soon as the last ``2p`` shapes repeat (and the period holds at
   least one fast record), it
2. predicts the following periods and checks them in blocks of up to 1 MB against the last
   walked period, as per-byte ranges checked by one min and one max reduction over the block's
   periods (read-only passes, cheaper than a masked compare): length and length-CRC bytes,
   every fixed payload byte (field tags, lengths, tag bytes, TF2 tensor/metadata bytes), the
   continuation bits of the step varint and a non-zero last step byte (canonical varint). Only
   wall_time, the step's value bits, the f32 and the payload CRC may vary. Records of the
   period that are not fast (e.g. a fixed-size histogram) are checked on their length only and go
   to ``other``. The verified run is accepted (its output rows are reserved, in file order);
   where the pattern breaks (a step varint widens, an image is interleaved, damage), the walk of
   step 1 resumes at the first differing period, and after each walked record the same template
   is tried again, so an interleaved image costs one walked record, not a new period search;
3. decodes the accepted runs of one template in batches of up to 1 MB (copied side by side when
   records interrupted them): wall_time, step and value of every period position are gathered
   by one fancy index over an overlapping view each, written into the reserved rows (the record
   offsets and tag ids of such runs are arithmetic: they are left to ``FastScalars`` to fill in
   on first use, and ``tfevents`` tiles the tag column from them), and
4. (``verify=True``) checks payload CRCs in bulk, see below.

Falls back to the per-record walk: at the start of a file, after every break of the pattern
(one record, or ``2p`` records when the shape itself changed), and for files with no repeating
shape at all (every record is then classified in Python: still correct, just not fast).

Fast layouts (anything else, however valid, goes to ``other``):

1. ``simple_value`` without metadata (tensorboardX, PyTorch, TF1 single value):
   ``09 f64 [10 step] 2a T+9 0a T+7 0a T tag 15 f32`` with T <= 118 and the payload ending there;
2. TF2 ``tf.summary.scalar``: ``09 f64 [10 step] 2a T+29 0a T+27 0a T tag 42 0a 08 01 12 00 22 04
   f32 4a 0b 0a 09 0a 07 "scalars"`` (T <= 98).

The step is absent (0) or a canonical varint of 1..9 bytes (an explicit ``10 00``, a padded
varint, or a negative step, which takes 10 bytes, goes to ``other``). Tags must be valid UTF-8.

Payload CRCs in bulk, and the residual risk
-------------------------------------------
CRC32C is affine over GF(2): for payloads of equal length, the XOR of their unmasked CRCs equals
the CRC of the XOR of the payloads, up to a constant (the CRC of that many zero bytes) when their
number is even. So the decoder XORs whole periods of a verified block together and checks every
record position with one CRC call. Identical damage in several records would cancel in an XOR,
so each block of periods is also checked on every "bit b of the period index is
set" subset (two read-only reductions of the block give them all, see
``_fastframe._subset_xors``). Any 1, 2 or 3 damaged records
of one (block, position) group are therefore always detected. Residual risk: damage is missed
if >= 4 records of one group carry exactly the same error syndrome (e.g. the same bit flipped
at the same byte) at indices that cancel on every subset (e.g. indices 0-3), or by a CRC32C
collision (2**-32 per group, the same odds as for one record checked alone). A failing group
is rechecked record by record, so exactly the bad records are reported (``bad-crc``) and
skipped. ``verify=False`` skips payload CRCs; length CRCs are always checked (the header bytes
are part of the template, and the walk checks them one by one).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Tuple, cast

import numpy as np

from sitegen.errors import Problem
from sitegen.ingest.tfevents import frames as ff
from sitegen.ingest.tfevents.tfrecord import FOOTER, HEADER

BLOCK_BYTES = 1 << 20  # largest stretch verified and decoded at once (it stays in L2 cache)
MAX_PERIOD = 256  # records per period considered


class FastScalars:
    """What :func:`decode_scalars` found; one row per fast scalar record, in file order."""

    def __init__(
        self,
        tag: list[str],
        record: np.ndarray,
        tag_id: np.ndarray,
        step: np.ndarray,
        wall_time: np.ndarray,
        value: np.ndarray,
        other: list[tuple[int, int, int]],
        problems: list[Problem],
        end: int,
        runs: list[Run] | None = None,
    ) -> None:
        self.tag = tag  # distinct tags in order of first appearance
        self._record = record  # int64: byte offset of the record each scalar came from
        self._tag_id = tag_id  # int32 index into `tag`
        self.step = step  # int64
        self.wall_time = wall_time  # float64
        self.value = value  # float64 (f32 simple_value widened exactly; TF2 DT_FLOAT tensor_content widened)
        self.other = other  # (record_offset, payload_offset, payload_length), file order
        self.problems = problems  # the same problems the reference walk reports on the same bytes
        self.end = end  # same meaning as Framing.end of the reference walk
        # rows that repeat one period (see Run), in row order; None: not known. Their record and
        # tag_id are filled in on first use: most callers never need them (tfevents._tag_column tiles)
        self.runs = runs
        self._todo = list(runs or [])

    @property
    def record(self) -> np.ndarray:
        self._fill()
        return self._record

    @property
    def tag_id(self) -> np.ndarray:
        self._fill()
        return self._tag_id

    def tag_id_of(self, lo: int, hi: int) -> np.ndarray:
        """``tag_id[lo:hi]``, filling in only the runs that overlap those rows."""
        if any(row < hi and lo < row + c * len(t) for row, c, t, _, _ in self._todo):
            self._fill()
        return self._tag_id[lo:hi]

    def _fill(self) -> None:
        for row, count, tids, rec0, period in self._todo:
            stop = row + count * len(tids)
            ff.fill_periodic(self._record[row:stop], rec0, period)
            ff.fill_periodic(self._tag_id[row:stop], tids, 0)
        self._todo = []


# rows first_row.. of `periods` periods: (first_row, periods, tag ids of a period, record offsets
# of the first period, period in bytes)
Run = Tuple[int, int, np.ndarray, np.ndarray, int]


@dataclass(eq=False, repr=False)
class _Pos:
    """One record position of a period."""

    c: int  # offset of the record inside the period
    n: int  # payload length
    layout: ff.Layout | None  # None: goes to `other`


if TYPE_CHECKING:

    class _FastPos(_Pos):
        """A position of ``_Template.fast``: one whose layout is not None (a type, not a class)."""

        layout: ff.Layout
else:
    _FastPos = _Pos


@dataclass(eq=False, repr=False)
class _Template:
    """A verified period: what every later period must look like."""

    pos: list[_Pos]
    period: int  # bytes
    tids: np.ndarray  # tag ids of the fast positions
    fast: list[_FastPos]
    # what every later period must repeat (the masked template bytes, the canonical last step
    # bytes), as byte ranges: byte i of each period lies in lo[i]..hi[i] (see ff.byte_ranges)
    lo: np.ndarray
    hi: np.ndarray


def decode_scalars(
    buf: bytes | memoryview | np.ndarray,
    *,
    path: str,
    verify: bool = True,
    start: int = 0,
    release: Callable[[int, int], None] | None = None,
) -> FastScalars:
    """Decode the fast scalar records of one event file; see the module docstring. ``release``:
    of a mapped file (:func:`sitegen.ingest.files.read_or_map`), for records of many megabytes."""
    if isinstance(buf, np.ndarray):
        a = np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
    else:
        a = np.frombuffer(memoryview(buf).cast("B"), np.uint8)
    with np.errstate(invalid="ignore"):  # a signalling NaN f32 is widened (quieted) like C does
        return _Decoder(a, path, verify, release).run(start)


class _Decoder:
    def __init__(self, a: np.ndarray, path: str, verify: bool, release: Callable[[int, int], None] | None = None) -> None:
        self.a, self.path, self.verify, self.size, self.release = a, path, verify, len(a), release
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
        self.tpl: _Template | None = None  # the period being decoded in bulk
        self.segs: list[tuple[int, int, int]] = []  # its verified stretches: (offset, periods, first row)
        self.queued = 0  # periods in segs
        self.runs: list[Run] = []  # rows whose record and tag_id are left to FastScalars._fill

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
        retry_at = fails = misses = 0
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
            (length,) = struct.unpack_from("<Q", a, off)  # type: ignore[arg-type]  # an ndarray is a buffer; numpy's stubs say so only for Python >= 3.12
            stop = off + HEADER + length + FOOTER
            if stop > size:
                self._problem(off, "truncated", f"incomplete record ({size - off} of {length + HEADER + FOOTER} bytes): not written yet")
                break
            if self.verify and not ff.crc_ok(a, off, length, self.release):
                self._problem(off, "bad-crc", "bad payload checksum; record skipped")
                sigs, recs, last_seen = [], [], {}
                off = end = stop
                continue
            sig = self._one(off, length)
            sigs.append(sig)
            recs.append(off)
            p = self._period(sigs, last_seen, sig)
            nxt = stop
            # a period without a fast record would only check lengths: same-length scalars
            # could then be swallowed into `other`, so such periods stay on the slow walk
            if p and len(sigs) >= retry_at and any(sg[0] for sg in sigs[-p:]):
                nxt = self._stretch(self._template(recs[-p:], stop, sigs[-p:]), stop)
                if nxt == stop:  # back off so a false period does not cost a numpy round per record
                    fails += 1
                    retry_at = len(sigs) + p * (1 << min(fails, 6))
            elif self.tpl is not None and misses < 2 * len(self.tpl.pos) + 8:
                # something interrupted the last stretch (an image, a histogram...): go on after it
                nxt = self._stretch(self.tpl, stop)
                misses = misses + 1 if nxt == stop else 0
            if nxt > stop:
                stop = nxt
                sigs, recs, last_seen, retry_at, fails, misses = [], [], {}, 0, 0, 0
            off = end = stop
        self._flush()
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
        self.wall[i] = struct.unpack_from("<d", a, off + HEADER + 1)[0]  # type: ignore[arg-type]  # an ndarray is a buffer; numpy's stubs say so only for Python >= 3.12
        self.val[i] = struct.unpack_from("<f", a, off + HEADER + lay.value_off)[0]  # type: ignore[arg-type]  # an ndarray is a buffer; numpy's stubs say so only for Python >= 3.12
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

    def _template(self, recs: list[int], base: int, sigs: list[tuple]) -> _Template:
        """The period formed by the walked records ``recs`` (ending at ``base``)."""
        first = recs[0]
        pos = [_Pos(r - first, s[1], s[0] if s[0] else None) for r, s in zip(recs, sigs)]
        mrow = np.concatenate([ff.record_mask(p.layout, p.n) for p in pos])
        fast = cast("list[_FastPos]", [p for p in pos if p.layout is not None])
        step_bytes = [p.c + HEADER + 9 + p.layout.s for p in fast if p.layout.s]  # must not be 0
        return _Template(
            pos,
            base - first,
            np.array([self._tag_id(p.layout.tag) for p in fast], np.int32),
            fast,
            *ff.byte_ranges(self.a[first:base] & mrow, mrow, step_bytes),
        )

    def _stretch(self, t: _Template, base: int) -> int:
        """Verify periods like ``t`` from ``base`` on and queue them; return the offset reached."""
        a, period = self.a, t.period
        if t is not self.tpl:
            self._flush()
            self.tpl = t
        avail = (self.size - base) // period
        cap = max(1, BLOCK_BYTES // period)
        first_len = t.pos[0].n
        while avail:
            cnt = min(cap - self.queued, avail)
            # where the period must end: the first period whose first record has another length
            # (the step varint grew, an image came...), found by one strided read; the range
            # check then covers the periods before it at once (one numpy round per block)
            same = ff.col(a, ff.U64, base, cnt, period) == first_len
            lim = cnt if same.all() else int(same.argmin())
            if not lim:
                break
            ok = lim if ff.in_ranges(a, base, lim, period, t.lo, t.hi) else self._first_mismatch(t, base, lim)
            if ok:  # reserve the rows now (file order), decode them with the batch
                self.segs.append((base, ok, self.n))
                self.n += ok * len(t.fast)
                self.queued += ok
                base += ok * period
                avail -= ok
                if self.queued >= cap:
                    self._flush()
            if ok < cnt:
                break
        return base

    def _first_mismatch(self, t: _Template, base: int, cnt: int) -> int:
        """Index of the first of ``cnt`` periods at ``base`` that does not match ``t`` (one of them
        does not): bisection with the range check, about one range check of the block in all."""
        lo, hi = 0, cnt  # periods before lo match; one in lo..hi-1 does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if ff.in_ranges(self.a, base + lo * t.period, mid - lo, t.period, t.lo, t.hi):
                lo = mid
            else:
                hi = mid
        return lo

    def _flush(self) -> None:
        """Decode the queued periods of the current template as one contiguous batch."""
        t, segs = self.tpl, self.segs
        if not segs:
            return
        assert t is not None  # stretches are queued only with their template (see _stretch)
        a, period, fast, nf = self.a, t.period, t.fast, len(t.fast)
        self.segs, cnt, self.queued = [], self.queued, 0
        if len(segs) == 1:
            blk, b0 = a, segs[0][0]
        else:  # copy the stretches side by side: then every field is one strided view
            blk, b0 = np.concatenate([a[b : b + c * period] for b, c, _ in segs]), 0
        if nf:
            r0 = segs[0][2]
            direct = r0 + cnt * nf == self.n  # no slow rows between the stretches
            out: list[np.ndarray]
            if direct:
                out = [x[r0 : r0 + cnt * nf].reshape(cnt, nf) for x in (self.step, self.wall, self.val)]
            else:  # slow rows sit between the stretches: decode aside, then copy into place
                out = [np.empty((cnt, nf), x.dtype) for x in (self.step, self.wall, self.val)]
            step, wall, val = out
            cs = np.array([p.c + HEADER for p in fast], np.int64)
            self.runs += [(row, c, t.tids, b + cs - HEADER, period) for b, c, row in segs]
            wall[:] = ff.fields(blk, "<f8", b0, cnt, period, cs + 1)
            val[:] = ff.fields(blk, "<f4", b0, cnt, period, cs + [p.layout.value_off for p in fast])
            widths = {p.layout.s for p in fast}
            for width in widths:  # usually one: every record of a step has its width
                js = [j for j, p in enumerate(fast) if p.layout.s == width]
                steps = ff.decode_steps(blk, b0, cs[js] + 10, width, cnt, period) if width else 0
                if len(widths) == 1:
                    step[:] = steps  # (a plain copy, much faster than the fancy one)
                else:
                    step[:, js] = steps
            if not direct:
                k = 0
                for _, c, row in segs:
                    for x, y in zip((self.step, self.wall, self.val), out):
                        x[row : row + c * nf] = y[k : k + c].reshape(-1)
                    k += c
        bad: list[int] = []
        if self.verify:
            for off in ff.crc_block_bad(blk, b0, period, cnt, [(p.c, p.n) for p in t.pos]):
                k, c = divmod(off - b0, period)
                bad.append(self._period_start(segs, k, period) + c)
                self._problem(bad[-1], "bad-crc", "bad payload checksum; record skipped")
            self.bad_rows += bad
        others = [p.c for p in t.pos if p.layout is None]
        if others:
            skip = set(bad)
            n_of = {p.c: p.n for p in t.pos}
            starts = [b + i * period for b, count, _ in segs for i in range(count)]
            self.other += [(o, o + HEADER, n_of[c]) for s0 in starts for c in others if (o := s0 + c) not in skip]

    @staticmethod
    def _period_start(segs: list[tuple[int, int, int]], k: int, period: int) -> int:
        """File offset of the ``k``-th period of a batch made of the stretches ``segs``."""
        for b, c, _ in segs:
            if k < c:
                return b + k * period
            k -= c
        raise IndexError(k)

    def _result(self, end: int) -> FastScalars:
        n = self.n
        res = FastScalars(
            self.tags, self.rec[:n], self.tid[:n], self.step[:n], self.wall[:n], self.val[:n], self.other, self.problems, end, self.runs
        )
        self.problems.sort(key=lambda pr: cast(int, pr.offset))  # all made by _problem, with an offset
        self.other.sort()
        if not self.bad_rows:
            return res
        cols = [res.record, res.tag_id, res.step, res.wall_time, res.value]
        keep = ~np.isin(cols[0], np.array(sorted(set(self.bad_rows)), np.int64))
        cols = [c[keep] for c in cols]
        # a tag may have lost its first rows (or all of them): renumber by first appearance
        ids, first = np.unique(cols[1], return_index=True)
        order = ids[np.argsort(first)]
        remap = np.zeros(len(self.tags), np.int32)
        remap[order] = np.arange(len(order), dtype=np.int32)
        cols[1] = remap[cols[1]]
        tags = [self.tags[i] for i in order]
        record, tag_id, step, wall_time, value = cols
        return FastScalars(tags, record, tag_id, step, wall_time, value, other=self.other, problems=self.problems, end=end)
