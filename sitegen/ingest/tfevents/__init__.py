"""TensorBoard event files (``events.out.tfevents.*``): the reference decoder.

Plain and per record, so it can serve as the oracle for the vectorized path. Each record is an
``Event``; each ``Summary.Value`` in it is sorted into a kind the way TensorBoard does it: the
*first* value of a tag fixes its plugin (metadata plugin name, else the value's own type).
"""

from __future__ import annotations

import hashlib
import logging
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from sitegen.errors import Problem
from sitegen.ingest import media
from sitegen.ingest.checks import scalar_problems
from sitegen.ingest.files import Release, problem, read_or_map
from sitegen.ingest.protowire import LEN, WireError, f32, f64, iter_fields, packed, text, to_int64
from sitegen.ingest.tfevents import frames as ff
from sitegen.ingest.tfevents.fast import FastScalars, decode_scalars
from sitegen.ingest.tfevents.tensor import Tensor, decode_tensor
from sitegen.ingest.tfevents.tfrecord import Framing, iter_records
from sitegen.model import (
    RUN_SCALARS_SCHEMA,
    Audio,
    Curve,
    Histogram,
    HParamValue,
    Image,
    ReadOptions,
    RunData,
    RunSource,
    SourceFile,
    TagBytes,
    Text,
    merge_parts,
    numeric_array,
    remember_tag_groups,
    strings_from_codes,
)

log = logging.getLogger(__name__)
FORMAT = "tfevents"


def claims(filename: str) -> bool:
    return "tfevents" in filename and not filename.endswith(".profile-empty")


@dataclass
class Decoded:
    """What one event file (or a tail of it) holds. Scalars carry their record offset for merging."""

    record: list[int] = field(default_factory=list)
    tag: list[str] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    wall_time: list[float] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    run: RunData = field(default_factory=lambda: RunData(name="", format=FORMAT))
    plugins: dict[str, str] = field(default_factory=dict)  # tag -> plugin, fixed by first value
    starts: list[tuple[int, int]] = field(default_factory=list)  # SessionLog START: (record offset, step)

    def scalar_table(self) -> pa.Table:
        return pa.table(
            {
                "tag": pa.array(self.tag, pa.string()),
                "step": pa.array(self.step, pa.int64()),
                "wall_time": pa.array(self.wall_time, pa.float64()),
                "value": pa.array(self.value, pa.float64()),
            },
            schema=RUN_SCALARS_SCHEMA,
        )


@dataclass
class _Value:
    tag: str = ""
    plugin: str = ""
    content: bytes = b""
    simple: float | None = None
    image: memoryview | None = None
    histo: memoryview | None = None
    audio: memoryview | None = None
    tensor: memoryview | None = None


def _metadata(buf: memoryview, val: _Value) -> None:
    for fnum, wt, v in iter_fields(buf):
        if fnum == 1 and wt == LEN:
            for f2, wt2, v2 in iter_fields(v):  # type: ignore[arg-type]
                if f2 == 1 and wt2 == LEN:
                    val.plugin = text(v2)
                elif f2 == 2 and wt2 == LEN:
                    val.content = bytes(v2)


def _parse_value(buf: memoryview) -> _Value:
    val = _Value()
    for fnum, wt, v in iter_fields(buf):
        if fnum == 1 and wt == LEN:
            val.tag = text(v)
        elif fnum == 2 and wt == 5:
            val.simple = f32(v)  # type: ignore[arg-type]
        elif fnum == 4 and wt == LEN:
            val.image = v  # type: ignore[assignment]
        elif fnum == 5 and wt == LEN:
            val.histo = v  # type: ignore[assignment]
        elif fnum == 6 and wt == LEN:
            val.audio = v  # type: ignore[assignment]
        elif fnum == 8 and wt == LEN:
            val.tensor = v  # type: ignore[assignment]
        elif fnum == 9 and wt == LEN:
            _metadata(v, val)  # type: ignore[arg-type]
    return val


def _kind_of(val: _Value) -> str:
    if val.plugin:
        return val.plugin
    if val.simple is not None:
        return "scalars"
    if val.image is not None:
        return "images"
    if val.histo is not None:
        return "histograms"
    if val.audio is not None:
        return "audio"
    return "tensor"


