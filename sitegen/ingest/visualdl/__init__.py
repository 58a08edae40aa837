"""Reader for VisualDL 2.x logs (``vdlrecords.*.log`` files written by ``visualdl.LogWriter``).

Unlike VisualDL, which shows only the newest ``vdlrecords`` file of a directory, every file of a run
is read and merged in name order, so a resumed run is one run. The protobuf wire format is parsed
by hand (no generated code; see ``/work/shared/formats/visualdl.md``); framing, damage handling
and the vectorized scalar path live in :mod:`._vdlfast`.

Mapping to :class:`~sitegen.model.RunData`:

* ``add_scalar``: a scalar series named by its tag; the step is the record ``id`` (may be
  negative); the float32 value is widened to float64; wall time is the ms timestamp in seconds
  (timestamps below 2e9 are taken as seconds already, as VisualDL's server does).
* ``add_scalars(main_tag, {sub: v})``: each sub tag becomes the scalar series
  ``<main_tag>/<sub_tag>`` (VisualDL shows it as run ``<run>/<main_tag>_<sub_tag>``).
* text, image (mime sniffed from the bytes; non-images dropped), audio (WAV), histogram (counts and
  edges as left/right/count rows), PR curve (kind ``pr``), ROC curve (kind ``roc``, with TPR
  recomputed as TP/(TP+FN) because VisualDL's writer stores TP/(TN+FP)), embeddings (shape only).
  Curves carry ``thresholds``: VisualDL does not store them; its writer puts the predictions
  ``>= i/(n-1)`` in bucket ``i``, and that is the threshold given for row ``i``.
* ``add_hparams``: ``hparams`` (int, float or str values; the first record of a run wins, later
  ones only add new names) and ``hparam_metrics`` (metric tags; their values are the last scalar of
  each tag, which the site looks up); ``meta_data.display_name`` -> ``meta["title"]`` (the first
  non-empty one of the run, so that a cached prefix plus its new tail merge like one read; VisualDL
  lets a later meta record rename the run).

Incremental reads: ``decode_file(path, options, start=state["end"])`` decodes only what was
appended (the decode cache in ``sitegen.cache.store`` calls it like that).
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa

from sitegen.errors import Problem
from sitegen.ingest.checks import scalar_problems
from sitegen.ingest.files import problem, read_regular
from sitegen.ingest.visualdl.fast import BadWire, Scalar, Walk, fields, signed, varint, walk, wall_times
from sitegen.model import (
    RUN_SCALARS_SCHEMA,
    Audio,
    Curve,
    Embedding,
    Histogram,
    Image,
    ReadOptions,
    RunData,
    RunSource,
    SourceFile,
    Text,
    empty_table,
    merge_parts,
)

FORMAT = "visualdl"

# oneof one_value field numbers of Record.Value
_VALUE, _IMAGE, _AUDIO, _EMB, _HIST, _PR, _META, _ROC, _TEXT, _HPARAM, _TAGVALUE = 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14


def claims(filename: str) -> bool:
    return "vdlrecords" in os.path.basename(filename)


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    """Decode every file of the run, in the order given, into one :class:`RunData`."""
    return merge_parts(source.name, FORMAT, [decode_file(path, options)[0] for path in source.files])


def decode_file(
    path: str | os.PathLike,
    options: ReadOptions = ReadOptions(),
    *,
    start: int = 0,
    state: dict | None = None,
    fast: bool | None = None,
) -> tuple[RunData, dict]:
    """Decode one file from byte offset ``start`` (0, or the ``end`` of a previous call's state).

    Returns the file's data and ``{"end": offset after the last complete record}``, where an
    incremental read resumes (also ``files[0].decoded_bytes``). ``fast=False`` (default:
    ``options.fast``) decodes every record one by one: the oracle of the vectorized path.
    """
    path = Path(path)
    try:
        buf = read_regular(path, options.roots)
    except OSError as exc:
        run = RunData(name="", format=FORMAT)
        run.problems.append(problem(path, exc))
        return run, {"end": start}
    if start > len(buf):
        start = 0  # the file shrank: it was replaced, read it again
    run = decode_bytes(buf, str(path), options, start=start, fast=options.fast if fast is None else fast, file=path)
    if options.digest:  # (while the bytes are here: the manifest and the decode cache's check need it)
        run.files[0].sha256 = hashlib.sha256(buf).hexdigest()
    return run, {"end": run.files[0].decoded_bytes}


def decode_bytes(
    buf: bytes, path: str, options: ReadOptions = ReadOptions(), *, start: int = 0, fast: bool = True, file: Path | None = None
) -> RunData:
    """Decode ``buf[start:]`` (the bytes of the file ``path``); the run's name is left empty."""
    w = walk(buf, path, lambda b, p, e, strict: parse_record(b, p, e, strict, options), start=start, fast=fast)
    run = RunData(name="", format=FORMAT, files=[SourceFile(file or Path(path), len(buf), w.end)])
    run.scalars = scalars_table(w)
    run.problems = list(w.problems)
    for off, item in w.others:
        if isinstance(item, Image):
            run.images.append(item)
        elif isinstance(item, Audio):
            run.audio.append(item)
        elif isinstance(item, Text):
            run.texts.append(item)
        elif isinstance(item, Histogram):
            run.histograms.append(item)
        elif isinstance(item, Curve):
            run.curves.append(item)
        elif isinstance(item, Embedding):
            run.embeddings.append(item)
        else:
            assert isinstance(item, tuple)  # ("hparams", values, metrics), ("title", name) or ("problem", kind, message)
            if item[0] == "hparams":
                for k, v in item[1].items():
                    run.hparams.setdefault(k, v)
                run.hparam_metrics += [m for m in item[2] if m not in run.hparam_metrics]
            elif item[0] == "title":
                if item[1]:
                    run.meta.setdefault("title", item[1])
            elif item[0] == "problem":
                run.problems.append(Problem(path, off, item[1], item[2]))
    run.problems += scalar_problems(run.scalars, path)
    run.problems.sort(key=lambda pr: (pr.offset is None, pr.offset or 0))
    return run


def wall_time(ts: int) -> float:
    return float(wall_times(np.array([ts], np.int64))[0])


def scalars_table(w: Walk) -> pa.Table:
    """The walk's scalars as one table; the numeric columns come out of the walk ready."""
    if not w.chunks:
        return empty_table(RUN_SCALARS_SCHEMA)
    return pa.Table.from_arrays([_tag_column(w), *map(pa.array, w.columns)], schema=RUN_SCALARS_SCHEMA)


def _tag_column(w: Walk) -> pa.Array:
    """The tag of every record as a plain string array, built from its buffers. A vectorized chunk
    repeats one period of tags, so its bytes are that period's bytes repeated and its offsets a
    grid: much cheaper than gathering strings through a dictionary (``take``, kept for the
    slow-parsed chunks, which have one index per record)."""
    names = pa.array(w.tags, pa.string())
    raw = [t.encode() for t in w.tags]
    plan, size = [], 0
    for pattern, k in w.chunks:
        if len(pattern) == k:
            got = names.take(pa.array(pattern))
            offs = np.frombuffer(got.buffers()[1], np.int32, k + 1, got.offset * 4)
            part = np.frombuffer(got.buffers()[2], np.uint8, offs[-1] - offs[0], offs[0])
            plan.append((offs[:-1] - offs[0], part, 0))
        else:
            lens = [len(raw[i]) for i in pattern.tolist()]
            first = np.cumsum([0] + lens[:-1])
            part = np.frombuffer(b"".join(raw[i] for i in pattern.tolist()), np.uint8)
            plan.append((first, part, k // len(pattern)))
        size += len(part) * max(1, plan[-1][2])
    if size >= 2**31:  # more than pa.string() holds: let Arrow say so, as it always did
        return names.take(pa.array(np.concatenate([np.tile(p, k // len(p)) for p, k in w.chunks])))
    n = sum(k for _, k in w.chunks)
    offsets, data = np.empty(n + 1, np.int32), np.empty(size, np.uint8)
    at = pos = 0
    for (first, part, reps), (_, k) in zip(plan, w.chunks):
        offsets[at : at + len(first)] = first + pos
        data[pos : pos + len(part)] = part
        if reps:  # a period repeated: copy what is filled in, doubling
            _repeat(offsets[at : at + k], len(first), len(part))
            _repeat(data[pos : pos + reps * len(part)], len(part), 0)
        at += k
        pos += len(part) * max(1, reps)
    offsets[n] = size
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data), null_count=0)


def _repeat(out: np.ndarray, p: int, inc: int) -> None:
    """Repeat ``out[:p]`` over ``out`` (a whole number of periods), each period ``inc`` more than
    the one before, by doubling the filled part: a few long copies instead of many short ones."""
    done = p
    while done < len(out):
        k = min(done, len(out) - done)
        if inc:
            np.add(out[:k], done // p * inc, out=out[done : done + k])
        else:
            out[done : done + k] = out[:k]
        done += k


# ---------------------------------------------------------------------------------------------
# the record parser (one record at a time; the oracle for the vectorized path)


def _text(b: bytes, a: int, z: int) -> str:
    try:
        return b[a:z].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadWire(f"invalid UTF-8 in a string field at {a}") from exc


def parse_record(b: bytes, p: int, e: int, strict: bool, options: ReadOptions) -> list:
    """Parse the Record ``b[p:e]`` into items: :class:`Scalar`, model objects, ``("hparams", dict,
    metrics)``, ``("title", name)`` or ``("problem", kind, message)``. Raises BadWire.

    strict (used to resync after damage): exactly one Value, with a tag and a known kind."""
    if b[p] == 0x0A:  # the writer's scalar layout, decoded inline (same result as the general path)
        quick = _quick_scalar(b, p, e)
        if quick is not None:
            return [quick]
    every = [(num, wt, a, z) for num, wt, _, a, z in fields(b, p, e)]
    values = [(a, z) for num, wt, a, z in every if num == 1 and wt == 2]
    single = len(every) == len(values) == 1
    if strict and not single:
        raise BadWire("not one Value")
    out = []
    for a, z in values:
        item = _parse_value(b, a, z, strict, options, single)
        if isinstance(item, list):  # an item plus the problem saying it was cut to the limits
            out += item
        else:
            out.append(item)
    return out


def _quick_scalar(b: bytes, p: int, e: int) -> Scalar | None:
    """``0a L [08 id] 12 n tag 18 ts 25 f32`` filling exactly ``b[p:e]``, else None."""
    n, q = varint(b, p + 1, e)
    if q + n != e or q >= e:
        return None
    step, id_span = 0, None
    if b[q] == 0x08:
        step, r = varint(b, q + 1, e)
        id_span, q = (q + 1, r), r
    if q + 2 > e or b[q] != 0x12:
        return None
    n, q = varint(b, q + 1, e)
    tag = _text(b, q, q + n)
    q += n
    if q >= e or b[q] != 0x18:
        return None
    ts, r = varint(b, q + 1, e)
    if r + 5 != e or b[r] != 0x25:
        return None
    return Scalar(tag, signed(step), signed(ts), int.from_bytes(b[r + 1 : e], "little"), (id_span, (q + 1, r), r + 1))


def _parse_value(b: bytes, p: int, e: int, strict: bool, options: ReadOptions, single: bool):
    step = ts = 0
    tag = None
    sub: tuple[int, int] | None
    kind = sub = None
    seen = 0
    spans = {}
    plain = single
    for num, wt, v, a, z in fields(b, p, e):
        bit = 1 << min(num, 31)
        plain = plain and not (seen & bit)
        seen |= bit
        if num == 1 and wt == 0:
            step, spans[1] = signed(v), (a, z)
        elif num == 2 and wt == 2:
            tag = _text(b, a, z)
        elif num == 3 and wt == 0:
            ts, spans[3] = signed(v), (a, z)
        elif (num == _VALUE and wt == 5) or (_IMAGE <= num <= _TAGVALUE and wt == 2):
            kind, sub = num, (a, z)
        else:
            plain = False
    if kind is None:
        if strict:
            raise BadWire("value without data")
        return ("problem", "unsupported", f"value {tag!r} has no data VisualDL 2.5 knows; skipped")
    if strict and tag is None:
        raise BadWire("value without tag")
    tag = tag or ""
    assert sub is not None  # set with kind
    a, z = sub
    layout: tuple | None  # see Scalar.layout
    if kind == _VALUE:
        plain = plain and seen & ~0b11110 == 0
        layout = (spans.get(1), spans.get(3), a) if plain else None
        return Scalar(tag, step, ts, int.from_bytes(b[a:z], "little"), layout)
    if kind == _TAGVALUE:
        sub_tag, bits, val = "", 0, None
        for num, wt, _v, c, d in fields(b, a, z):
            if num == 1 and wt == 2:
                plain = plain and sub_tag == ""
                sub_tag = _text(b, c, d)
            elif num == 2 and wt == 5:
                plain = plain and val is None
                bits, val = int.from_bytes(b[c:d], "little"), c
            else:
                plain = False
        plain = plain and val is not None and seen & ~0b100000000001110 == 0
        layout = (spans.get(1), spans.get(3), val) if plain else None
        return Scalar(f"{tag}/{sub_tag}", step, ts, bits, layout)
    wt_ = wall_time(ts)
    return _COMPONENTS[kind](b, a, z, tag, step, wt_, options)


def _collect(b: bytes, p: int, e: int) -> dict[int, list]:
    got: dict[int, list] = {}
    for num, wt, v, a, z in fields(b, p, e):
        got.setdefault(num, []).append((wt, v, a, z))
    return got


def _floats(b: bytes, entries: list, fmt: str) -> np.ndarray:
    """A repeated float/double field, packed or not (later entries append, as protobuf does)."""
    size = 8 if fmt == "<f8" else 4
    parts = []
    for wt, _v, a, z in entries:
        if wt == 2:
            if (z - a) % size:
                raise BadWire("packed floats of a bad length")
            parts.append(np.frombuffer(b[a:z], fmt))
        elif wt == (1 if size == 8 else 5):
            parts.append(np.frombuffer(b[a:z], fmt))
        else:
            raise BadWire("bad wire type in a float field")
    return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)


def _ints(b: bytes, entries: list) -> np.ndarray:
    vals = []
    for wt, v, a, z in entries:
        if wt == 0:
            vals.append(signed(v))
        elif wt == 2:
            p = a
            while p < z:
                x, p = varint(b, p, z)
                vals.append(signed(x))
        else:
            raise BadWire("bad wire type in an integer field")
    return np.array(vals, np.int64)


def _str1(b: bytes, entries: list | None) -> str:
    if not entries:
        return ""
    wt, v, a, z = entries[-1]
    if wt != 2:
        raise BadWire("bad wire type in a string field")
    return _text(b, a, z)


def _bytes1(b: bytes, entries: list | None) -> bytes:
    if not entries:
        return b""
    wt, v, a, z = entries[-1]
    if wt != 2:
        raise BadWire("bad wire type in a bytes field")
    return b[a:z]


def _image_info(data: bytes) -> tuple[str, int, int] | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        return ("image/png",) + struct.unpack(">II", data[16:24])
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return ("image/gif",) + struct.unpack("<HH", data[6:10])
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        w = h = 0
        if data[12:16] == b"VP8X" and len(data) >= 30:
            w, h = 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
        elif data[12:16] == b"VP8 " and len(data) >= 30:
            w, h = (int.from_bytes(data[26:28], "little") & 0x3FFF), (int.from_bytes(data[28:30], "little") & 0x3FFF)
        elif data[12:16] == b"VP8L" and len(data) >= 25:
            bits = int.from_bytes(data[21:25], "little")
            w, h = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        return "image/webp", w, h
    if data[:3] == b"\xff\xd8\xff":
        p = 2
        while p + 9 <= len(data) and data[p] == 0xFF:
            marker, seg = data[p + 1], int.from_bytes(data[p + 2 : p + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", data[p + 5 : p + 9])
                return "image/jpeg", w, h
            p += 2 + seg
        return "image/jpeg", 0, 0
    return None


def _image(b, p, e, tag, step, wt, options):
    data = _bytes1(b, _collect(b, p, e).get(4))
    info = _image_info(data)
    if info is None:
        return ("problem", "bad-value", f"image {tag!r} step {step}: not a PNG/JPEG/GIF/WebP image; dropped")
    if len(data) > options.max_image_bytes:
        return ("problem", "too-large", f"image {tag!r} step {step}: {len(data)} bytes; dropped")
    return Image(tag, step, wt, data, info[0], info[1], info[2])


def _audio(b, p, e, tag, step, wt, options):
    got = _collect(b, p, e)
    data = _bytes1(b, got.get(4))
    ctype = _str1(b, got.get(5))
    rates = _floats(b, got.get(1, []), "<f4")
    rate = float(rates[-1]) if len(rates) else 0.0
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        mime = "audio/wav"
    elif ctype.startswith("audio/") and data:
        mime = ctype
    else:
        return ("problem", "bad-value", f"audio {tag!r} step {step}: not a WAV file; dropped")
    if len(data) > options.max_audio_bytes:
        return ("problem", "too-large", f"audio {tag!r} step {step}: {len(data)} bytes; dropped")
    return Audio(tag, step, wt, data, mime, rate)


def _text_item(b, p, e, tag, step, wt, options):
    text = _str1(b, _collect(b, p, e).get(1))
    if len(text) > options.max_text_chars:
        return [
            Text(tag, step, wt, text[: options.max_text_chars] + " […]"),
            ("problem", "too-large", f"text {tag!r} step {step}: {len(text)} characters; only the first {options.max_text_chars} kept"),
        ]
    return Text(tag, step, wt, text)


def _histogram(b, p, e, tag, step, wt, options):
    got = _collect(b, p, e)
    hist, edges = _floats(b, got.get(1, []), "<f8"), _floats(b, got.get(2, []), "<f8")
    if len(edges) != len(hist) + 1 and not (len(hist) == 0 and len(edges) == 0):
        return ("problem", "bad-value", f"histogram {tag!r} step {step}: {len(hist)} counts, {len(edges)} edges; dropped")
    return Histogram(tag, step, wt, edges[:-1], edges[1:], hist)


def _curve(b, p, e, tag, step, wt, options, *, kind):
    got = _collect(b, p, e)
    cols = {k: _ints(b, got.get(i, [])) for i, k in enumerate(("tp", "fp", "tn", "fn"), 1)}
    names = ("precision", "recall") if kind == "pr" else ("tpr", "fpr")
    cols.update({k: _floats(b, got.get(i, []), "<f8") for i, k in enumerate(names, 5)})
    if kind == "roc" and len(cols["tp"]) == len(cols["fn"]) == len(cols["tpr"]):
        pos = (cols["tp"] + cols["fn"]).astype(np.float64)
        cols["tpr"] = np.divide(cols["tp"], pos, out=np.zeros(len(pos)), where=pos > 0)
    n = len(cols[names[0]])
    if any(len(c) != n for c in cols.values()):
        return ("problem", "bad-value", f"{kind} curve {tag!r} step {step}: columns of different lengths; dropped")
    cols["thresholds"] = np.arange(n) / (n - 1) if n > 1 else np.zeros(n)
    return Curve(kind, tag, step, wt, cols)


def _embeddings(b, p, e, tag, step, wt, options):
    rows, dims = 0, set()
    for num, wtp, _v, a, z in fields(b, p, e):
        if num == 1 and wtp == 2:
            rows += 1
            vec = _collect(b, a, z)
            for k in vec.get(1, []):
                if k[0] != 2:
                    raise BadWire("bad embedding label")
            dims.add(len(_floats(b, vec.get(2, []), "<f4")))
    if len(dims) > 1:
        return ("problem", "bad-value", f"embeddings {tag!r}: rows of different lengths {sorted(dims)}; dropped")
    return Embedding(tag, step, wt, rows, dims.pop() if dims else 0)


def _hparams(b, p, e, tag, step, wt, options):
    got = _collect(b, p, e)
    out: dict = {}
    metrics = []
    for field_no in (1, 2):
        for wtp, _v, a, z in got.get(field_no, []):
            if wtp != 2:
                raise BadWire("bad hparam info")
            value: int | float | str | None
            name, value = "", None
            for num, w2, v2, c, d in fields(b, a, z):
                if num == 1 and w2 == 0:
                    value = signed(v2)
                elif num == 2 and w2 == 1:
                    value = struct.unpack_from("<d", b, c)[0]
                elif num == 3 and w2 == 2:
                    value = _text(b, c, d)
                elif num == 4 and w2 == 2:
                    name = _text(b, c, d)
            if field_no == 2:
                metrics.append(name)
            elif value is not None:
                out.setdefault(name, value)
    _str1(b, got.get(3))
    return ("hparams", out, metrics)


def _meta(b, p, e, tag, step, wt, options):
    return ("title", _str1(b, _collect(b, p, e).get(1)))


_COMPONENTS = {
    _IMAGE: _image,
    _AUDIO: _audio,
    _EMB: _embeddings,
    _HIST: _histogram,
    _PR: lambda *a: _curve(*a, kind="pr"),
    _META: _meta,
    _ROC: lambda *a: _curve(*a, kind="roc"),
    _TEXT: _text_item,
    _HPARAM: _hparams,
}
