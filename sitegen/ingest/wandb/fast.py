"""Protobuf fields of many messages at once: the vectorized walk behind the W&B reader.

Why: a 50,000-step run holds ~150,000 records of ~8 items each; walking them one field at a
time in Python costs seconds. Here every message advances by one field per numpy step (a
record has a handful of fields), keys are told apart by hashing their bytes (checked byte for
byte), and the JSON numbers are parsed by one numpy cast. A message that is not well-formed
protobuf is marked ``broken``; the caller reports it and reads what remains.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

VARINT, I64, LEN, I32 = 0, 1, 2, 5


def varints(buf: np.ndarray, pos: np.ndarray, limit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, position after, ok) of the varint at each ``pos`` (not past ``limit``). One byte
    (the common case) in one step; longer ones byte by byte."""
    inside = pos < limit
    b = buf[np.where(inside, pos, 0)].astype(np.uint64)
    ok = inside & (b < 0x80)
    value = np.where(ok, b, np.uint64(0))
    end = pos + 1
    more = np.flatnonzero(inside & ~ok)
    if len(more):
        v, e, k = np.zeros(len(more), np.uint64), pos[more].copy(), np.zeros(len(more), bool)
        done = np.zeros(len(more), bool)
        for i in range(10):
            p = pos[more] + i
            live = ~done & (p < limit[more])
            done |= ~live
            if not live.any():
                break
            bi = buf[np.where(live, p, 0)].astype(np.uint64)
            v[live] |= (bi[live] & np.uint64(0x7F)) << np.uint64(7 * i)
            last = live & (bi < 0x80)
            k |= last
            e[last] = p[last] + 1
            done |= last
        value[more], end[more], ok[more] = v, e, k
    return value, end, ok


@dataclass
class Fields:
    """Every field of a set of messages: ``owner`` (the message's index), ``number``, ``wire``,
    ``tag_at`` (where its tag starts), ``start``/``stop`` (a LEN field's bytes), ``value`` (a
    varint's value), in order within each owner."""

    owner: np.ndarray
    number: np.ndarray
    wire: np.ndarray
    tag_at: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    value: np.ndarray
    broken: np.ndarray  # per message: not well-formed (its fields up to the damage are listed)

    def pick(self, number: int, wire: int = LEN) -> np.ndarray:
        return np.flatnonzero((self.number == number) & (self.wire == wire))


def _fields_at(buf: np.ndarray, p: np.ndarray, lim: np.ndarray) -> tuple[np.ndarray, ...]:
    """(number, wire type, start, stop, varint value, ok) of the field at each ``p``. Tags of
    one or two bytes (every field of these messages) are read in one step, and so are LEN
    lengths under 128; varint values and longer lengths go through :func:`varints`."""
    top = len(buf) - 1
    t0 = buf[np.minimum(p, top)].astype(np.int64)
    t1 = buf[np.minimum(p + 1, top)].astype(np.int64)
    one = t0 < 0x80
    key = np.where(one, t0, (t0 & 0x7F) | (t1 << 7))
    after = p + np.where(one, 1, 2)
    number, wire = key >> 3, key & 7
    ok = (one | (t1 < 0x80)) & (after <= lim) & (number > 0)
    length = np.where(one, t1, buf[np.minimum(p + 2, top)].astype(np.int64))
    s = after + 1
    e = s + length
    val = np.zeros(len(p), np.uint64)
    is_len = ok & (wire == LEN)
    short = is_len & (length < 0x80)
    long_len = np.flatnonzero(is_len & ~short)
    if len(long_len):
        ln, a2, ok2 = varints(buf, after[long_len], lim[long_len])
        s[long_len] = a2
        e[long_len] = a2 + np.minimum(ln, np.uint64(2**62)).astype(np.int64)
        ok[long_len] &= ok2
    var = np.flatnonzero(ok & (wire == VARINT))
    if len(var):
        v, a2, ok2 = varints(buf, after[var], lim[var])
        val[var], s[var], e[var] = v, a2, a2
        ok[var] &= ok2
    fixed = ok & ((wire == I64) | (wire == I32))
    s[fixed] = after[fixed]
    e[fixed] = after[fixed] + np.where(wire[fixed] == I64, 8, 4)
    ok &= (wire == LEN) | (wire == VARINT) | fixed
    ok &= e <= lim
    odd = np.flatnonzero(~(one | (t1 < 0x80)) & (p < lim))
    if len(odd):  # tags of three bytes or more (field numbers >= 2048)
        n2, w2, s2, e2, v2, ok2 = _general(buf, p[odd], lim[odd])
        number[odd], wire[odd], s[odd], e[odd], val[odd], ok[odd] = n2, w2, s2, e2, v2, ok2
    return number, wire, s, e, val, ok


