"""A cache that is never wrong: a log rewritten in place with its size and mtime kept is read
again, and a damaged cache file (entry, run summary, digest slot) is dropped with a warning and
made again. Each case ends in a site byte-identical to a cold build (no cache) of the same archive."""
from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from sitegen.cache import entries
from sitegen.cache.store import _SUMMARY_HEAD, Store
from sitegen.config import Config
from sitegen.ingest import tfevents
from sitegen.model import ReadOptions
from sitegen.pipeline.build import BuildOptions, build
from tests.cache.test_store import Counting, _same
from tests.support import corpus
from tests.support.eventgen import write_run
from tests.support.sites import assert_same_site

STEPS = 1500  # a log of ~100 KB: its middle lies far from the probe's first and last 4 KiB


def _build(archive: Path, out: Path, cache: Path | None) -> None:
    build(archive, out, BuildOptions(config=Config(), cache=cache, use_cache=cache is not None, source_date_epoch=1))


def _assert_like_cold(archive: Path, out: Path, tmp_path: Path) -> None:
    cold = tmp_path / "cold"
    shutil.rmtree(cold, ignore_errors=True)
    _build(archive, cold, None)
    assert_same_site(out, cold, news=False)


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for i in range(3):
        write_run(root / f"run{i}", tags=["train/loss", "val/acc"], steps=STEPS, seed=i, start=1.7e9)
    return root


def _log(archive: Path, i: int) -> Path:
    return next((archive / f"run{i}").glob("*tfevents*"))


def _other_values(path: Path, tmp_path: Path, seed: int = 99) -> bytes:
    """A log of the very same layout (tags, steps, record sizes) with other values."""
    other = write_run(tmp_path / f"other{seed}", tags=["train/loss", "val/acc"], steps=STEPS, seed=seed, start=1.7e9)
    data = other.read_bytes()
    assert len(data) == path.stat().st_size
    return data


def _rewrite_in_place(path: Path, data: bytes) -> None:
    """Overwrite ``path``'s bytes in place (same inode, same size) and set its times back, as
    ``rsync --inplace`` or a restore with preserved times does."""
    st = path.stat()
    with path.open("r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = path.stat()
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)


def _spliced(old: bytes, new: bytes) -> bytes:
    """``old`` with ten whole records from its middle taken from ``new`` (same layout): its first
    and last blocks are unchanged."""
    recs = corpus.tf_offsets(old)
    mid = len(recs) // 2
    a, b = recs[mid][0], recs[mid + 10][0]
    assert a > 3 * entries.PROBE_BYTES and len(old) - b > 3 * entries.PROBE_BYTES and old[a:b] != new[a:b]
    return old[:a] + new[a:b] + old[b:]


@pytest.mark.parametrize("where", ["everywhere", "middle"])
def test_a_log_rewritten_in_place_is_read_again(archive: Path, tmp_path: Path, where: str):
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(archive, out, cache)
    log = _log(archive, 1)
    new = _other_values(log, tmp_path)
    _rewrite_in_place(log, new if where == "everywhere" else _spliced(log.read_bytes(), new))
    _build(archive, out, cache)
    _assert_like_cold(archive, out, tmp_path)


def test_the_decode_cache_checks_the_file_it_came_from(archive: Path, tmp_path: Path):
    """At the level of the entry: same size and mtime is not enough (a changed middle, ctime
    changed); a copy with the same bytes and mtime (a fresh mirror) is still served, after its
    SHA-256 is checked; a copy with a changed middle is not."""
    log = _log(archive, 0)
    store, dec = Store(tmp_path / "cache"), Counting()
    opts = ReadOptions(digest=True)
    store.read_file(log, opts, dec)
    store.read_file(log, opts, dec)
    assert dec.starts == [0]
    _rewrite_in_place(log, _spliced(log.read_bytes(), _other_values(log, tmp_path)))
    again = store.read_file(log, opts, dec)
    assert dec.starts == [0, 0]
    _same(again, tfevents.decode_file(log, opts)[0])
    # a copy of the same bytes at the same path (a new inode and ctime): checked and served
    st = log.stat()
    copy = log.with_name("copy")
    shutil.copy2(log, copy)
    os.replace(copy, log)
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert log.stat().st_ino != st.st_ino
    store.read_file(log, opts, dec)
    assert dec.starts == [0, 0]
    # and a copy whose middle differs: decoded again
    shutil.copy2(log, copy)
    _rewrite_in_place(copy, _spliced(log.read_bytes(), _other_values(log, tmp_path, seed=98)))
    os.replace(copy, log)
    got = store.read_file(log, opts, dec)
    assert dec.starts == [0, 0, 0]
    _same(got, tfevents.decode_file(log, opts)[0])


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x55
    path.write_bytes(bytes(data))


