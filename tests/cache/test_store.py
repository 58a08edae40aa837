"""The decode cache returns exactly what a fresh decode returns, and decodes only appended tails."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from sitegen.cache.store import Store
from sitegen.ingest import tfevents
from sitegen.model import ReadOptions, RunData
from tests.support import EXAMPLE

pytestmark = pytest.mark.usefixtures("cache_every_file")  # (the test files are small)


def _biggest_event_file() -> Path:
    return max(EXAMPLE.rglob("*tfevents*"), key=lambda p: p.stat().st_size)


def _same(a: RunData, b: RunData) -> None:
    ta, tb = a.scalars, b.scalars
    assert ta.column("tag").to_pylist() == tb.column("tag").to_pylist()
    assert ta.column("step").to_pylist() == tb.column("step").to_pylist()
    for col in ("wall_time", "value"):
        assert np.array_equal(ta.column(col).to_numpy().view(np.uint64), tb.column(col).to_numpy().view(np.uint64))
    assert [(i.tag, i.step, i.data) for i in a.images] == [(i.tag, i.step, i.data) for i in b.images]
    assert [(t.tag, t.step, t.text) for t in a.texts] == [(t.tag, t.step, t.text) for t in b.texts]
    assert [(h.tag, h.step, h.count.tolist(), h.left.tolist()) for h in a.histograms] == [
        (h.tag, h.step, h.count.tolist(), h.left.tolist()) for h in b.histograms
    ]
    assert [(c.tag, {k: v.tolist() for k, v in c.columns.items()}) for c in a.curves] == [
        (c.tag, {k: v.tolist() for k, v in c.columns.items()}) for c in b.curves
    ]
    assert [(x.tag, x.data) for x in a.audio] == [(x.tag, x.data) for x in b.audio]
    assert a.hparams == b.hparams and a.hparam_metrics == b.hparam_metrics
    assert [(p.offset, p.kind) for p in a.problems] == [(p.offset, p.kind) for p in b.problems]
    assert [(f.size, f.decoded_bytes) for f in a.files] == [(f.size, f.decoded_bytes) for f in b.files]


class Counting:
    """Wraps the decoder to record which byte offsets decoding started from."""

    def __init__(self) -> None:
        self.starts: list[int] = []

    def __call__(self, path, options, *, start=0, state=None):
        self.starts.append(start)
        return tfevents.decode_file(path, options, start=start, state=state)


def test_cache_hit_equals_fresh_decode(tmp_path: Path):
    src = tmp_path / "events.out.tfevents.1.host"
    shutil.copy(_biggest_event_file(), src)
    store, dec = Store(tmp_path / "cache"), Counting()
    first = store.read_file(src, ReadOptions(), dec)
    second = store.read_file(src, ReadOptions(), dec)
    assert dec.starts == [0]  # the second read came from the cache
    _same(first, tfevents.decode_file(src, ReadOptions())[0])
    _same(second, first)


def test_small_files_are_decoded_again_rather_than_kept(tmp_path: Path, monkeypatch):
    """A log file below ``Store.MIN_CACHED_BYTES`` gets no entry (decoding it costs less than
    an entry), and reads the same; one of that size or more is kept."""
    src = tmp_path / "events.out.tfevents.1.host"
    shutil.copy(_biggest_event_file(), src)
    size = src.stat().st_size
    store, dec = Store(tmp_path / "cache"), Counting()
    monkeypatch.setattr(Store, "MIN_CACHED_BYTES", size + 1)
    _same(store.read_file(src, ReadOptions(), dec), store.read_file(src, ReadOptions(), dec))
    assert dec.starts == [0, 0] and not list((tmp_path / "cache").rglob("*.entry"))
    monkeypatch.setattr(Store, "MIN_CACHED_BYTES", size)
    store.read_file(src, ReadOptions(), dec)
    store.read_file(src, ReadOptions(), dec)
    assert dec.starts == [0, 0, 0] and len(list((tmp_path / "cache").rglob("*.entry"))) == 1


@pytest.mark.parametrize("cut", [0.3, 0.71])
def test_grown_file_decodes_only_its_tail(tmp_path: Path, cut: float):
    full = _biggest_event_file().read_bytes()
    src = tmp_path / "events.out.tfevents.1.host"
    src.write_bytes(full[: int(len(full) * cut)])  # usually cuts a record in half: a pending tail
    store, dec = Store(tmp_path / "cache"), Counting()
    partial = store.read_file(src, ReadOptions(), dec)
    assert partial.files[0].decoded_bytes <= len(full) * cut
    with src.open("ab") as f:
        f.write(full[int(len(full) * cut) :])
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 1_000_000))
    grown = store.read_file(src, ReadOptions(), dec)
    assert dec.starts == [0, partial.files[0].decoded_bytes]
    assert dec.starts[1] > 0
    _same(grown, tfevents.decode_file(src, ReadOptions())[0])


def test_file_digests_come_with_the_read_and_the_cache(tmp_path: Path):
    """``ReadOptions(digest=True)``: the SHA-256 of exactly the bytes read, from a fresh decode,
    from the cache (the file is not read again) and after a grown tail; off by default."""
    import hashlib

    full = _biggest_event_file().read_bytes()
    src = tmp_path / "events.out.tfevents.1.host"
    src.write_bytes(full[: len(full) // 2])
    opts = ReadOptions(digest=True)
    assert tfevents.decode_file(src, ReadOptions())[0].files[0].sha256 == ""
    store, dec = Store(tmp_path / "cache"), Counting()
    first = store.read_file(src, opts, dec)
    assert first.files[0].sha256 == hashlib.sha256(full[: len(full) // 2]).hexdigest()
    assert store.read_file(src, opts, dec).files[0].sha256 == first.files[0].sha256 and dec.starts == [0]
    with src.open("ab") as f:
        f.write(full[len(full) // 2 :])
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 1_000_000))
    grown = store.read_file(src, opts, dec)
    assert dec.starts[1] > 0  # only the tail was decoded, yet the digest covers the whole file
    assert (grown.files[0].sha256, grown.files[0].size) == (hashlib.sha256(full).hexdigest(), len(full))


@pytest.mark.parametrize("where", ["head", "before-end"])
def test_replaced_file_is_decoded_again(tmp_path: Path, where: str):
    full = _biggest_event_file().read_bytes()
    src = tmp_path / "events.out.tfevents.1.host"
    src.write_bytes(full[: len(full) // 2])
    store, dec = Store(tmp_path / "cache"), Counting()
    first = store.read_file(src, ReadOptions(), dec)
    other = bytearray(full)
    other[200 if where == "head" else first.files[0].decoded_bytes - 10] ^= 0xFF  # not an append
    src.write_bytes(bytes(other))
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 1_000_000))
    again = store.read_file(src, ReadOptions(), dec)
    assert dec.starts == [0, 0]
    _same(again, tfevents.decode_file(src, ReadOptions())[0])


@pytest.mark.parametrize("damage", ["garbage", "truncated", "tables", "empty"])
def test_corrupt_cache_entry_is_decoded_again(tmp_path: Path, damage: str):
    src = tmp_path / "events.out.tfevents.1.host"
    shutil.copy(_biggest_event_file(), src)
    store, dec = Store(tmp_path / "cache"), Counting()
    store.read_file(src, ReadOptions(), dec)
    entries = list((tmp_path / "cache").rglob("*.entry"))
    assert len(entries) == 1
    data = bytearray(entries[0].read_bytes())
    if damage == "garbage":
        data = bytearray(b"garbage")
    elif damage == "truncated":
        data = data[: len(data) * 2 // 3]
    elif damage == "tables":  # the header intact, the Arrow tables behind it overwritten
        start = len(data) - 2000
        data[start:] = b"\xff" * (len(data) - start)
    else:
        data = bytearray()
    entries[0].write_bytes(bytes(data))
    again = store.read_file(src, ReadOptions(), dec)
    assert dec.starts == [0, 0]
    _same(again, tfevents.decode_file(src, ReadOptions())[0])


def test_blobs_are_shared_through_the_machine_cache(tmp_path: Path, monkeypatch):
    """A build with a fresh --cache folder reuses the Vega bundle made by an earlier build."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    calls = []

    def make() -> bytes:
        calls.append(1)
        return b"bundle"

    assert Store(tmp_path / "c1").blob("b.js", make) == b"bundle"
    assert Store(tmp_path / "c2").blob("b.js", make) == b"bundle"
    assert calls == [1]
    for kept in (tmp_path / "c2" / "blobs" / "b.js.sealed", tmp_path / "home" / "sitegen" / "blobs" / "b.js.sealed"):
        assert kept.read_bytes()[: len(b"bundle")] == b"bundle"
    # a damaged blob is made again, never served
    for kept in (tmp_path / "c2" / "blobs" / "b.js.sealed", tmp_path / "home" / "sitegen" / "blobs" / "b.js.sealed"):
        kept.write_bytes(b"bundlX" + kept.read_bytes()[6:])
    assert Store(tmp_path / "c2").blob("b.js", make) == b"bundle" and calls == [1, 1]
    assert Store(tmp_path / "c2").blob("b.js", make) == b"bundle" and calls == [1, 1]  # and kept again
    calls.pop()
    assert Store(None).blob("b.js", make) == b"bundle" and calls == [1, 1]  # caching off: made again


