"""The decode cache: one entry per log file, one file each: a JSON header, then its tables as
Arrow IPC files laid end to end.

Keyed by the file's absolute path, size, mtime and the decoder version. Log files only grow, so
when a cached file has grown, only its new tail is decoded (from the last complete record) and
appended to the entry. Only this module touches the cache folder; every write is atomic (temp
file + rename), and an unreadable entry is simply decoded again. A cache that cannot be written
is skipped with a warning, except on a full or failing disk, which ends the build (exit 3). One file per entry, not a
folder of them: creating files and folders was a third of what caching a small run cost.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import stat
import struct
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from sitegen.cache import entries
from sitegen.cache.entries import narrowest
from sitegen.errors import Problem
from sitegen.fileio import OutsideRoots, atomic_write, check_inside, disk_fault, sha256_file
from sitegen.model import (
    ReadOptions,
    RunData,
    merge_parts,
)
from sitegen.resources import default_cache_dir

log = logging.getLogger(__name__)

#: Bump when any decoder's output changes: every cached entry is then decoded again.
DECODER_VERSION = "3"
#: hex digits of a key naming its folder: 16 folders per kind, not 256 (a fresh cache made
#: 512 folders, each costing up to a millisecond; 10,000 runs are still only 625 files a folder)
SHARD = 1

#: a run summary file: the header (magic; points, JSON length and lines as u64; the columns'
#: types; for each level k of ``sitegen.pages.compare.LEVELS``, the points drawn at level k or a
#: coarser one, as u64), each line's point count (u32), the points (their columns side by
#: side, coarsest level first), the JSON document. After the header, CRC-32s (u32) of: the
#: header; the counts and the points of each level (as read for it), and of all of them; the
#: document. A damaged summary is then never read as values: the run is drawn again.
_SUMMARY_MAGIC = b"SGSUM05\n"
_PIECES_MAGIC = b"SGPCS03\n"
_GATHERED_MAGIC = b"SGGTH01\n"  # the points a summarised comparison page gathered for a group (Store.put_gathered)
_BLOB_MARK = b"\nSGBLOB1"  # the end of a kept blob, before its CRC-32  # the head of a piece of a comparison page (Store.put_pieces)
#: the points columns of a run summary, in file order, with the types they are read back as;
#: each is kept in the narrowest of its ``entries.NARROW`` types that holds it exactly
SUMMARY_COLUMNS = (("line", "<i4"), ("step", "<i8"), ("wall_time", "<f8"), ("value", "<f8"), ("levels", "u1"))
#: and in the file, each point's place in the original order (points are kept coarsest first)
_FILE_COLUMNS = SUMMARY_COLUMNS + (("pos", "<i4"),)
_TYPE_CODES = {"<u2": b"H", "<i4": b"i", "<i8": b"q", "<f4": b"f", "<f8": b"d", "u1": b"B"}
_CODE_TYPES = {v: k for k, v in _TYPE_CODES.items()}
_LEVEL_SLOTS = 8  # bits of a point's level byte
_HEAD_ONLY = len(_SUMMARY_MAGIC) + 24 + 8 + 8 * _LEVEL_SLOTS
_SUMMARY_HEAD = _HEAD_ONLY + 4 * (_LEVEL_SLOTS + 3)


@functools.lru_cache(maxsize=64)
def _row_type(types: tuple[str, ...]) -> np.dtype:
    """A summary point as it is kept: its columns side by side, packed (made once per set of
    column types: a rebuild reads a summary per run)."""
    return np.dtype([(name, t) for (name, _), t in zip(_FILE_COLUMNS, types)])


#: the coarsest level a level byte draws its point at (its highest bit; -1: none)
_TOP = np.array([v.bit_length() - 1 for v in range(256)], np.int8)


class Store:
    """A cache folder (``None``: caching off)."""

    #: log files smaller than this are decoded again rather than kept: decoding them costs less
    #: than writing and reading an entry, and a large archive of small runs would double its files
    MIN_CACHED_BYTES = 64 << 10

    def __init__(self, root: Path | None) -> None:
        self.root = Path(root) if root is not None else None

    def blob(self, name: str, make: Callable[[], bytes]) -> bytes:
        """A named byte string made once and then kept (e.g. the Vega bundle).

        Blobs depend only on the installed packages, never on an archive, so besides this
        store they are kept in the machine's default cache too: a build with a fresh
        ``--cache`` folder does not pay the seconds the Vega bundle and the chart templates
        take to make. A kept blob ends with a mark and its CRC-32: a damaged one is made again."""
        if self.root is None:
            return make()
        roots = list(dict.fromkeys([self.root, default_cache_dir()]))
        data, todo = None, []
        for root in roots:
            path = root / "blobs" / f"{name}.sealed"  # (another name than the unsealed blobs of older versions)
            kept = _read_blob(path)
            if kept is None:
                todo.append(path)
            elif data is None:
                data = kept
        if data is None:
            data = make()
        for path in todo:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, [data, _BLOB_MARK, zlib.crc32(data).to_bytes(4, "little")])
            except OSError as exc:
                _unless_disk_fault(exc)
                log.warning("cannot cache %s in %s: %s", name, path.parent, exc)
        return data

    def sha256(self, path: Path, limit: int) -> tuple[str, int]:
        """SHA-256 of the first ``limit`` bytes of a log file, remembered per (path, size, mtime,
        inode, ctime): hashing a large archive on every nightly build would cost more than the
        build itself. A slot is a digest, its length and their CRC-32 (a damaged one is redone)."""
        if self.root is None:
            return sha256_file(path, limit)
        st = path.stat()
        key = f"{path.resolve()}|{limit}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{st.st_ctime_ns}"
        slot = self.root / "hashes" / DECODER_VERSION / hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        try:
            digest, size, crc = slot.read_text("ascii").split()
            if len(digest) == 64 and int(crc, 16) == zlib.crc32(f"{digest} {size}".encode()):
                return digest, int(size)
            log.warning("cache slot %s is damaged; hashing again", slot)
        except FileNotFoundError:
            pass
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            log.warning("cache slot %s is damaged (%s); hashing again", slot, exc)
        digest, n = sha256_file(path, limit)
        try:
            text = f"{digest} {n}"
            _put(slot, [f"{text} {zlib.crc32(text.encode()):08x}".encode("ascii")])
        except OSError as exc:
            _unless_disk_fault(exc)
        return digest, n

    def put_summary(self, key: str, doc: dict, columns: dict[str, np.ndarray]) -> bytes | None:
        """Keep a run's summary under ``key``: one file holding the points as raw columns
        (:data:`SUMMARY_COLUMNS`, all of one length, lines in order) and the JSON document.
        One file per run: creating files is most of what keeping 500 summaries costs; raw
        columns behind a fixed header: a comparison page reads hundreds of them, and opening an
        Arrow file (or parsing the document) costs more than reading the points. The points are
        kept coarsest level first, so a page that draws few points per line reads only the
        first of them (:meth:`get_points`). The document's JSON text, None if it could not."""
        if self.root is None:
            return None
        line = np.asarray(columns["line"])
        n = len(line)
        top = _TOP[np.asarray(columns["levels"], np.uint8)]
        order = np.argsort(-top, kind="stable")
        upto = [int(np.count_nonzero(top >= k)) for k in range(_LEVEL_SLOTS)]
        counts = np.bincount(line, minlength=int(line.max()) + 1 if n else 0).astype("<u4")
        cols = [
            *(narrowest(name, np.asarray(columns[name])[order], dtype) for name, dtype in SUMMARY_COLUMNS),
            narrowest("pos", order, "<i4"),
        ]
        codes = b"".join(_TYPE_CODES[c.dtype.str if c.dtype.itemsize > 1 else "u1"] for c in cols).ljust(8, b" ")
        rows = np.empty(n, _row_type(tuple(c.dtype.str if c.dtype.itemsize > 1 else "u1" for c in cols)))
        for (name, _), c in zip(_FILE_COLUMNS, cols):
            rows[name] = c
        text = json.dumps(doc).encode("utf-8", "surrogatepass")
        head = b"".join(x.to_bytes(8, "little") for x in (n, len(text), len(counts), *upto))
        start = _SUMMARY_MAGIC + head[:24] + codes + head[24:]
        points = counts.tobytes() + rows.tobytes()
        check = [zlib.crc32(start), *_prefix_crcs(points, [4 * len(counts) + m * rows.dtype.itemsize for m in (*upto, n)])]
        check.append(zlib.crc32(text))
        try:
            self._ready()
            _put(Path(self._summary_path(key)), [start, b"".join(c.to_bytes(4, "little") for c in check), points, text])
            return text
        except OSError as exc:
            _unless_disk_fault(exc)
            log.warning("cannot keep the run summary %s: %s", key, exc)
            return None

    def _summary_read(self, key: str, level: int | None, doc: bool) -> Any:
        """The JSON document of a summary file (``doc``), else its points: (per-line point
        counts, {column: values}) with only the points drawn at ``level`` or a coarser one when
        ``level`` is given (the first points kept), in file order. None when the file is
        missing, or (dropped with a warning) damaged."""
        if self.root is None:
            return None
        path = self._summary_path(key)
        try:  # a plain descriptor and a string path: a comparison page reads hundreds of these
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:
            return _damaged_summary(path, f"cannot open: {exc.strerror or exc}")
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return _damaged_summary(path, "not a regular file")
            start = os.pread(fd, _SUMMARY_HEAD, 0)
            if len(start) < _SUMMARY_HEAD or not start.startswith(_SUMMARY_MAGIC):
                return _damaged_summary(path, "not a summary of this version")
            crcs = struct.unpack_from(f"<{_LEVEL_SLOTS + 3}I", start, _HEAD_ONLY)
            if zlib.crc32(start[:_HEAD_ONLY]) != crcs[0]:
                return _damaged_summary(path, "header checksum mismatch")
            at = len(_SUMMARY_MAGIC)
            n, size, lines = struct.unpack_from("<3Q", start, at)
            codes = tuple(_CODE_TYPES.get(start[i : i + 1]) for i in range(at + 24, at + 24 + len(_FILE_COLUMNS)))
            if None in codes:
                return None
            row = _row_type(codes)
            if doc:  # the document alone: its points are checked when they are read
                part = os.pread(fd, size, _SUMMARY_HEAD + 4 * lines + n * row.itemsize)
                if len(part) != size or zlib.crc32(part) != crcs[-1]:
                    return _damaged_summary(path, "document checksum mismatch")
                return part
            at += 32
            m = n if level is None else int.from_bytes(start[at + 8 * level : at + 8 * level + 8], "little")
            part = os.pread(fd, 4 * lines + m * row.itemsize, _SUMMARY_HEAD)  # one read: points are kept row by row
            if len(part) != 4 * lines + m * row.itemsize or zlib.crc32(part) != crcs[1 + (_LEVEL_SLOTS if level is None else level)]:
                return _damaged_summary(path, "points checksum mismatch")
            rows = np.frombuffer(part, row, m, 4 * lines)
            return np.frombuffer(part, "<u4", lines), {name: rows[name] for name, _ in _FILE_COLUMNS}
        except (OSError, ValueError) as exc:
            return _damaged_summary(path, str(exc))
        finally:
            os.close(fd)

    def entry_file(self, path: Path) -> str | None:
        """Where the cache keeps what ``path`` decoded to (None: caching off), e.g. to read it
        ahead (it may not exist)."""
        return None if self.root is None else str(self._entry_path(path))

    def get_summary_text(self, key: str) -> bytes | None:
        """A run's summary document as the JSON text kept (None: missing or damaged). Its points
        are not read: most rebuilds read none of an unchanged run's, and :meth:`get_points`
        checks those it reads."""
        got = self._summary_read(key, None, doc=True)
        return got if isinstance(got, bytes) else None

    def get_points(self, key: str, level: int | None = None) -> dict[str, np.ndarray] | None:
        """The points of a run's summary as numpy columns (narrow types as they are kept: they
        compute alike), in their original order; with ``level``, only those drawn at
        ``compare.LEVELS[level]`` (the few a page of many runs draws are read alone). Also
        ``"per_line"``: each line's number of points, at every level."""
        got = self._summary_read(key, level, doc=False)
        if got is None:
            return None
        counts, cols = got
        if level is not None:
            keep = (cols["levels"] & np.uint8(1 << level)) != 0
            if not keep.all():
                cols = {name: c[keep] for name, c in cols.items()}
        order = np.argsort(cols.pop("pos"), kind="stable")
        out = {name: c[order] for name, c in cols.items()}
        out["per_line"] = counts
        return out

    def get_piece(self, slug: str, key: str) -> list | None:
        """The head of a piece of a comparison page kept by the last build (``slug``: the page's
        group; see :func:`sitegen.pages.compare.overlay_data`: its parts are in its file in the live
        build), None when there is none (or it is damaged)."""
        if self.root is None:
            return None
        try:
            data = Path(self._pieces_dir(slug), key).read_bytes()
            at = len(_PIECES_MAGIC) + 4
            if not data.startswith(_PIECES_MAGIC) or zlib.crc32(data[at:]) != int.from_bytes(data[at - 4 : at], "little"):
                return None
            return json.loads(str(data[at:], "utf-8", "surrogatepass"))
        except (OSError, ValueError):
            return None

    def put_pieces(self, slug: str, heads: dict) -> None:
        """Keep the heads of a comparison page's pieces for the next build: each in a file of
        its own, so a rebuild writes only the few that changed, and the page's other heads are
        deleted. A head file: magic, CRC-32 of the rest, the head as JSON."""
        if self.root is None:
            return
        folder = self._pieces_dir(slug)
        try:
            there = set(os.listdir(folder))
        except OSError:
            there = set()
        try:
            self._ready()
            for key, head in heads.items():
                if key in there:
                    continue
                body = json.dumps(head).encode("utf-8", "surrogatepass")
                _put(Path(folder, key), [_PIECES_MAGIC, zlib.crc32(body).to_bytes(4, "little"), body])
            for name in there.difference(heads):
                os.unlink(os.path.join(folder, name))
        except OSError as exc:
            _unless_disk_fault(exc)
            log.warning("cannot keep the pieces of comparison page %s: %s", slug, exc)

    def get_gathered(self, slug: str, name: str) -> tuple[dict, dict[str, np.ndarray]] | None:
        """What :meth:`put_gathered` kept for group ``name`` of comparison page ``slug``: its
        document and its arrays; None when there is none or it is damaged."""
        if self.root is None:
            return None
        try:
            data = Path(self._gathered_path(slug, name)).read_bytes()
            at = len(_GATHERED_MAGIC) + 4
            if not data.startswith(_GATHERED_MAGIC) or zlib.crc32(data[at:]) != int.from_bytes(data[at - 4 : at], "little"):
                return None
            size = int.from_bytes(data[at : at + 8], "little")
            doc = json.loads(str(data[at + 8 : at + 8 + size], "utf-8", "surrogatepass"))
            arrays, pos = {}, at + 8 + size
            for key, dtype, n in doc.pop("arrays"):
                width = np.dtype(dtype).itemsize
                arrays[key] = np.frombuffer(data, dtype, n, pos)
                pos += width * n
            return doc, arrays
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def put_gathered(self, slug: str, name: str, doc: dict, arrays: dict[str, np.ndarray]) -> None:
        """Keep a summarised comparison page's points of one of its groups for the next build
        (see :func:`sitegen.pages.bands.summary_data`): magic, CRC-32 of the rest, the length of
        the JSON document, the document (``doc`` and the arrays' types and lengths), the arrays."""
        if self.root is None:
            return
        cols = [np.ascontiguousarray(a) for a in arrays.values()]
        head = {**doc, "arrays": [[k, a.dtype.str, len(a)] for k, a in zip(arrays, cols)]}
        body = json.dumps(head).encode("utf-8", "surrogatepass")
        rest: list[bytes | memoryview] = [len(body).to_bytes(8, "little"), body, *(a.data.cast("B") for a in cols)]
        crc = 0
        for part in rest:
            crc = zlib.crc32(part, crc)
        try:
            self._ready()
            _put(Path(self._gathered_path(slug, name)), [_GATHERED_MAGIC, crc.to_bytes(4, "little"), *rest])
        except OSError as exc:
            _unless_disk_fault(exc)
            log.warning("cannot keep the points of comparison page %s: %s", slug, exc)

    def _gathered_path(self, slug: str, name: str) -> str:
        assert self.root is not None
        digest = hashlib.sha256(json.dumps([slug, name]).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return f"{self.root}/bands/{digest}"

    def _ready(self) -> None:
        """The cache folder exists (made once per process)."""
        assert self.root is not None
        _make_dir(self.root)

    def _summary_path(self, key: str) -> str:
        assert self.root is not None
        return f"{self.root}/runs/{key[:SHARD]}/{key}.sum"

    def _pieces_dir(self, slug: str) -> str:
        assert self.root is not None
        return f"{self.root}/pages/{hashlib.sha256(slug.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}"

    def _entry_path(self, path: Path) -> Path:
        assert self.root is not None
        digest = hashlib.sha256(str(path.resolve()).encode("utf-8", "surrogatepass")).hexdigest()
        return self.root / "files" / DECODER_VERSION / digest[:SHARD] / f"{digest}.entry"

    def _save(self, entry: Path, key: dict, state: dict, run: RunData, path: Path, st: os.stat_result) -> None:
        try:
            chunks = entries.encode(key, state, run, path, st)
            self._ready()
            _put(entry, chunks)
        except OSError as exc:
            _unless_disk_fault(exc)
            log.warning("cannot write the cache entry %s: %s", entry, exc)

    def read_file(
        self,
        path: Path,
        options: ReadOptions,
        decode: Callable[..., tuple[RunData, dict]],
    ) -> RunData:
        """The decoded content of one log file, from the cache where possible.

        ``decode(path, options, start=..., state=...)`` decodes from ``start`` to the end.
        """
        try:
            st = path.lstat()  # a link is checked against the roots before its entry is trusted
            if stat.S_ISLNK(st.st_mode):
                check_inside(path, options.roots)
                st = path.stat()
        except OutsideRoots as exc:
            run = RunData(name="", format="")
            run.problems.append(exc.problem())
            return run
        except OSError as exc:
            run = RunData(name="", format="")
            run.problems.append(Problem(str(path), None, "unreadable", f"cannot read: {exc.strerror or exc}"))
            return run
        if self.root is None or st.st_size < self.MIN_CACHED_BYTES:
            return decode(path, options)[0]
        key = {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "verify": options.verify,
            "fast": options.fast,
            "max_image_bytes": options.max_image_bytes,
            "max_text_chars": options.max_text_chars,
            "max_audio_bytes": options.max_audio_bytes,
            "roots": list(options.roots),
        }
        entry = self._entry_path(path)
        header, body = entries.read_header(entry)
        if header is not None and header.get("key") == key and entries.same_file(path, header, st):
            cached = entries.load(entry, header, body)
            if cached is not None:
                return cached
        if (
            header is not None
            and isinstance(header.get("key"), dict)
            and all(header["key"].get(k) == key[k] for k in key if k not in ("size", "mtime_ns"))
            and _grown_or_same(path, header, st)
        ):
            cached = entries.load(entry, header, body)
            if cached is not None:
                end = header["state"]["end"]
                tail, state = decode(path, options, start=end, state=header["state"])
                cached.problems = [p for p in cached.problems if not (p.kind == "truncated" and (p.offset or 0) >= end)]
                run = merge_parts("", cached.format, [cached, tail])
                run.files = tail.files
                self._save(entry, key, state, run, path, st)
                return run
        run, state = decode(path, options)
        self._save(entry, key, state, run, path, st)
        return run


def _unless_disk_fault(exc: OSError) -> None:
    """Raise ``exc`` when the disk is full or failing: a build that went on would leave the
    operator a cache that silently stopped working (a read-only cache folder is skipped)."""
    if disk_fault(exc):
        raise exc


def _grown_or_same(path: Path, header: dict, st: os.stat_result) -> bool:
    """The entry's file, appended to (its decoded prefix probes the same), or only touched (the
    same file by :func:`entries.same_file`): then only what follows the entry's end is decoded."""
    old = header["key"].get("size", st.st_size + 1)
    if old < st.st_size:
        return entries.prefix_unchanged(path, header)
    return old == st.st_size and entries.same_file(path, header, st)


def _read_blob(path: Path) -> bytes | None:
    """A kept blob, None when there is none, or (with a warning) when it is damaged."""
    try:
        kept = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cache blob %s is unreadable (%s); made again", path, exc)
        return None
    data, mark, crc = kept[: -len(_BLOB_MARK) - 4], kept[-len(_BLOB_MARK) - 4 : -4], kept[-4:]
    if mark == _BLOB_MARK and zlib.crc32(data) == int.from_bytes(crc, "little"):
        return data
    log.warning("cache blob %s is damaged; made again", path)
    return None


def _prefix_crcs(data: bytes, ends: list[int]) -> list[int]:
    """CRC-32 of ``data[:e]`` for each ``e`` of ``ends`` (one pass over the longest)."""
    view, crc, at, got = memoryview(data), 0, 0, {}
    for e in sorted(set(ends)):
        crc = zlib.crc32(view[at:e], crc)
        got[e], at = crc, e
    return [got[e] for e in ends]


def _damaged_summary(path: str, why: str) -> None:
    """Warn and drop a damaged run summary (its run is drawn again and kept anew)."""
    log.warning("run summary %s is damaged (%s); dropped, drawing the run again", path, why)
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError as exc:
        log.warning("cannot drop the run summary %s: %s", path, exc)
    return None


_made_dirs: set[Path] = set()


def _make_dir(path: Path) -> None:
    """``mkdir -p``, remembered per process: on some file systems even a ``mkdir`` of a folder
    that exists costs a quarter of a millisecond, and every run asks for a few."""
    if path not in _made_dirs:
        path.mkdir(parents=True, exist_ok=True)
        _made_dirs.add(path)


def _put(path: Path, chunks: list) -> None:
    """Write ``path`` atomically, its folder made as needed (and made again if it vanished
    since this process last made it)."""
    for attempt in (0, 1):
        _make_dir(path.parent)
        try:
            atomic_write(path, chunks)
            return
        except FileNotFoundError:
            _made_dirs.discard(path.parent)
            if attempt:
                raise
