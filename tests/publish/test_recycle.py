"""A rebuild recycles the build it pushes out of ``keep``: it starts from that folder, keeps the
files whose content it wants again, replaces the others and removes the rest. Whatever happened
between, the result equals a clean build byte for byte and holds exactly its manifest's files."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sitegen.config import Config
from sitegen.model import slug as slugify
from sitegen.pipeline.build import BuildOptions, build
from sitegen.pipeline.executors import Serial
from sitegen.publish import manifest
from sitegen.publish import staging as publish
from tests.support.eventgen import write_run
from tests.support.sites import assert_same_site, inodes

TAGS = ["train/loss", "val/acc"]


def _run(archive: Path, i: int, steps: int = 200) -> None:
    folder = archive / "proj" / "model" / f"run{i}"
    shutil.rmtree(folder, ignore_errors=True)
    write_run(folder, tags=TAGS, steps=steps, seed=i, start=1.7e9 + i)


def _build(archive: Path, out: Path, cache: Path | None, **kw):
    return build(archive, out, BuildOptions(config=Config(), cache=cache, use_cache=cache is not None, executor=Serial(), **kw))


def _same_as_clean(archive: Path, out: Path, tmp_path: Path, name: str, **kw) -> None:
    clean = tmp_path / "clean" / name
    _build(archive, clean, None, **kw)
    assert_same_site(out, clean, news=False)
    assert manifest.verify(out) == []


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for i in range(3):
        _run(root, i)
    return root


def test_recycled_builds_equal_clean_builds(archive: Path, tmp_path: Path):
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(archive, out, cache, keep=2)
    steps = [
        ("grown", lambda: _run(archive, 2, steps=300)),
        ("removed", lambda: shutil.rmtree(archive / "proj" / "model" / "run1")),
        ("added", lambda: _run(archive, 5)),
        ("back", lambda: _run(archive, 2)),
        ("readded", lambda: _run(archive, 1)),
    ]
    names = set()
    for name, change in steps:
        change()
        before = publish.list_builds(out)
        oldest = before[0].stat().st_ino
        _build(archive, out, cache, keep=2)
        builds = publish.list_builds(out)
        assert len(builds) == 2 and out.resolve() == builds[-1] and builds[0] == before[-1]
        names.add(builds[-1].name)
        if len(before) == 2:  # the older of the two became the new build's folder
            assert builds[-1].stat().st_ino == oldest
        _same_as_clean(archive, out, tmp_path, name)
    assert len(names) == len(steps)
    assert not list(publish.builds_dir(out).glob(".staging-*"))


def test_recycling_keeps_unchanged_files_and_links_the_rest(archive: Path, tmp_path: Path):
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(archive, out, cache, keep=2)
    _run(archive, 2, steps=250)
    _build(archive, out, cache, keep=2)  # (two builds now: the next one recycles the first)
    live = inodes(out)
    _run(archive, 2, steps=300)
    _build(archive, out, cache, keep=2)
    after = inodes(out)
    for i in (0, 1):  # untouched runs: the very same files as the live build's
        for rel, ino in after.items():
            if rel.startswith(f"runs/{slugify(f'proj/model/run{i}')}/"):
                assert live[rel] == ino, rel
    changed = {rel for rel, ino in after.items() if live.get(rel) != ino and rel.startswith("runs/")}
    assert changed and all(rel.split("/")[1] == slugify("proj/model/run2") for rel in changed)


def test_a_damaged_old_build_is_mended_when_recycled(archive: Path, tmp_path: Path):
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(archive, out, cache, keep=2)
    old = out.resolve()
    _build(archive, out, cache, keep=2, source_date_epoch=1_700_000_000)
    assert out.resolve() != old
    # the build the next one recycles: a truncated file, a lost file, a stray file and folder,
    # and a symlink where a page was (it must never be kept: it could point anywhere)
    page = next(old.glob("runs/*/index.html"))
    data = next(old.glob("runs/*/scalars.js"))
    os.truncate(data, 10)
    lost = next(old.glob("compare/*/index.html"))
    lost.unlink()
    (old / "stray.txt").write_text("not in the manifest")
    (old / "runs" / "extra" / "deep").mkdir(parents=True)
    (old / "runs" / "extra" / "deep" / "x.html").write_text("<p>x</p>")
    secret = tmp_path / "secret.txt"
    secret.write_bytes(page.read_bytes())  # same size and content as the page
    page.unlink()
    page.symlink_to(secret)
    _build(archive, out, cache, keep=2, source_date_epoch=1_600_000_000)
    assert out.resolve().name.split("-")[0] > old.name.split("-")[0]
    _same_as_clean(archive, out, tmp_path, "mended", source_date_epoch=1_600_000_000)
    assert not any(p.is_symlink() for p in out.resolve().rglob("*"))


def test_keep_one_never_recycles_the_live_build(archive: Path, tmp_path: Path):
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(archive, out, cache, keep=1)
    live = out.resolve()
    pages = sorted(p.name for p in live.rglob("*"))
    _run(archive, 2, steps=300)
    _build(archive, out, cache, keep=1)
    assert publish.list_builds(out) == [out.resolve()] and out.resolve() != live
    _same_as_clean(archive, out, tmp_path, "keep1")
    assert pages


def test_a_recycled_build_lists_only_the_folders_that_changed(archive: Path, tmp_path: Path, monkeypatch):
    """Leftovers are looked for only in folders whose mtime moved since the recycled build's
    manifest was written (and in its top folder): an unchanged run's folder is not listed."""
    for i in range(3, 12):
        _run(archive, i)
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(archive, out, cache, keep=2)
    _run(archive, 2, steps=250)
    _build(archive, out, cache, keep=2)
    builds = str(publish.builds_dir(out).resolve())
    listed: list[str] = []
    scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p=".": listed.append(p if isinstance(p, int) else os.fspath(p)) or scandir(p))
    _run(archive, 2, steps=300)  # (the next build recycles the first)
    _build(archive, out, cache, keep=2)
    monkeypatch.undo()
    site = out.resolve()
    mine = [p for p in listed if isinstance(p, str) and os.path.realpath(p).startswith(builds)]
    run_folders = {str(p) for p in (site / "runs").iterdir()}
    assert len(run_folders) == 12
    listed_runs = {os.path.join(str(site), p.split("/.staging-", 1)[1].split("/", 1)[1]) for p in mine if "/runs/" in p}
    assert listed_runs <= {str(site / "runs" / slugify("proj/model/run2"))}, listed_runs
    _same_as_clean(archive, out, tmp_path, "listed")