def _histogram_rows(buf: memoryview) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HistogramProto -> (left, right, count), as TensorBoard converts it (empty ends dropped)."""
    lo = hi = 0.0
    limits: list[float] = []
    counts: list[float] = []
    for fnum, wt, v in iter_fields(buf):
        if fnum == 1 and wt == 1:
            lo = f64(v)  # type: ignore[arg-type]
        elif fnum == 2 and wt == 1:
            hi = f64(v)  # type: ignore[arg-type]
        elif fnum == 6:
            limits.extend(packed(v, wt, "d"))
        elif fnum == 7:
            counts.extend(packed(v, wt, "d"))
    if len(limits) != len(counts):
        raise WireError("histogram bucket_limit and bucket differ in length")
    nonzero = [i for i, c in enumerate(counts) if c]
    if not nonzero:
        return np.array([lo]), np.array([hi]), np.array([0.0])
    first, last = nonzero[0], nonzero[-1]
    right = np.array(limits[first : last + 1], dtype=np.float64)
    left = np.concatenate([[lo], right[:-1]])  # like TensorBoard: the outer edges are min and max
    right[-1] = hi
    return left, right, np.array(counts[first : last + 1], dtype=np.float64)


def _hparams(content: bytes, run: RunData) -> None:
    """HParamsPluginData: 2 experiment (metric names), 3 session_start_info (the values)."""
    for fnum, wt, v in iter_fields(memoryview(content)):
        if fnum == 2 and wt == LEN:
            for f2, wt2, v2 in iter_fields(v):  # type: ignore[arg-type]
                if f2 == 5 and wt2 == LEN:  # MetricInfo { 1 name: MetricName { 1 group, 2 tag } }
                    for f3, wt3, v3 in iter_fields(v2):  # type: ignore[arg-type]
                        if f3 == 1 and wt3 == LEN:
                            tag = next((text(v4) for f4, _, v4 in iter_fields(v3) if f4 == 2), "")  # type: ignore[arg-type]
                            if tag and tag not in run.hparam_metrics:
                                run.hparam_metrics.append(tag)
        elif fnum == 3 and wt == LEN:
            for f2, wt2, v2 in iter_fields(v):  # type: ignore[arg-type]
                if f2 == 1 and wt2 == LEN:  # map entry { 1 key, 2 google.protobuf.Value }
                    value: HParamValue | None
                    key, value = "", None
                    for f3, wt3, v3 in iter_fields(v2):  # type: ignore[arg-type]
                        if f3 == 1 and wt3 == LEN:
                            key = text(v3)
                        elif f3 == 2 and wt3 == LEN:
                            for f4, wt4, v4 in iter_fields(v3):  # type: ignore[arg-type]
                                if f4 == 2 and wt4 == 1:
                                    value = f64(v4)  # type: ignore[arg-type]
                                elif f4 == 3 and wt4 == LEN:
                                    value = text(v4)
                                elif f4 == 4 and wt4 == 0:
                                    value = bool(v4)
                    if key and value is not None:
                        run.hparams[key] = value


def _scalar_of(val: _Value) -> float | None:
    if val.simple is not None:
        return val.simple
    if val.tensor is not None:
        t = decode_tensor(val.tensor)
        if t.values is not None and t.values.size == 1:
            return float(t.values.reshape(-1)[0])
    return None


def _add_value(dec: Decoded, off: int, step: int, wall: float, val: _Value, options: ReadOptions, path: str) -> None:
    kind = dec.plugins.setdefault(val.tag, _kind_of(val))
    run = dec.run
    if kind == "scalars":
        x = _scalar_of(val)
        if x is not None:
            dec.record.append(off)
            dec.tag.append(val.tag)
            dec.step.append(step)
            dec.wall_time.append(wall)
            dec.value.append(x)
    elif kind == "images":
        if val.image is not None:
            w = h = size = 0
            data = b""
            for fnum, wt, v in iter_fields(val.image):
                if fnum == 1 and wt == 0:
                    h = int(v)
                elif fnum == 2 and wt == 0:
                    w = int(v)
                elif fnum == 4 and wt == LEN:
                    data = bytes(v[: options.max_image_bytes + 1])  # type: ignore[index]  # (over the limit: not copied whole)
                    size = len(v)  # type: ignore[arg-type]
            blobs = [(data, w, h, size)]
        elif val.tensor is not None:
            t = decode_tensor(val.tensor, max_string=options.max_image_bytes + 1)
            s, sizes = t.strings or [], t.sizes or []
            dims = [int(x) if x.isdigit() else 0 for x in s[:2]]
            blobs = [(b, dims[0], dims[1], n) for b, n in zip(s[2:], sizes[2:])] if len(dims) == 2 else []
        else:
            blobs = []
        for data, w, h, size in blobs:
            mime = media.image_mime(data)
            if mime is None:
                run.problems.append(Problem(path, off, "bad-image", f"tag {val.tag!r}: payload is not PNG/JPEG/GIF/WebP; not shown"))
            elif size > options.max_image_bytes:
                run.problems.append(
                    Problem(
                        path,
                        off,
                        "too-large",
                        f"tag {val.tag!r}: image of {size} bytes over the limit of {options.max_image_bytes}; not shown",
                    )
                )
            else:
                run.images.append(Image(val.tag, step, wall, data, mime, w, h))
    elif kind == "audio":
        clips: list[tuple[bytes, int]]
        clips, rate, cap = [], 0.0, options.max_audio_bytes + 1  # (over the limit: not copied whole)
        if val.audio is not None:
            for fnum, wt, v in iter_fields(val.audio):
                if fnum == 1 and wt == 5:
                    rate = f32(v)  # type: ignore[arg-type]
                elif fnum == 4 and wt == LEN:
                    clips.append((bytes(v[:cap]), len(v)))  # type: ignore[index, arg-type]
        elif val.tensor is not None:
            t = decode_tensor(val.tensor, max_string=cap)
            pairs = list(zip(t.strings or [], t.sizes or []))
            clips = pairs[0::2] if len(t.shape) == 2 and t.shape[1] == 2 else pairs
        for data, size in clips:
            if size > options.max_audio_bytes:
                run.problems.append(
                    Problem(
                        path,
                        off,
                        "too-large",
                        f"tag {val.tag!r}: audio of {size} bytes over the limit of {options.max_audio_bytes}; not shown",
                    )
                )
            else:
                run.audio.append(Audio(val.tag, step, wall, data, media.audio_mime(data), rate))
    elif kind == "histograms":
        if val.histo is not None:
            left, right, count = _histogram_rows(val.histo)
        elif val.tensor is not None:
            t = decode_tensor(val.tensor)
            if t.values is None or t.values.ndim != 2 or t.values.shape[1] != 3:
                raise WireError(f"histogram tensor of shape {t.shape}")
            left, right, count = (np.ascontiguousarray(t.values[:, i]) for i in range(3))
        else:
            return
        run.histograms.append(Histogram(val.tag, step, wall, left, right, count))
    elif kind == "text":
        if val.tensor is not None:
            cap = 4 * options.max_text_chars + 4  # bytes enough for the characters kept
            t = decode_tensor(val.tensor, max_string=cap)
            body = _text_of(t)
            total = sum(t.sizes or [])
            if len(body) > options.max_text_chars or total > cap:
                what = f"{total:,} bytes" if total > cap else f"{len(body)} characters"
                run.problems.append(
                    Problem(
                        path, off, "too-large", f"tag {val.tag!r}: text of {what}; only the first {options.max_text_chars} characters kept"
                    )
                )
                body = body[: options.max_text_chars] + " […]"
            run.texts.append(Text(val.tag, step, wall, body))
    elif kind == "pr_curves":
        if val.tensor is not None:
            t = decode_tensor(val.tensor)
            if t.values is not None and t.values.ndim == 2 and t.values.shape[0] == 6:
                names = ("tp", "fp", "tn", "fn", "precision", "recall")
                n = t.values.shape[1]
                cols = {k: np.ascontiguousarray(t.values[i]) for i, k in enumerate(names)}
                cols["thresholds"] = np.arange(n, dtype=np.float64) / max(n - 1, 1)
                run.curves.append(Curve("pr", val.tag, step, wall, cols))
    elif kind == "hparams":
        _hparams(val.content, run)


def _text_of(t: Tensor) -> str:
    """Rank 0/1 string tensors join with blank lines; a 2-D tensor becomes a Markdown table."""
    cells = [b.decode("utf-8", errors="replace") for b in (t.strings or [])]
    if len(t.shape) == 2 and t.shape[0] * t.shape[1] == len(cells) and t.shape[1] > 0:
        rows = [cells[i : i + t.shape[1]] for i in range(0, len(cells), t.shape[1])]
        lines = ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        lines.insert(1, "|" + " --- |" * t.shape[1])
        return "\n".join(lines)
    return "\n\n".join(cells)


def decode_event(dec: Decoded, off: int, payload: memoryview, options: ReadOptions, path: str) -> None:
    """Decode one Event payload into ``dec``; raises WireError when it is not a valid Event."""
    wall, step, start = 0.0, 0, False
    summaries: list[memoryview] = []
    for fnum, wt, v in iter_fields(payload):
        if fnum == 1 and wt == 1:
            wall = f64(v)  # type: ignore[arg-type]
        elif fnum == 2 and wt == 0:
            step = to_int64(v)  # type: ignore[arg-type]
        elif fnum == 5 and wt == LEN:
            summaries.append(v)  # type: ignore[arg-type]
        elif fnum == 7 and wt == LEN:
            start = _session_start(v)  # type: ignore[arg-type]
    if start:
        dec.starts.append((off, step))
    for summary in summaries:
        for fnum, wt, v in iter_fields(summary):
            if fnum == 1 and wt == LEN:
                _add_value(dec, off, step, wall, _parse_value(v), options, path)  # type: ignore[arg-type]


def _session_start(session_log: memoryview) -> bool:
    """Whether a SessionLog says START (status 1): a job (re)started at the event's step."""
    status = 0
    for fnum, wt, v in iter_fields(session_log):
        if fnum == 1 and wt == 0:
            status = int(v)
    return status == 1