def _entry_damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    head = len(entries.ENTRY_MAGIC) + 12
    size = int.from_bytes(data[len(entries.ENTRY_MAGIC) : len(entries.ENTRY_MAGIC) + 8], "little")
    if how == "flip-values":  # inside the tables: Arrow still reads them, with other values
        _flip(path, head + size + (len(data) - head - size) // 3)
    elif how == "flip-header":
        _flip(path, head + size // 2)
    elif how == "truncated":
        path.write_bytes(data[: len(data) * 2 // 3])
    elif how == "old-version":
        path.write_bytes(b"SGENT01\n" + data[len(entries.ENTRY_MAGIC) :])
    elif how == "directory":
        path.unlink()
        path.mkdir()
    elif how == "fifo":  # opening it to read would block forever
        path.unlink()
        os.mkfifo(path)
    elif how == "empty":
        path.write_bytes(b"")


def _summary_damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    lines = int.from_bytes(data[24:32], "little")
    if how == "flip-points":
        _flip(path, _SUMMARY_HEAD + 4 * lines + 5)
    elif how == "flip-counts":
        _flip(path, _SUMMARY_HEAD)
    elif how == "flip-document":
        _flip(path, len(data) - 20)
    elif how == "truncated":
        path.write_bytes(data[: len(data) - 30])
    elif how == "old-version":
        path.write_bytes(b"SGSUM04\n" + data[8:])
    elif how == "directory":
        path.unlink()
        path.mkdir()


@pytest.mark.parametrize("how", ["flip-values", "flip-header", "truncated", "old-version", "directory", "fifo", "empty"])
def test_a_damaged_decode_cache_entry_is_decoded_again(archive: Path, tmp_path: Path, how: str, caplog):
    cache = tmp_path / "cache"
    _build(archive, tmp_path / "first", cache)
    found = sorted(cache.rglob("*.entry"))
    assert len(found) == 3
    for entry in found:
        _entry_damage(entry, how)
    out = tmp_path / "site"  # a new site folder: every run is read (through the cache)
    with caplog.at_level(logging.WARNING, logger="sitegen.cache"):
        _build(archive, out, cache)
    warned = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(warned) == 3 and all(str(cache) in w for w in warned), warned
    _assert_like_cold(archive, out, tmp_path)
    assert all(entries.read_header(e)[0] is not None for e in found)  # dropped and made again


@pytest.mark.parametrize("how", ["flip-points", "flip-counts", "flip-document", "truncated", "old-version", "directory"])
def test_a_damaged_run_summary_draws_its_run_again(archive: Path, tmp_path: Path, how: str, caplog):
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(archive, out, cache)
    found = sorted(cache.rglob("*.sum"))
    assert len(found) == 3
    for summary in found:
        _summary_damage(summary, how)
    for t in cache.glob("tables/*.runs"):  # (else the reused runs' documents come from the run table, whole)
        t.unlink()
    corpus.append_scalars(_log(archive, 0), "train/loss", range(STEPS, STEPS + 5))  # run0 changed; run1, run2 reused
    with caplog.at_level(logging.WARNING, logger="sitegen.cache"):
        _build(archive, out, cache)
    warned = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(warned) >= 2, warned
    _assert_like_cold(archive, out, tmp_path)


def test_a_damaged_digest_slot_is_hashed_again(archive: Path, tmp_path: Path, caplog):
    import hashlib

    log = _log(archive, 2)
    store = Store(tmp_path / "cache")
    want = (hashlib.sha256(log.read_bytes()).hexdigest(), log.stat().st_size)
    assert store.sha256(log, want[1]) == want
    (slot,) = [p for p in (tmp_path / "cache" / "hashes").rglob("*") if p.is_file()]
    text = slot.read_text()
    slot.write_text(("0" if text[0] != "0" else "1") + text[1:])  # another digest of the right form
    with caplog.at_level(logging.WARNING, logger="sitegen.cache"):
        assert store.sha256(log, want[1]) == want
    assert any("is damaged" in r.getMessage() for r in caplog.records)
