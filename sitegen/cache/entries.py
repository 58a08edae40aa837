"""The decode cache's entries: what one log file decoded to, in one file: a JSON header, then
its tables as Arrow IPC files laid end to end. Scalars are kept narrow (tags as dictionary codes,
int32 steps and float32 values where that loses nothing) and widened back exactly.

An entry is trusted only whole: CRC-32s of its header and of its tables are checked on every read
(a flipped byte in a value column would still parse), and :func:`same_file` checks that the log
file is still the one it was decoded from (a rewrite in place may keep its size and mtime)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
import zlib
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from sitegen.errors import Problem
from sitegen.fileio import sha256_file
from sitegen.model import (
    RUN_SCALARS_SCHEMA,
    Artifact,
    Audio,
    Curve,
    Embedding,
    Histogram,
    Image,
    RunData,
    SourceFile,
    Text,
    numeric_array,
    remember_tag_groups,
    strings_from_codes,
    tag_groups,
)

log = logging.getLogger(__name__)

#: a cache entry: magic, header length (u64), CRC-32 of the header (u32), JSON header, tables
#: (their CRC-32 in the header); another magic is another version of the format
ENTRY_MAGIC = b"SGENT02\n"
_HEAD = len(ENTRY_MAGIC) + 12
#: a content probe reads this much at the start of a file and before the end of what was decoded
PROBE_BYTES = 4096

_F64 = pa.list_(pa.float64())
_SCHEMAS = {
    "images": pa.schema(
        [
            ("tag", pa.string()),
            ("step", pa.int64()),
            ("wall_time", pa.float64()),
            ("data", pa.large_binary()),
            ("mime", pa.string()),
            ("width", pa.int64()),
            ("height", pa.int64()),
        ]
    ),
    "audio": pa.schema(
        [
            ("tag", pa.string()),
            ("step", pa.int64()),
            ("wall_time", pa.float64()),
            ("data", pa.large_binary()),
            ("mime", pa.string()),
            ("sample_rate", pa.float64()),
        ]
    ),
    "texts": pa.schema([("tag", pa.string()), ("step", pa.int64()), ("wall_time", pa.float64()), ("text", pa.large_string())]),
    "histograms": pa.schema(
        [("tag", pa.string()), ("step", pa.int64()), ("wall_time", pa.float64()), ("left", _F64), ("right", _F64), ("count", _F64)]
    ),
    "curves": pa.schema(
        [
            ("kind", pa.string()),
            ("tag", pa.string()),
            ("step", pa.int64()),
            ("wall_time", pa.float64()),
            ("names", pa.list_(pa.string())),
            ("values", pa.list_(_F64)),
        ]
    ),
    "embeddings": pa.schema(
        [("tag", pa.string()), ("step", pa.int64()), ("wall_time", pa.float64()), ("rows", pa.int64()), ("dims", pa.int64())]
    ),
}
_TYPES = {"images": Image, "audio": Audio, "texts": Text, "histograms": Histogram, "curves": Curve, "embeddings": Embedding}
#: each column kept in the narrowest of these types that holds it exactly (the last: as read)
NARROW = {
    "line": ("<u2", "<i4"),
    "step": ("<i4", "<i8"),
    "wall_time": ("<f8",),
    "value": ("<f4", "<f8"),
    "levels": ("u1",),
    "pos": ("<u2", "<i4"),
}


def narrowest(name: str, values: np.ndarray, wide: str) -> np.ndarray:
    """``values`` as the narrowest type of column ``name`` that gives them back exactly."""
    values = np.ascontiguousarray(values, dtype=wide)
    for dtype in NARROW[name][:-1]:
        with np.errstate(over="ignore", invalid="ignore"):
            narrow = values.astype(dtype)
        if np.array_equal(narrow.astype(wide).view(f"u{values.itemsize}"), values.view(f"u{values.itemsize}")):
            return narrow
    return values.astype(NARROW[name][-1])


def read_header(entry: Path) -> tuple[dict | None, pa.Buffer | None]:
    """An entry's header and the rest of it, its tables (mapped, not read); (None, None) when
    there is none, or with a warning when it is damaged (then it is decoded again and replaced).
    Opened without blocking and only if it is a regular file: a FIFO there must not hang the build."""
    try:
        fd = os.open(entry, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return _damaged(entry, f"cannot open: {exc.strerror or exc}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return _damaged(entry, "not a regular file")
        return _parse(entry, pa.memory_map(str(entry)).read_buffer())
    except (OSError, ValueError, pa.ArrowException) as exc:
        return _damaged(entry, str(exc) or type(exc).__name__)
    finally:
        os.close(fd)


def _parse(entry: Path, body: pa.Buffer) -> tuple[dict | None, pa.Buffer | None]:
    if body.size < _HEAD or body[: len(ENTRY_MAGIC)].to_pybytes() != ENTRY_MAGIC:
        return _damaged(entry, "not an entry of this version")
    size = int.from_bytes(body[len(ENTRY_MAGIC) : len(ENTRY_MAGIC) + 8].to_pybytes(), "little")
    crc = int.from_bytes(body[len(ENTRY_MAGIC) + 8 : _HEAD].to_pybytes(), "little")
    if size > body.size - _HEAD:
        return _damaged(entry, "truncated")
    text = body[_HEAD : _HEAD + size].to_pybytes()
    if zlib.crc32(text) != crc:
        return _damaged(entry, "header checksum mismatch")
    header = json.loads(text)
    tables = body.slice(_HEAD + size)
    if not isinstance(header, dict) or zlib.crc32(memoryview(tables)) != header.get("tables_crc"):
        return _damaged(entry, "tables checksum mismatch")
    return header, tables


def _damaged(entry: Path, why: str) -> tuple[None, None]:
    """Warn and drop the entry (whatever it is: the cache folder is sitegen's), so that the entry
    decoded again can take its place."""
    log.warning("cache entry %s is damaged (%s); dropped, decoding again", entry, why)
    try:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    except OSError as exc:
        log.warning("cannot drop the cache entry %s: %s", entry, exc)
    return None, None


def probe(path: Path, end: int) -> str:
    """A fingerprint of the decoded prefix: its first 4 KiB and the 4 KiB before ``end``. A
    file that was replaced rather than appended to almost surely changes one of them."""
    with path.open("rb") as f:
        head = f.read(min(PROBE_BYTES, end))
        f.seek(max(end - PROBE_BYTES, 0))
        tail = f.read(min(PROBE_BYTES, end))
    return hashlib.sha256(head + b"|" + tail).hexdigest()


def prefix_unchanged(path: Path, header: dict) -> bool:
    try:
        return probe(path, header["state"]["end"]) == header.get("probe")
    except OSError:
        return False


def same_file(path: Path, header: dict, st: os.stat_result) -> bool:
    """Whether ``path`` (same size and mtime as the entry's file) is still that file: its probe
    matches, and either nothing wrote to it since (same inode and ctime, which ``os.utime``
    cannot set back) or its SHA-256 is the one the entry kept (a copy, a fresh mirror)."""
    if not prefix_unchanged(path, header):
        return False
    if header.get("ident") == [st.st_ino, st.st_ctime_ns]:
        return True
    files = header.get("files") or [{}]
    digest, size = files[0].get("sha256"), files[0].get("size")
    if not digest or size != st.st_size:
        return False
    try:
        return sha256_file(path, size)[0] == digest
    except OSError:
        return False


def load(entry: Path, header: dict, body: pa.Buffer) -> RunData | None:
    try:
        run = RunData(name="", format=header["format"])
        for kind, (at, size) in header["tables"].items():
            if at < 0 or size < 0 or at + size > body.size:
                raise ValueError(f"table {kind} out of bounds")
            with ipc.open_file(pa.BufferReader(body.slice(at, size))) as reader:
                table = reader.read_all()
            if kind == "scalars":
                run.scalars = _widen(table)
            else:
                setattr(run, kind, _from_table(kind, table))
        run.files = [SourceFile(Path(f["path"]), f["size"], f["decoded_bytes"], f.get("sha256", "")) for f in header["files"]]
        run.hparams = header["hparams"]
        run.hparam_metrics = header["hparam_metrics"]
        run.meta = header["meta"]
        run.artifacts = [Artifact(**a) for a in header["artifacts"]]
        run.problems = [Problem(**p) for p in header["problems"]]
        run.restarts = [(int(r), int(s)) for r, s in header.get("restarts", [])]
        return run
    except (OSError, KeyError, TypeError, ValueError, AttributeError, pa.ArrowException) as exc:
        log.info("cache entry %s unusable (%s); decoding again", entry, exc)
        return None


def encode(key: dict, state: dict, run: RunData, path: Path, st: os.stat_result) -> list:
    """A cache entry's bytes, in chunks: magic, header length and CRC, the JSON header
    (``key``: what the entry is valid for; ``state``: the decoder's, to go on from where it
    stopped; ``ident``: the file's inode and ctime as ``st`` gave them before it was read), then
    the tables as Arrow IPC files laid end to end. Raises OSError when ``path`` cannot be probed."""
    tables: dict[str, pa.Buffer] = {}
    if run.scalars.num_rows:
        tables["scalars"] = _ipc(_narrow(run.scalars))
    for kind in _SCHEMAS:
        items = getattr(run, kind)
        if items:
            tables[kind] = _ipc(_to_table(kind, items))
    spans, at, crc = {}, 0, 0
    for kind, blob in tables.items():
        spans[kind] = [at, len(blob)]
        at += len(blob)
        crc = zlib.crc32(memoryview(blob), crc)
    header = {
        "key": key,
        "state": state,
        "format": run.format,
        "tables": spans,
        "probe": probe(path, state["end"]),
        "ident": [st.st_ino, st.st_ctime_ns],
        "tables_crc": crc,
        "files": [{"path": str(f.path), "size": f.size, "decoded_bytes": f.decoded_bytes, "sha256": f.sha256} for f in run.files],
        "hparams": run.hparams,
        "hparam_metrics": run.hparam_metrics,
        "meta": run.meta,
        "artifacts": [asdict(a) for a in run.artifacts],
        "problems": [asdict(p) for p in run.problems],
        "restarts": run.restarts,
    }
    text = json.dumps(header).encode("utf-8", "surrogatepass")  # table offsets: from the end of the header
    return [ENTRY_MAGIC, len(text).to_bytes(8, "little"), zlib.crc32(text).to_bytes(4, "little"), text, *tables.values()]


def _ipc(table: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _to_table(kind: str, items: list) -> pa.Table:
    schema = _SCHEMAS[kind]
    if kind == "curves":
        rows = {
            "kind": [c.kind for c in items],
            "tag": [c.tag for c in items],
            "step": [c.step for c in items],
            "wall_time": [c.wall_time for c in items],
            "names": [list(c.columns) for c in items],
            "values": [[np.asarray(v, dtype=np.float64).tolist() for v in c.columns.values()] for c in items],
        }
    else:
        rows = {f.name: [_plain(getattr(i, f.name)) for i in items] for f in schema}
    return pa.table(rows, schema=schema)


def _plain(v: Any) -> Any:
    return v.tolist() if isinstance(v, np.ndarray) else v


def _from_table(kind: str, table: pa.Table) -> list:
    rows = table.to_pylist()
    if kind == "curves":
        return [
            Curve(r["kind"], r["tag"], r["step"], r["wall_time"], {n: np.array(v) for n, v in zip(r["names"], r["values"])}) for r in rows
        ]
    if kind == "histograms":
        return [
            Histogram(r["tag"], r["step"], r["wall_time"], np.array(r["left"]), np.array(r["right"]), np.array(r["count"])) for r in rows
        ]
    return [_TYPES[kind](**r) for r in rows]


def _narrow(table: pa.Table) -> pa.Table:
    """A run's scalars as the cache keeps them: tags as dictionary codes, steps as int32 and
    values as float32 where that loses nothing (bit for bit), which halves an entry (TensorBoard
    scalars are float32; a tag's string per row was 40% of it). Writing bytes is most of what
    keeping an entry costs; :func:`_widen` restores the table exactly."""
    if not table.schema.equals(RUN_SCALARS_SCHEMA):  # (a cast imports pyarrow.compute)
        table = table.cast(RUN_SCALARS_SCHEMA)
    g = tag_groups(table)
    codes = g.rank if len(g.tags) < 2**15 else g.rank.astype(np.int32)
    return pa.table(
        {
            "tag": pa.DictionaryArray.from_arrays(numeric_array(codes), pa.array(g.tags, pa.string())),
            "step": numeric_array(narrowest("step", table.column("step").to_numpy(), "<i8")),
            "wall_time": table.column("wall_time"),
            "value": numeric_array(narrowest("value", table.column("value").to_numpy(), "<f8")),
        }
    )


def _widen(table: pa.Table) -> pa.Table:
    """The run's scalars from a cache entry's table (:func:`_narrow`, or an entry that kept the
    plain schema)."""
    if table.schema.equals(RUN_SCALARS_SCHEMA):
        return table
    tag = table.column("tag").combine_chunks()
    codes = tag.indices.to_numpy(zero_copy_only=False)
    tags = tag.dictionary.to_pylist()
    out = pa.table(
        {
            "tag": strings_from_codes(tags, codes),
            "step": numeric_array(table.column("step").to_numpy(), "<i8"),
            "wall_time": numeric_array(table.column("wall_time").to_numpy(), "<f8"),
            "value": numeric_array(table.column("value").to_numpy(), "<f8"),
        },
        schema=RUN_SCALARS_SCHEMA,
    )
    remember_tag_groups(out, tags, codes)
    return out