def _general(buf: np.ndarray, p: np.ndarray, lim: np.ndarray) -> tuple[np.ndarray, ...]:
    key, after, ok = varints(buf, p, lim)
    wire = (key & np.uint64(7)).astype(np.int64)
    number = (key >> np.uint64(3)).astype(np.int64)
    ok &= (number > 0) & ((wire == VARINT) | (wire == LEN) | (wire == I64) | (wire == I32))
    val = np.zeros(len(p), np.uint64)
    s = after.copy()
    e = after.copy()
    v_var = ok & (wire == VARINT)
    if v_var.any():
        v, a2, ok2 = varints(buf, after[v_var], lim[v_var])
        val[v_var], e[v_var] = v, a2
        ok[np.flatnonzero(v_var)[~ok2]] = False
    v_len = ok & (wire == LEN)
    if v_len.any():
        ln, a2, ok2 = varints(buf, after[v_len], lim[v_len])
        s[v_len] = a2
        e[v_len] = a2 + np.minimum(ln, np.uint64(2**62)).astype(np.int64)
        ok[np.flatnonzero(v_len)[~ok2]] = False
    e[wire == I64] += 8
    e[wire == I32] += 4
    ok &= e <= lim
    return number, wire, s, e, val, ok


def walk(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> Fields:
    """The fields of the messages ``buf[start[i]:stop[i]]``, all messages a field at a time."""
    n = len(start)
    pos = start.astype(np.int64).copy()
    broken = np.zeros(n, bool)
    idx = np.flatnonzero(pos < stop)
    parts: list[tuple[np.ndarray, ...]] = []
    while len(idx):
        lim = stop[idx]
        number, wire, s, e, val, ok = _fields_at(buf, pos[idx], lim)
        broken[idx[~ok]] = True
        good = idx[ok]
        parts.append((good, number[ok], wire[ok], pos[good], s[ok], e[ok], val[ok]))
        pos[good] = e[ok]
        idx = good[pos[good] < stop[good]]
    if not parts:
        z = np.zeros(0, np.int64)
        return Fields(z, z, z, z, z, z, np.zeros(0, np.uint64), broken)
    cols = [np.concatenate([p[i] for p in parts]) for i in range(7)]
    # by owner, then position: the k-th field of an owner came in step k, so its place is the
    # owner's first place plus k
    counts = np.bincount(cols[0], minlength=n)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    step = np.concatenate([np.full(len(p[0]), k) for k, p in enumerate(parts)])
    place = first[cols[0]] + step
    out = [np.empty_like(c) for c in cols]
    for o, c in zip(out, cols):
        o[place] = c
    return Fields(out[0], out[1], out[2], out[3], out[4], out[5], out[6], broken)


_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], np.uint64)


