"""manifest.json: deterministic builds, and ``sitegen verify`` catching every kind of change."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from sitegen import __version__
from sitegen.publish import manifest
from sitegen.publish import staging as publish
from tests.support import EXAMPLE
from tests.support.cli import run_sitegen


def _tree(root: Path) -> dict[str, bytes]:
    root = root.resolve()
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


TRACKERS = ("hf", "lightning", "keras", "dvclive", "neptune")
TRACKER_READ = re.compile(
    r"^(hf/bert-tiny/(trainer_state|config)\.json|lightning/.*/(metrics\.csv|hparams\.yaml)|keras/.*\.log"
    r"|dvclive/regression/(dvc\.lock|dvclive/(metrics\.json|params\.yaml|plots/metrics/.*\.tsv))"
    r"|neptune/.*/(data-\d+\.log|metadata\.json))$"
)


def test_same_source_date_epoch_gives_byte_identical_sites(tmp_path, cache_dir):
    env = {"SOURCE_DATE_EPOCH": "1718000000"}
    for name in ("a", "b"):
        # a fresh cache for the second build: identical output must not depend on cache state
        cache = cache_dir if name == "a" else tmp_path / "cache-b"
        r = run_sitegen("build", EXAMPLE, "--out", tmp_path / name / "site", "--cache", cache, "--quiet", env=env)
        assert r.returncode == 0, r.stderr
    a, b = _tree(tmp_path / "a" / "site"), _tree(tmp_path / "b" / "site")
    assert (tmp_path / "a" / "site" / "manifest.json").read_bytes() == (tmp_path / "b" / "site" / "manifest.json").read_bytes()
    assert sorted(a) == sorted(b)
    differ = [rel for rel in a if a[rel] != b[rel]]
    assert differ == [], f"files differ between two builds of the same archive: {differ}"
    # the build folders get the same content-hash name too
    assert os.readlink(tmp_path / "a" / "site").split("-")[-1] == os.readlink(tmp_path / "b" / "site").split("-")[-1]

    doc = json.loads(a["manifest.json"])
    assert doc["version"] == __version__ and doc["source_date_epoch"] == 1718000000
    assert doc["built"] == "2024-06-10T06:13:20Z"
    assert set(doc["files"]) == set(a) - {"manifest.json", "manifest.json.gz"}
    for rel, entry in doc["files"].items():
        assert entry["size"] == len(a[rel])
    files = {p.relative_to(EXAMPLE).as_posix() for p in EXAMPLE.rglob("*") if p.is_file()}
    # every file a page was made from; MLflow artifacts are listed on their run's page with their
    # own SHA-256, and an experiment without runs is read by no run
    read = {f for f in files if "/artifacts/" not in f and not f.endswith("mlruns/0/meta.yaml") and f.split("/")[0] not in TRACKERS}
    # the tracker folders hold more than their logs (older checkpoints, a repository's code and
    # data): what their readers read
    read |= {f for f in files if f.split("/")[0] in TRACKERS and TRACKER_READ.search(f)}
    assert read <= set(doc["sources"]) <= files
    for rel, entry in doc["sources"].items():
        size = (EXAMPLE / rel).stat().st_size
        assert entry["size"] == size and entry["decoded"] == [0, size]
    # canonical bytes: sorted keys, ASCII, one line per file (paths with quotes and braces too)
    assert a["manifest.json"] == manifest.dump(doc)
    lines = a["manifest.json"].decode("ascii").splitlines()
    assert all(line.count('"sha256":') <= 1 for line in lines) and len(lines) >= len(doc["files"]) + len(doc["sources"])
    odd = {"files": {'a},"b/{"x":1},"': {"sha256": "0", "size": 1}, "c},": {"size": 2}}, "note": 'q"},"\u2028', "z},": {}}
    assert json.loads(manifest.dump(odd)) == odd


def test_no_timestamp_without_source_date_epoch(built_site):
    text = (built_site / "manifest.json").read_text()
    doc = json.loads(text)
    assert "built" not in doc and "source_date_epoch" not in doc


def test_verify_detects_changes(tmp_path, built_site, cache_dir):
    archive = tmp_path / "archive"
    shutil.copytree(EXAMPLE, archive)
    out = tmp_path / "site"
    r = run_sitegen("build", archive, "--out", out, "--cache", cache_dir, "--quiet")
    assert r.returncode == 0, r.stderr
    ok = run_sitegen("verify", out, "--archive", archive)
    assert ok.returncode == 0 and ok.stdout == "", ok.stdout + ok.stderr

    live = out.resolve()
    page = next(live.glob("runs/*/index.html"))
    page.write_bytes(page.read_bytes().replace(b"</h1>", b"!</h1>", 1))
    asset = next(live.glob("assets/site-*.css"))
    asset.unlink()
    log = sorted(archive.rglob("events.out.tfevents.*"))[0]
    with open(log, "ab") as f:
        f.write(b"\0garbage")
    (live / "extra.html").write_text("x")

    r = run_sitegen("verify", out)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    rel = lambda p: p.relative_to(live).as_posix()  # noqa: E731
    assert f"modified: {rel(page)} (size {page.stat().st_size}, manifest says {page.stat().st_size - 1})" in lines
    assert f"missing: {rel(asset)}" in lines
    assert "unexpected: extra.html" in lines
    assert len(lines) == 3, lines  # one line per bad file; the archive is not checked without --archive

    r = run_sitegen("verify", out, "--archive", archive)
    assert r.returncode == 1
    src = log.relative_to(archive).as_posix()
    assert any(line.startswith(f"source modified: {src} ") for line in r.stdout.splitlines()), r.stdout
    assert len(r.stdout.splitlines()) == 4

    # same size, different bytes: caught by the hash
    page.write_bytes(page.read_bytes().replace(b"!</h1>", b"</h1>", 1)[:-1] + b"X")
    assert f"modified: {rel(page)} (sha256 differs)" in manifest.verify(out)


def test_verify_without_manifest_is_a_usage_error(tmp_path):
    (tmp_path / "index.html").write_text("x")
    r = run_sitegen("verify", tmp_path)
    assert r.returncode == 2 and "manifest.json" in r.stderr


@pytest.mark.parametrize("piece_bytes", [1, 50, 1 << 20])
def test_the_manifest_written_entry_by_entry_is_the_one_json_object_dump_writes(monkeypatch, piece_bytes):
    """``entry_pieces`` writes the files and sources one by one, in pieces of about
    ``PIECE_BYTES``; the bytes must be what ``dump`` makes of the whole document, for any name
    (quotes, ``},"``, a name ending in ``},``, non-ASCII, controls), and that must be the document."""
    import random

    monkeypatch.setattr(manifest, "PIECE_BYTES", piece_bytes)

    rng = random.Random(7)
    alphabet = ["a", "/", '"', "}", ",", "\\", "\n", "\x00", "é", "日", "\U0001f600", "\ud800", " ", "{", "]"]

    def name() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))

    for round_ in range(40):
        files = {name(): (rng.choice(["", "ab" * 32]), rng.randrange(0, 10**12)) for _ in range(rng.randrange(0, 30))}
        sources = {name(): ("cd" * 32, rng.randrange(0, 10**9), rng.randrange(0, 10**9)) for _ in range(rng.randrange(0, 10))}
        head: dict = {"format": 1, "generator": "sitegen", "version": "0.1.0"}
        if round_ % 2:
            head |= {"runs": {name(): name() for _ in range(5)}, "site": name(), "source_date_epoch": 1, "built": "1970-01-01T00:00:01Z"}
        if round_ % 3 == 0:
            files[manifest.MANIFEST] = ("ef" * 32, 1)  # (the manifest does not list itself)
        doc = {
            **head,
            "files": {rel: {"sha256": d, "size": n} for rel, (d, n) in files.items() if rel != manifest.MANIFEST},
            "sources": {rel: {"sha256": d, "size": n, "decoded": [0, k]} for rel, (d, n, k) in sources.items()},
        }
        assert b"".join(manifest.entry_pieces(head, files, sources)) == manifest.dump(doc)
        assert json.loads(manifest.dump(doc)) == doc