@pytest.mark.parametrize("case", ["float32", "float64", "wide-steps", "nan-payloads", "many-tags"])
def test_cached_scalars_round_trip_bit_for_bit(tmp_path, case):
    """The cache keeps scalars narrow (tag codes, int32 steps, float32 values) only where that
    loses nothing: whatever the values, a cached read equals the table that was decoded."""
    import pyarrow as pa

    from sitegen.cache.entries import _narrow, _widen
    from sitegen.errors import Problem
    from sitegen.model import RUN_SCALARS_SCHEMA, Artifact, SourceFile

    rng = np.random.default_rng(7)
    n = 3000
    tags = [f"t{i % (40_000 if case == 'many-tags' else 7)}/ü" for i in range(n)]
    step = np.arange(n, dtype=np.int64) * (2**33 if case == "wide-steps" else 1) - 5
    value = rng.standard_normal(n).astype(np.float32).astype(np.float64)
    if case == "float64":
        value[5] = 0.1
    if case == "nan-payloads":
        value.view(np.uint64)[3] = 0x7FF8000000000001  # a float64 NaN whose payload float32 drops
        value[4] = np.nan
        value[6] = -np.inf
    wall = 1.7e9 + rng.random(n)
    table = pa.table({"tag": tags, "step": step, "wall_time": wall, "value": value}, schema=RUN_SCALARS_SCHEMA)
    back = _widen(_narrow(table))
    assert back.schema.equals(RUN_SCALARS_SCHEMA)
    assert back.column("tag").to_pylist() == tags
    assert back.column("step").to_pylist() == step.tolist()
    for col, want in (("wall_time", wall), ("value", value)):
        assert np.array_equal(back.column(col).to_numpy().view(np.uint64), want.view(np.uint64))
    # and through an entry on disk
    log = tmp_path / "events.out.tfevents.1.x"
    log.write_bytes(b"")
    artifacts, problems = [Artifact("model.pt", 12, "ab" * 32)], [Problem(str(log), 7, "bad-record", "cut")]
    run = RunData(name="", format="tfevents", scalars=table, files=[SourceFile(log, 0, 0)], artifacts=artifacts, problems=problems)
    store = Store(tmp_path / "cache")
    store._save(store._entry_path(log), {"k": 1}, {"end": 0}, run, log, log.stat())
    from sitegen.cache import entries

    header, body = entries.read_header(store._entry_path(log))
    got = entries.load(store._entry_path(log), header, body)
    assert got is not None and got.scalars.column("tag").to_pylist() == tags
    assert (got.artifacts, got.problems) == (artifacts, problems)
    assert np.array_equal(got.scalars.column("value").to_numpy().view(np.uint64), value.view(np.uint64))


