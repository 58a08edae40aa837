"""The run table (sitegen.cache.table): the summaries of a build's runs in one file, read in one
pass by the next build; a damaged or missing table costs only speed."""

from __future__ import annotations

import hashlib
from pathlib import Path

from sitegen.cache import table


def key(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def write(path: Path, docs: dict[str, bytes]) -> None:
    with table.Writer(path) as w:
        for k, text in docs.items():
            w.add(k, text)
        w.commit()


def test_entries_come_back_in_file_order_only_when_wanted(tmp_path: Path):
    path = tmp_path / "t.runs"
    docs = {key(n): b'{"n": %d}' % n * (n + 1) for n in range(50)}
    write(path, docs)
    wanted = {key(n) for n in range(0, 50, 3)}
    got = list(table.read(path, wanted))
    assert got == [(k, t) for k, t in docs.items() if k in wanted]
    assert list(table.read(tmp_path / "none.runs", wanted)) == []


def test_reading_stops_at_the_first_damaged_entry(tmp_path: Path):
    path = tmp_path / "t.runs"
    docs = {key(n): b"x" * 100 for n in range(10)}
    write(path, docs)
    data = bytearray(path.read_bytes())
    entry = len(table.MAGIC) + 4 * (40 + 100)  # the fifth entry
    data[entry + 40 + 7] ^= 1  # a byte of its document
    path.write_bytes(bytes(data))
    assert [k for k, _ in table.read(path, set(docs))] == list(docs)[:4]
    path.write_bytes(bytes(data[: len(table.MAGIC) + 2 * (40 + 100) + 50]))  # cut inside the third
    assert [k for k, _ in table.read(path, set(docs))] == list(docs)[:2]
    path.write_bytes(b"not a table" + bytes(data[len(table.MAGIC) :]))
    assert list(table.read(path, set(docs))) == []


def test_an_unfinished_table_leaves_the_last_one(tmp_path: Path):
    path = tmp_path / "t.runs"
    (tmp_path / ".t.runs.tmp99999999").write_bytes(b"a crashed build's")
    write(path, {key(1): b"one"})
    with table.Writer(path) as w:
        w.add(key(2), b"two")
        w.add("not a key", b"three")  # (skipped: keys are SHA-256 digests)
    assert list(table.read(path, {key(1), key(2)})) == [(key(1), b"one")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.runs"]
    write(path, {key(2): b"two", "0" * 10: b"short"})
    assert list(table.read(path, {key(1), key(2)})) == [(key(2), b"two")]