def _tail_words(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian words at ``at`` for those within 8 bytes of the end (zero-filled)."""
    out = np.zeros(len(at), np.uint64)
    for i in np.flatnonzero(at > len(buf) - 8).tolist():
        chunk = buf[max(int(at[i]), 0) : int(at[i]) + 8].tobytes().ljust(8, b"\0")
        out[i] = int.from_bytes(chunk, "little")
    return out


def _matrix(buf: np.ndarray, start: np.ndarray, length: np.ndarray, width: int) -> np.ndarray:
    """Row ``i``: ``buf[start[i]:start[i] + length[i]]`` zero-padded to ``width`` bytes."""
    words = width // 8
    out = np.empty((len(start), words), np.uint64)
    top = len(buf) - 8
    octets = np.lib.stride_tricks.as_strided(buf, (max(top + 1, 0), 8), (1, 1)) if top >= 0 else None
    for j in range(words):
        at = start + 8 * j
        if octets is None:
            w = np.zeros(len(start), np.uint64)
        else:
            w = np.ascontiguousarray(octets[np.clip(at, 0, top)]).view(np.uint64).ravel()
            w = np.where(at <= top, w, _tail_words(buf, at))
        out[:, j] = w & _MASKS[np.clip(length - 8 * j, 0, 8)]
    return out.view(np.uint8).reshape(len(start), width)


def key_codes(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """Codes of the byte strings ``buf[start:stop]`` (equal bytes, equal code) and each code's
    bytes. Hashed in numpy, each string then compared with its code's first one."""
    n = len(start)
    if not n:
        return np.zeros(0, np.int64), []
    length = stop - start
    width = int(min(length.max(), 64))
    width = max(8, -(-width // 8) * 8)
    fits = length <= width
    words = _matrix(buf, start, np.where(fits, length, 0), width).view(np.uint64)
    h = length.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            h = (h ^ words[:, j]) * np.uint64(0x100000001B3) + np.uint64(j + 1)
    uniq, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    same = (words == words[first[inverse]]).all(axis=1) & (length == length[first[inverse]]) & fits
    codes = inverse.astype(np.int64)
    names = [buf[start[i] : stop[i]].tobytes() for i in first.tolist()]
    odd = np.flatnonzero(~same)
    if len(odd):  # a hash collision or a long key: told apart by their bytes
        index = {b: i for i, b in enumerate(names)}
        for i in odd.tolist():
            b = buf[start[i] : stop[i]].tobytes()
            codes[i] = index.setdefault(b, len(index))
            if codes[i] == len(names):
                names.append(b)
    return codes, names


def numbers(buf: np.ndarray, start: np.ndarray, stop: np.ndarray, raw: bytes | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(value, is a number) of the JSON texts ``buf[start:stop]``: numbers, ``NaN`` and
    ``[-]Infinity``; anything else (objects, strings, bools) not. ``raw``: ``buf`` as bytes."""
    n = len(start)
    out = np.full(n, np.nan)
    if not n:
        return out, np.zeros(0, bool)
    length = stop - start
    first = buf[np.minimum(start, len(buf) - 1)]
    numeric = (length > 0) & (((first >= ord("0")) & (first <= ord("9"))) | (first == ord("-")) | (first == ord("N")) | (first == ord("I")))
    idx = np.flatnonzero(numeric)
    if not len(idx):
        return out, numeric
    lens = length[idx]
    ends = np.cumsum(lens)
    if ends[-1] < 2**31:  # the texts back to back, parsed by Arrow's cast (correctly rounded, NaN/Infinity too)
        text = buf[np.arange(ends[-1]) - np.repeat(ends - lens - start[idx], lens)]
        offsets = np.concatenate([[0], ends]).astype(np.int32)
        try:
            arr = pa.StringArray.from_buffers(len(idx), pa.py_buffer(offsets), pa.py_buffer(text))
            out[idx] = arr.cast(pa.float64()).to_numpy(zero_copy_only=False)
            return out, numeric
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
            pass  # one that is not a number after all: one at a time below
    data = buf.tobytes() if raw is None else raw
    for k, t in zip(idx.tolist(), map(data.__getitem__, map(slice, start[idx].tolist(), stop[idx].tolist()))):
        try:
            out[k] = float(t)
        except ValueError:
            numeric[k] = False
    return out, numeric


def _short_varint(buf: np.ndarray, p: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, position after, ok) of varints of at most ``most`` bytes, without a loop per byte
    count: each byte's continuation bit says whether the next one belongs."""
    top = len(buf) - 1
    value = np.zeros(len(p), np.int64)
    going = np.ones(len(p), bool)
    end = p.copy()
    for i in range(most):
        b = buf[np.minimum(p + i, top)].astype(np.int64)
        value |= np.where(going, (b & 0x7F) << (7 * i), 0)
        end += going
        going &= b >= 0x80
    return value, end, ~going


def records(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> Fields:
    """The top-level fields of ``wandb_internal.Record`` messages. Most records are ``num`` then
    one length-delimited field with a one-byte tag that runs to the end: read in one step each;
    the others are walked (the ``num`` field itself is left out: nothing here needs it)."""
    top = len(buf) - 1
    first = buf[np.minimum(start, top)]
    _, after, ok = _short_varint(buf, start + 1, 5)
    tag = buf[np.minimum(after, top)].astype(np.int64)
    length, s, ok2 = _short_varint(buf, after + 1, 3)
    fast = (first == 0x08) & ok & ok2 & (tag < 0x80) & ((tag & 7) == LEN) & (s + length == stop) & (start < stop)
    slow = np.flatnonzero(~fast)
    rest = walk(buf, start[slow], stop[slow])
    keep = rest.number != 1
    quick = np.flatnonzero(fast)
    n = len(quick)
    z = np.zeros(n, np.int64)
    owner = np.concatenate([quick, slow[rest.owner[keep]]])
    order = np.argsort(owner, kind="stable")
    cols = [
        owner,
        np.concatenate([tag[quick] >> 3, rest.number[keep]]),
        np.concatenate([z + LEN, rest.wire[keep]]),
        np.concatenate([after[quick], rest.tag_at[keep]]),
        np.concatenate([s[quick], rest.start[keep]]),
        np.concatenate([stop[quick], rest.stop[keep]]),
        np.concatenate([np.zeros(n, np.uint64), rest.value[keep]]),
    ]
    broken = np.zeros(len(start), bool)
    broken[slow] = rest.broken
    c = [col[order] for col in cols]
    return Fields(c[0], c[1], c[2], c[3], c[4], c[5], c[6], broken)


def items(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, ...]:
    """(key start, key stop, value start, value stop, ok) of ``HistoryItem``/``SummaryItem``
    messages: up to three key fields (``key`` or ``nested_key``, under 128 bytes each), then
    ``value_json`` (under 128 bytes) to the end, as the writers lay them out, in one pass;
    ``ok`` false for any other layout (the caller walks those)."""
    top = len(buf) - 1
    p = start.copy()
    keys = np.zeros(len(start), np.int64)
    going = np.ones(len(start), bool)
    for _ in range(3):
        t = buf[np.minimum(p, top)]
        ln = buf[np.minimum(p + 1, top)].astype(np.int64)
        step = going & ((t == 0x0A) | (t == 0x12)) & (ln < 0x80) & (p + 2 + ln <= stop)
        p = np.where(step, p + 2 + ln, p)
        keys += step
        going &= step
    t0, t1 = buf[np.minimum(p, top)], buf[np.minimum(p + 1, top)]
    vlen = buf[np.minimum(p + 2, top)].astype(np.int64)
    ok = (keys > 0) & (t0 == 0x82) & (t1 == 0x01) & (vlen < 0x80) & (p + 3 + vlen == stop)
    return start, p, p + 3, stop, ok
