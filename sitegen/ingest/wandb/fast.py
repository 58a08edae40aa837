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
    head: np.ndarray | None = None  # (from :func:`fields`) the first bytes of each field's contents (at least 5)

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


_LEN_TAG = np.array([t >= 8 and t & 0x87 == LEN for t in range(256)])  # one-byte tags of length-delimited fields
PAD = 512  # zero bytes after a buffer's data, so a word read a few bytes past a field needs no bounds check


def padded(buf: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """``buf`` with at least :data:`PAD` bytes after ``stop.max()`` (copied only when short)."""
    if len(stop) and int(stop.max()) + PAD > len(buf):
        return np.concatenate([buf, np.zeros(PAD, np.uint8)])
    return buf


def words(buf: np.ndarray, at: np.ndarray, size: int = 8) -> np.ndarray:
    """The little-endian ``size``-byte words at positions ``at`` of ``buf``, as int64 (one
    gather for several bytes; ``buf`` padded past every position read)."""
    if not len(at):
        return np.zeros(0, np.int64)
    view = np.ndarray((len(buf) - size + 1,), f"<u{size}", buffer=buf, strides=(1,))
    return view[at].astype(np.int64) if size < 8 else view[at].view(np.int64)


def fields(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> Fields:
    """The fields of the messages ``buf[start[i]:stop[i]]`` (as :func:`walk`), message by message
    (the regular messages, then the irregular ones); ``head``: the first bytes of each field's contents.

    Fast path: messages made only of length-delimited fields with one-byte tags and lengths
    under 16384 (wandb's history and summary records and their items): one numpy step per field
    index, each reading one 8-byte word per message. A message with any other field is walked by
    :func:`walk` (exact for any layout). Messages given in buffer order give fields in buffer
    order, so the reads that follow sweep the buffer once.
    """
    buf = padded(buf, stop)
    n = len(start)
    odd = np.zeros(n, bool)
    idx = np.flatnonzero(start < stop)
    p, lim = start[idx], stop[idx]
    parts: list[tuple[np.ndarray, ...]] = []
    longer = False  # a length of two bytes seen
    while len(idx):
        h = words(buf, p)
        b1 = (h >> 8) & 0xFF
        e = p + 2 + b1
        if b1.max() >= 0x80:  # a two-byte length
            longer = True
            two = np.flatnonzero(b1 >= 0x80)
            b2 = (h[two] >> 16) & 0xFF
            e[two] = p[two] + 3 + ((b1[two] & 0x7F) | (b2 << 7))
            e[two[b2 >= 0x80]] = lim[two[b2 >= 0x80]] + 1  # (a longer one: not the fast path)
        ok = _LEN_TAG[h & 0xFF] & (e <= lim)
        if not ok.all():
            odd[idx[~ok]] = True
            idx, p, e, h, lim = idx[ok], p[ok], e[ok], h[ok], lim[ok]
        parts.append((idx, p, e, h))
        live = e < lim
        idx, p, lim = idx[live], e[live], lim[live]
    broken = np.zeros(n, bool)
    if not parts and not odd.any():
        z = np.zeros(0, np.int64)
        return Fields(z, z, z, z, z, z, np.zeros(0, np.uint64), broken, z)
    # placed message by message (the k-th field of a message came in step k), not field index by
    # field index: reads at the fields then sweep the buffer once, not once per index (cache misses)
    counts = np.zeros(n, np.int64)
    for k, q in enumerate(parts):
        counts[q[0]] = k + 1
    counts[odd] = 0  # (an irregular message's fields are walked again below)
    first = np.cumsum(counts) - counts
    owner, tag_at, stops, head = (np.empty(int(counts.sum()), np.int64) for _ in range(4))
    some_odd = odd.any()
    for k, q in enumerate(parts):
        if some_odd:
            q = tuple(c[~odd[q[0]]] for c in q)
        at = first[q[0]] + k
        owner[at], tag_at[at], stops[at], head[at] = q
    skip = 2 + (((head >> 8) & 0xFF) >= 0x80) if longer else 2
    cols = [
        owner,
        (head & 0xFF) >> 3,
        np.full(len(owner), LEN),
        tag_at,
        tag_at + skip,
        stops,
        np.zeros(len(owner), np.uint64),
        head >> (8 * skip),
    ]
    if some_odd:
        which = np.flatnonzero(odd)
        rest = walk(buf, start[which], stop[which])
        broken[which] = rest.broken
        more = (which[rest.owner], rest.number, rest.wire, rest.tag_at, rest.start, rest.stop, rest.value, words(buf, rest.start))
        cols = [np.concatenate([c, m]) for c, m in zip(cols, more)]
    return Fields(cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], broken, cols[7])


#: messages read at a time: each pass over a block stays in the processor's cache, and the
#: allocator reuses the block's temporaries instead of faulting in new ones
BLOCK_RECORDS = 8192


def records(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> Fields:
    """The top-level fields of ``wandb_internal.Record`` messages, :data:`BLOCK_RECORDS` at a time."""
    buf = padded(buf, stop)
    parts = [_records(buf, start[a : a + BLOCK_RECORDS], stop[a : a + BLOCK_RECORDS]) for a in range(0, len(start), BLOCK_RECORDS)]
    if len(parts) < 2:
        return parts[0] if parts else _records(buf, start, stop)
    for a, f in zip(range(0, len(start), BLOCK_RECORDS), parts):
        f.owner += a
    cols = ("owner", "number", "wire", "tag_at", "start", "stop", "value", "broken")
    return Fields(*(np.concatenate([getattr(f, c) for f in parts]) for c in cols))


def _records(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> Fields:
    """:func:`records` of one block. Most records are ``num`` then one length-delimited field
    with a one-byte tag that runs to the end: read from two words each; the others are walked
    (the ``num`` field itself is left out: nothing here needs it)."""
    n = len(start)
    w = words(buf, start)
    size = np.full(n, 6)  # bytes of ``num``: the first byte after the tag without a continuation bit
    for i in range(5, 0, -1):
        size[((w >> (8 * i + 7)) & 1) == 0] = i
    after = start + 1 + size
    tag = (w >> (8 * np.minimum(size + 1, 7))) & 0xFF
    w2 = words(buf, after + 1)
    b0, b1, b2 = w2 & 0xFF, (w2 >> 8) & 0xFF, (w2 >> 16) & 0xFF
    length = np.where(b0 < 0x80, b0, np.where(b1 < 0x80, (b0 & 0x7F) | (b1 << 7), (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)))
    s = after + 2 + (b0 >= 0x80) + ((b0 >= 0x80) & (b1 >= 0x80))
    ok = ((w & 0xFF) == 0x08) & (size <= 5) & ((tag & 0x87) == LEN) & ~((b0 >= 0x80) & (b1 >= 0x80) & (b2 >= 0x80))
    fast = ok & (s + length == stop) & (start < stop)
    slow = np.flatnonzero(~fast)
    quick = np.flatnonzero(fast)
    rest = walk(buf, start[slow], stop[slow])
    keep = rest.number != 1
    counts = fast.astype(np.int64)
    counts[slow] = np.bincount(rest.owner[keep], minlength=len(slow))
    first = np.cumsum(counts) - counts  # owner by owner, fields in order
    heads = np.searchsorted(rest.owner[keep], np.arange(len(slow)))
    places = np.concatenate([first[quick], first[slow[rest.owner[keep]]] + np.arange(int(keep.sum())) - heads[rest.owner[keep]]])
    cols = [
        np.concatenate([quick, slow[rest.owner[keep]]]),
        np.concatenate([tag[quick] >> 3, rest.number[keep]]),
        np.concatenate([np.full(len(quick), LEN), rest.wire[keep]]),
        np.concatenate([after[quick], rest.tag_at[keep]]),
        np.concatenate([s[quick], rest.start[keep]]),
        np.concatenate([stop[quick], rest.stop[keep]]),
        np.concatenate([np.zeros(len(quick), np.uint64), rest.value[keep]]),
    ]
    out = []
    for c in cols:
        o = np.empty_like(c)
        o[places] = c
        out.append(o)
    broken = np.zeros(n, bool)
    broken[slow] = rest.broken
    return Fields(out[0], out[1], out[2], out[3], out[4], out[5], out[6], broken)


# the first two bytes of an item: a key field's tag (``key`` or ``nested_key``) and a length under 128
_KEY_FIELD = np.zeros(1 << 16, bool)
_KEY_FIELD[[t | n << 8 for t in (0x0A, 0x12) for n in range(0x80)]] = True


def _one_key(buf: np.ndarray, f: Fields, sel: np.ndarray) -> tuple[np.ndarray, ...]:
    """(start, stop, end of the first key field, starts with a key field, the value's header
    word there) of the items that are the fields ``sel`` of ``f``, from the head word and one
    more word each."""
    assert f.head is not None
    start, stop, h = f.start[sel], f.stop[sel], f.head[sel]
    ke = start + 2 + ((h >> 8) & 0xFF)
    return start, stop, ke, _KEY_FIELD[h & 0xFFFF], words(padded(buf, stop), ke)


def _value_after(ke: np.ndarray, w: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Whether ``w``, the word at ``ke``, starts ``value_json`` (field 16, under 128 bytes) that runs to ``stop``."""
    return ((w & 0x80FFFF) == 0x0182) & (ke + 3 + ((w >> 16) & 0xFF) == stop)


def item_key(buf: np.ndarray, f: Fields, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(key stop, ok) of items: one to three key fields then ``value_json`` to the end, as
    :func:`items` checks it, without the value's span (the caller needs only a few of those)."""
    start, stop, ke, keyed, w = _one_key(buf, f, sel)
    buf = padded(buf, stop)
    ok = keyed & (ke < stop)
    going = np.flatnonzero(ok & (((w & 0xFF) == 0x0A) | ((w & 0xFF) == 0x12)))
    ok &= _value_after(ke, w, stop)
    for _ in range(2):  # a second or third key field
        if not len(going):
            break
        ln = buf[ke[going] + 1]
        e = ke[going] + 2 + ln
        more = (ln < 0x80) & (e < stop[going])
        going = going[more]
        ke[going] = e[more]
        w = words(buf, ke[going])
        ok[going] = _value_after(ke[going], w, stop[going])
        going = going[((w & 0xFF) == 0x0A) | ((w & 0xFF) == 0x12)]
    return ke, ok


def items(buf: np.ndarray, f: Fields, sel: np.ndarray) -> tuple[np.ndarray, ...]:
    """(key start, key stop, value start, value stop, ok) of the ``HistoryItem``/``SummaryItem``
    messages that are the fields ``sel`` of ``f`` (from :func:`fields`): one to three key fields
    (``key`` or ``nested_key``, under 128 bytes each), then ``value_json`` (under 128 bytes) to the
    end, as the writers lay them out; ``ok`` false for any other layout (the caller walks those).
    One key field, the usual case, is read from the field's head word and one more word."""
    start, stop, p, keyed, w = _one_key(buf, f, sel)
    ok = keyed & _value_after(p, w, stop)
    if not ok.all():
        more = np.flatnonzero(~ok & keyed & (p <= stop))
        if len(more):  # two or three key fields (e.g. a nested key)
            ks, ke, _, _, ok2 = _items_rounds(padded(buf, stop), start[more], stop[more])
            p[more], ok[more] = ke, ok2
    return start, p, p + 3, stop, ok


def _items_rounds(buf: np.ndarray, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`items` for any number of key fields up to three, a key field per round; each round
    looks only at the items not placed yet."""
    top = len(buf) - 1
    p = start.copy()
    ok = np.zeros(len(start), bool)
    going = np.arange(len(start))
    for _ in range(3):
        q = p[going]
        t = buf[np.minimum(q, top)]
        ln = buf[np.minimum(q + 1, top)].astype(np.int64)
        step = ((t == 0x0A) | (t == 0x12)) & (ln < 0x80) & (q + 2 + ln <= stop[going])
        going, v = going[step], q[step] + 2 + ln[step]
        p[going] = v
        vlen = buf[np.minimum(v + 2, top)].astype(np.int64)
        done = (buf[np.minimum(v, top)] == 0x82) & (buf[np.minimum(v + 1, top)] == 0x01) & (vlen < 0x80) & (v + 3 + vlen == stop[going])
        ok[going[done]] = True
        going = going[~done]
    return start, p, p + 3, stop, ok