@pytest.mark.parametrize("wide", [False, True])
def test_summary_points_come_back_exactly(tmp_path, wide):
    """Summaries keep their points in the narrowest exact types; what comes back equals what went in."""
    rng = np.random.default_rng(11)
    n = 5000
    cols = {
        "line": np.repeat(np.arange(10), n // 10).astype(np.int32),
        "step": np.arange(n, dtype=np.int64) * (2**35 if wide else 3),
        "wall_time": 1.7e9 + rng.random(n),
        "value": rng.standard_normal(n) if wide else rng.standard_normal(n).astype(np.float32).astype(np.float64),
        "levels": rng.integers(0, 32, n).astype(np.uint8),
    }
    cols["value"][7] = np.nan
    store = Store(tmp_path)
    assert store.put_summary("ab" * 32, {"doc": ["ü", 1]}, cols)
    assert json.loads(store.get_summary_text("ab" * 32)) == {"doc": ["ü", 1]}
    got = store.get_points("ab" * 32)
    for name, want in cols.items():
        assert np.array_equal(got[name].astype(want.dtype).view(f"u{want.itemsize}"), want.view(f"u{want.itemsize}")), name
    assert (got["step"].dtype.itemsize == 8) == wide and (got["value"].dtype.itemsize == 8) == wide


def test_summary_points_of_one_level_are_those_of_all_points_at_that_level(tmp_path):
    """Points are kept coarsest first so that a page of many runs reads only the few it draws:
    what one level reads equals all points filtered to that level, in their original order."""
    rng = np.random.default_rng(5)
    n = 4000
    line = np.sort(rng.integers(0, 13, n)).astype(np.int32)
    cols = {
        "line": line,
        "step": np.arange(n, dtype=np.int64),
        "wall_time": rng.random(n),
        "value": rng.standard_normal(n),
        "levels": rng.integers(0, 256, n).astype(np.uint8),
    }
    store = Store(tmp_path)
    assert store.put_summary("cd" * 32, {}, cols)
    every = store.get_points("cd" * 32)
    assert np.array_equal(every["per_line"], np.bincount(line))
    for level in range(8):
        got = store.get_points("cd" * 32, level)
        keep = (cols["levels"] & (1 << level)) != 0
        for name, want in cols.items():
            assert np.array_equal(got[name].astype(want.dtype), want[keep]), (level, name)
        assert np.array_equal(got["per_line"], every["per_line"])


def test_tag_groups_from_reader_codes_equal_hashed_ones():
    """A reader's tag codes (unused tags included) and merged parts give the grouping that
    hashing the tag strings gives."""
    import pyarrow as pa

    from sitegen import model
    from sitegen.model import RUN_SCALARS_SCHEMA, merge_parts, remember_tag_groups, tag_groups

    def table(tags):
        n = len(tags)
        return pa.table({"tag": tags, "step": np.arange(n), "wall_time": np.zeros(n), "value": np.zeros(n)}, schema=RUN_SCALARS_SCHEMA)

    def hashed(t):
        model._groups.pop(id(t), None)
        return tag_groups(t)

    names = ["b", "zz", "a", "unused"]
    codes = np.array([0, 1, 0, 2, 1, 1, 0], np.int32)
    a = table([names[c] for c in codes])
    remember_tag_groups(a, names, codes)
    b = table(["zz", "c", "a"])
    tag_groups(b)
    merged = merge_parts("", "x", [RunData(name="", format="x", scalars=a), RunData(name="", format="x", scalars=b)]).scalars
    for t in (a, merged):
        got = tag_groups(t)
        want = hashed(t)
        assert got.tags == want.tags and got.in_place == want.in_place
        for field in ("rank", "order", "bounds"):
            assert np.array_equal(getattr(got, field), getattr(want, field)), field


def test_held_runs_share_their_empty_item_lists_and_cross_processes(tmp_path):
    """A run the build holds after its summary is kept (from a fresh read or from the summary)
    keeps name, format and meta, and no empty list of its own per kind of item: a build of
    100,000 runs holds one each. Pickled to a worker and back, it is the same run."""
    import pickle

    from sitegen.cache import summary
    from sitegen.config import Config
    from sitegen.ingest.scan import scan
    from sitegen.pages.assets import assets
    from sitegen.pipeline.jobs import RunJob, draw_run

    src = next(s for s in scan(EXAMPLE) if s.format == "tfevents")
    urls = assets("en", Store(None).blob).urls
    fresh = draw_run(RunJob([src], ReadOptions(), Config(), None, urls, frozenset(), [])).run
    doc, _ = summary.to_doc(fresh, {}, [], [], [])
    again = summary.from_doc(doc)[0]
    for run in (summary.held(fresh), again):
        assert (run.data.name, run.data.format, run.data.meta) == (fresh.data.name, fresh.data.format, fresh.data.meta)
        assert run.data.files is run.data.problems is run.data.artifacts is run.data.images
        assert not run.data.files
        back = pickle.loads(pickle.dumps(run))
        assert (back.name, back.data.meta, [ln.series.stats for ln in back.lines]) == (
            run.name,
            run.data.meta,
            [ln.series.stats for ln in run.lines],
        )
        assert back.data.files is back.data.problems
