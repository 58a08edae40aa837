"""Hostile names and shapes of an archive: names that are not UTF-8, names that differ only in
case, Unicode normalisation or punctuation, a folder tree 300 levels deep. Each builds, with one
page per run and no two site paths that a case-insensitive copy of the site would merge."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import unicodedata
from pathlib import Path

from sitegen.model import slug
from tests.support.cli import run_sitegen
from tests.support.eventgen import write_run
from tests.support.sites import build_site, index_text, site_files


def _run_pages(out: Path) -> list[str]:
    return sorted(rel.split("/")[1] for rel in site_files(out) if rel.startswith("runs/") and rel.endswith("/index.html"))


def _no_merged_paths(out: Path) -> None:
    """No two files of the site become one on a case-insensitive or normalising file system."""
    rels = list(site_files(out))
    folded = {unicodedata.normalize("NFC", r).casefold() for r in rels}
    assert len(folded) == len(rels)


def test_names_that_are_not_utf8(tmp_path: Path):
    archive = tmp_path / "archive"
    write_run(archive / "plain", tags=["loss"], steps=10, seed=1, start=1.7e9)
    raw = [b"run-\xff\xfe", b"caf\xe9-latin1", b"run-\\xff\\xfe"]  # (the last spells the first's bytes out)
    for i, name in enumerate(raw):
        log = write_run(archive / os.fsdecode(name), tags=[f"t{i}"], steps=10, seed=2 + i, start=1.7e9)
        os.rename(log, log.with_name(os.fsdecode(b"events.out.tfevents.1.h\xf6st")))
        (log.parent / os.fsdecode(b"art\xeffact-\x80.txt")).write_text("x")
    out = tmp_path / "site"
    got = run_sitegen("build", archive, "--out", out, "--cache", tmp_path / "cache")  # the command line: no traceback
    assert got.returncode == 0 and "Traceback" not in got.stderr, got.stderr
    assert len(_run_pages(out)) == 4  # every run its own page: the bytes spelled out and the bytes differ
    index = index_text(out)  # (the head and its shards)
    assert "run-\\\\xff\\\\xfe" in index and "caf\\\\xe9-latin1" in index  # (JSON: the backslash escaped)
    page = next(p for p in (out / "runs").iterdir() if p.name.startswith("caf")) / "index.html"
    text = page.read_text("utf-8")
    assert "art\\xeffact-\\x80.txt" in text and "events.out.tfevents.1.h\\xf6st" in text
    # the spelled-out name shows like the raw one: its page is another folder, and a problem says so
    report = json.loads((out / "build-report.json").read_text("utf-8"))
    clashes = [p for p in report["items"] if p["kind"] == "name-clash"]
    assert len(clashes) == 1 and clashes[0]["path"].endswith("run-\\xff\\xfe"), clashes
    _no_merged_paths(out)
    # a rebuild from the cache is the same site
    again = run_sitegen("build", archive, "--out", tmp_path / "site2", "--cache", tmp_path / "cache")
    assert again.returncode == 0, again.stderr
    assert site_files(out).keys() == site_files(tmp_path / "site2").keys()


def test_names_alike_but_for_case_normalisation_or_punctuation(tmp_path: Path):
    archive = tmp_path / "archive"
    cafe = "caf\u00e9"
    names = ["Run", "run", "RUN", "rUn", unicodedata.normalize("NFC", cafe), unicodedata.normalize("NFD", cafe), "CAFÉ",
             "ﬁle", "file", "ｆｉｌｅ"]
    # two names whose readable slug part and whose 40-bit hash are the same: a real clash
    clash = ["run,__=,=a", "run_ =,  .a"]
    assert slug(clash[0]) == slug(clash[1])
    names += clash
    assert len({os.fsencode(n) for n in names}) == len(names)
    for i, name in enumerate(names):
        write_run(archive / name, tags=["loss"], steps=5, seed=i, start=1.7e9)
    out = tmp_path / "site"
    result = build_site(archive, out)
    assert result.runs == len(names)
    assert len(_run_pages(out)) == len(names)
    _no_merged_paths(out)
    clashes = [p for p in result.problems if p.kind == "name-clash"]
    assert len(clashes) == 1 and repr(clash[1]) in clashes[0].message
    # each run's page holds its own curve: the clashing pair was not drawn onto one page
    titles = set()
    for rel, data in site_files(out).items():
        if rel.startswith("runs/") and rel.endswith("/index.html"):
            page = data.decode()
            titles.update(n for n in names if f"<title>{n} " in page or f"<h1>{n}</h1>" in page)
    index = index_text(out)
    for name in clash:
        assert json.dumps(name)[1:-1] in index


def test_a_tree_300_levels_deep(tmp_path: Path):
    archive = tmp_path / "archive"
    deep = archive
    for _ in range(300):
        deep = deep / "d"
    write_run(deep, tags=["loss"], steps=5, seed=1, start=1.7e9)
    write_run(archive / "top", tags=["loss"], steps=5, seed=2, start=1.7e9)
    out = tmp_path / "site"
    result = build_site(archive, out)
    assert result.runs == 2 and result.problems == []
    assert slug("/".join(["d"] * 300)) in _run_pages(out)
    _no_merged_paths(out)
    digest = hashlib.sha256(b"x").hexdigest()  # (the site's own paths stay short: slugs, not names)
    assert max(len(rel) for rel in site_files(out)) < 120 + len(digest)