def _restart_rows(dec: Decoded, records: np.ndarray) -> None:
    """Each START as (scalar rows written before it, its step); ``records``: the scalar rows'
    record offsets, in file order."""
    dec.run.restarts = [(int(np.searchsorted(records, off)), step) for off, step in dec.starts]


def decode_buffer(
    buf: bytes | memoryview, path: str, options: ReadOptions, *, start: int = 0, dec: Decoded | None = None
) -> tuple[Decoded, Framing]:
    """Reference decode of a whole buffer (or its tail from ``start``), record by record."""
    dec = dec or Decoded()
    framing = Framing()
    for off, payload in iter_records(buf, path, framing, verify=options.verify, start=start):
        _decode_or_report(dec, off, payload, options, path)
    dec.run.problems.extend(framing.problems)
    return dec, framing


def _decode_or_report(dec: Decoded, off: int, payload: memoryview, options: ReadOptions, path: str) -> None:
    try:
        decode_event(dec, off, payload, options, path)
    except (WireError, ValueError, struct.error) as exc:
        dec.run.problems.append(Problem(path, off, "bad-record", f"unparsable event ({exc}); record skipped"))


def _tag_column(fs: FastScalars) -> pa.Array:
    """``fs.tag[fs.tag_id]`` as a string array.

    Why not a dictionary cast: it copies strings one row at a time, and it imports
    ``pyarrow.compute``. Rows of ``fs.runs`` repeat one
    period of tags, so their bytes and offsets are tiled by doubling copies; the rows between
    runs are gathered byte by byte (:class:`sitegen.model.TagBytes`).
    """
    names = TagBytes(fs.tag)
    n, runs = len(fs.step), [(r, r + c * len(t), t) for r, c, t, _, _ in fs.runs or []]
    lens = names.lens
    if fs.runs is None or sum(hi - lo for lo, hi, _ in runs) < n // 2:
        return strings_from_codes(fs.tag, fs.tag_id)
    loose: list[tuple[int, int, np.ndarray | None]] = [
        (lo, hi, None) for lo, hi in zip([0] + [hi for _, hi, _ in runs], [lo for lo, _, _ in runs] + [n]) if hi > lo
    ]
    total = sum(int(lens[t].sum()) * ((hi - lo) // len(t)) for lo, hi, t in runs)
    total += sum(int(lens[fs.tag_id_of(lo, hi)].sum()) for lo, hi, _ in loose)
    if total >= 2**31:  # int32 offsets of pa.string() would overflow: Arrow's way, which says so
        return strings_from_codes(fs.tag, fs.tag_id)
    offsets = np.empty(n + 1, np.int32)
    offsets[0] = 0
    data = np.empty(total, np.uint8)
    at = 0  # bytes written so far
    pieces = loose + runs  # tids None: rows whose tags are gathered one by one
    for lo, hi, tids in sorted(pieces, key=lambda x: x[0]):
        if tids is None:
            ends, piece = names.gather(fs.tag_id_of(lo, hi))
            size = len(piece)
            offsets[lo + 1 : hi + 1] = ends + at
            data[at : at + size] = piece
        else:
            row = b"".join(names.encoded[i] for i in tids)
            ff.fill_periodic(offsets[lo + 1 : hi + 1], at + np.cumsum(lens[tids]), len(row))
            size = len(row) * ((hi - lo) // len(tids))
            if size:
                ff.fill_periodic(data[at : at + size], np.frombuffer(row, np.uint8), 0)
        at += size
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _sha256(data: np.ndarray, release: Release | None) -> str:
    """The file's digest; a mapped file's pages are dropped as they are hashed."""
    if release is None:
        return hashlib.sha256(data.data).hexdigest()
    h = hashlib.sha256()
    for lo in range(0, len(data), ff.CRC_PIECE):
        h.update(data[lo : lo + ff.CRC_PIECE].data)
        release(lo, lo + ff.CRC_PIECE)
    return h.hexdigest()


def _fast_buffer(
    buf: memoryview, path: str, options: ReadOptions, start: int, dec: Decoded, release: Release | None = None
) -> tuple[pa.Table, int]:
    """The vectorized path: scalar records in bulk, every other record through the reference
    decoder, merged back into file order by record offset."""
    fs = decode_scalars(buf, path=path, verify=options.verify, start=start, release=release)
    for rec, pay, length in fs.other:
        _decode_or_report(dec, rec, buf[pay : pay + length], options, path)
    dec.run.problems.extend(fs.problems)
    fast = pa.table(
        {
            "tag": _tag_column(fs),
            "step": numeric_array(fs.step, "<i8"),
            "wall_time": numeric_array(fs.wall_time, "<f8"),
            "value": numeric_array(fs.value, "<f8"),
        },
        schema=RUN_SCALARS_SCHEMA,
    )
    if not dec.record:
        _restart_rows(dec, fs.record)
        remember_tag_groups(fast, fs.tag, fs.tag_id)
        return fast, fs.end
    slow = dec.scalar_table()
    records = np.concatenate([fs.record, np.asarray(dec.record, dtype=np.int64)])
    order = np.argsort(records, kind="stable")
    _restart_rows(dec, records[order])
    return pa.concat_tables([fast, slow]).take(pa.array(order)), fs.end


def decode_file(path: Path, options: ReadOptions, *, start: int = 0, state: dict | None = None) -> tuple[RunData, dict]:
    """Decode one event file from byte ``start`` (0, or where a previous read stopped).

    Returns the file's data and the state a later call needs to decode only what was appended:
    ``{"end": offset after the last complete record, "plugins": tag -> plugin}``.
    """
    dec = Decoded(plugins=dict((state or {}).get("plugins", {})))
    dec.run.name = ""
    spath = str(path)
    try:
        data, release = read_or_map(path, options.roots)
    except OSError as exc:
        dec.run.problems.append(problem(spath, exc))
        return dec.run, {"end": start, "plugins": dec.plugins}
    if start > len(data):
        start = 0  # the file shrank: it was replaced, read it again
    digest = _sha256(data, release) if options.digest else ""
    if options.fast:
        table, end = _fast_buffer(data.data, spath, options, start, dec, release)
    else:
        _, framing = decode_buffer(data.data, spath, options, start=start, dec=dec)
        table, end = dec.scalar_table(), framing.end
        _restart_rows(dec, np.asarray(dec.record, dtype=np.int64))
    run = dec.run
    run.scalars = table
    run.problems += scalar_problems(table, spath)
    run.problems.sort(key=lambda p: (p.offset is None, p.offset or 0))
    run.files.append(SourceFile(path, len(data), end, digest))
    return run, {"end": end, "plugins": dec.plugins}


def read(source: RunSource, options: ReadOptions = ReadOptions()) -> RunData:
    """Read every event file of a run, in name order, into one RunData."""
    parts = [decode_file(path, options)[0] for path in source.files]
    return merge_parts(source.name, FORMAT, parts)