def test_a_file_written_in_pieces_is_the_file_written_whole(tmp_path):
    """The manifest goes to disk piece by piece (never held whole): the same file and digest as
    writing it whole, and a ``.gz`` twin of the same bytes, made without holding either."""
    import gzip
    import hashlib
    import tracemalloc

    def pieces():  # 24 MB, a megabyte at a time
        for i in range(24):
            yield hashlib.sha256(str(i).encode()).hexdigest().encode() * (1 << 14)

    for folder in "abc":
        (tmp_path / folder).mkdir()
    whole, streamed = publish.Writer(tmp_path / "a", None, {}), publish.Writer(tmp_path / "b", None, {})
    whole.write("manifest.json", b"".join(pieces()))
    tracemalloc.start()
    try:
        streamed.write_pieces("manifest.json", pieces())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 << 20, peak
    a, b = tmp_path / "a" / "manifest.json", tmp_path / "b" / "manifest.json"
    assert a.read_bytes() == b.read_bytes() and whole.hashes["manifest.json"] == streamed.hashes["manifest.json"]
    gz = (tmp_path / "b" / "manifest.json.gz").read_bytes()
    assert gzip.decompress(gz) == b.read_bytes()
    assert streamed.hashes["manifest.json.gz"] == (hashlib.sha256(gz).hexdigest(), len(gz))
    assert os.stat(b.with_suffix(".json.gz")).st_mtime_ns == os.stat(b).st_mtime_ns
    small = publish.Writer(tmp_path / "c", None, {})
    small.write_pieces("manifest.json", [b"{", b"}"])  # (too small for a twin)
    assert sorted(small.hashes) == ["manifest.json"] and not (tmp_path / "c" / "manifest.json.gz").exists()
