"""Nightly rebuilds: an unchanged archive keeps the live build; a grown log redraws only its run
(and the pages that list it), the other runs' files are hard links to the live build's.

All by counts: files decoded and the byte each was decoded from, runs and pages drawn, files
written anew (a new inode) and their bytes; never by timing."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sitegen.config import Config
from sitegen.model import slug as slugify
from sitegen.pipeline.build import INDEX_SHARDS, BuildOptions, build
from sitegen.pipeline.executors import Serial
from sitegen.publish import manifest
from sitegen.publish import staging as publish
from tests.support import corpus, page_payload
from tests.support.corpus import write_tbx
from tests.support.eventgen import write_run
from tests.support.sites import assert_same_site, index_head, index_shard, inodes, without_news


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    for i in range(3):
        write_run(root / "proj" / "model" / f"run{i}", tags=["train/loss", "val/acc"], steps=300, seed=i, start=1.7e9 + i)
    return root


def test_unchanged_archive_keeps_the_live_build(archive: Path, tmp_path: Path):
    out, cache = tmp_path / "site", tmp_path / "cache"
    first = build(archive, out, BuildOptions(config=Config(), cache=cache))
    live = out.resolve()
    again = build(archive, out, BuildOptions(config=Config(), cache=cache))
    assert out.resolve() == live and len(publish.list_builds(out)) == 1  # nothing new was written
    assert (again.runs, again.files, again.problems) == (first.runs, first.files, []) and first.runs == 3
    assert manifest.verify(out) == []
    # another date is another input: a new build, whose run pages are links to the live ones
    build(archive, out, BuildOptions(config=Config(), cache=cache, source_date_epoch=1_700_000_000))
    assert out.resolve() != live and len(publish.list_builds(out)) == 2
    # a damaged live build is never kept: a missing file makes the next build write a new one
    live = out.resolve()
    next(live.glob("runs/*/scalars.js")).unlink()
    build(archive, out, BuildOptions(config=Config(), cache=cache, source_date_epoch=1_700_000_000))
    assert out.resolve() != live and manifest.verify(out) == []


def test_unchanged_rebuild_still_reports_the_problems(archive: Path, tmp_path: Path):
    log = next((archive / "proj" / "model" / "run1").glob("*tfevents*"))
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    out, cache = tmp_path / "site", tmp_path / "cache"
    first = build(archive, out, BuildOptions(config=Config(), cache=cache))
    live = out.resolve()
    again = build(archive, out, BuildOptions(config=Config(), cache=cache))
    assert out.resolve() == live
    assert first.problems and again.problems == first.problems


def test_grown_log_redraws_only_its_run(archive: Path, tmp_path: Path):
    out, cache = tmp_path / "site", tmp_path / "cache"
    build(archive, out, BuildOptions(config=Config(), cache=cache))
    before = inodes(out)
    grown = archive / "proj" / "model" / "run2"
    shutil.rmtree(grown)
    write_run(grown, tags=["train/loss", "val/acc"], steps=400, seed=2, start=1.7e9 + 2)
    build(archive, out, BuildOptions(config=Config(), cache=cache))
    after = inodes(out)
    changed = {rel for rel, ino in after.items() if before.get(rel) != ino}
    run_of = {slugify(f"proj/model/run{i}"): i for i in range(3)}
    redrawn = {run_of[rel.split("/")[1]] for rel in changed if rel.startswith("runs/")}
    assert redrawn == {2}, sorted(changed)
    for i in (0, 1):  # untouched runs: the very same files (hard links), not copies
        page = f"runs/{slugify(f'proj/model/run{i}')}/index.html"
        assert after[page] == before[page]
    assert "index.html" in changed and "compare/all/index.html" in changed
    assert manifest.verify(out) == []


def test_files_a_power_cut_emptied_are_not_linked_into_the_next_build(archive: Path, tmp_path: Path, monkeypatch):
    """Builds are not synced to storage unless asked (``durable``): after a power cut, a live
    build's newest files may be there but empty. The next build links only files whose size
    matches the live manifest, and draws the runs of the others again."""
    out, cache = tmp_path / "site", tmp_path / "cache"
    synced: list[int] = []
    monkeypatch.setattr(publish.os, "sync", lambda: synced.append(1))
    build(archive, out, BuildOptions(config=Config(), cache=cache))
    assert synced == []  # not asked
    live = out.resolve()
    damaged = live / "runs" / slugify("proj/model/run1") / "index.html"
    whole = damaged.read_bytes()
    os.truncate(damaged, 0)
    (live / "runs" / slugify("proj/model/run0") / "scalars.js").write_bytes(b"")  # (another inode)
    before = inodes(out)
    build(archive, out, BuildOptions(config=Config(), cache=cache, durable=True))
    assert out.resolve() != live and synced  # durable: synced before it went live
    assert manifest.verify(out) == []
    assert (out / "runs" / slugify("proj/model/run1") / "index.html").read_bytes() == whole
    after = inodes(out)
    page2 = f"runs/{slugify('proj/model/run2')}/index.html"
    assert after[page2] == before[page2]  # the undamaged run: linked as before


def test_points_from_the_store_draw_the_same_comparisons(archive: Path, tmp_path: Path):
    """With a cache, the comparison pages take the lines' points from the store one run at a time
    (memory does not grow with the archive); without one, from memory: the sites are identical."""
    def files(site: Path) -> dict[str, bytes]:  # (a rebuild finds no new run: what's new differs)
        return without_news({p.relative_to(site.resolve()).as_posix(): p.read_bytes() for p in site.resolve().rglob("*")
                             if p.is_file() and not p.name.startswith("manifest")})

    # (a build date long before the runs: the index marks none as running on either date)
    build(archive, tmp_path / "a", BuildOptions(config=Config(), cache=tmp_path / "cache", source_date_epoch=2))
    first = files(tmp_path / "a")
    build(archive, tmp_path / "b", BuildOptions(config=Config(), use_cache=False, source_date_epoch=2))
    assert files(tmp_path / "b") == first
    # a new date: every run reused from the live build (summaries without points), pages redrawn
    build(archive, tmp_path / "a", BuildOptions(config=Config(), cache=tmp_path / "cache", source_date_epoch=1))
    assert files(tmp_path / "a") == first
    curves = b"".join(data for rel, data in first.items() if rel.startswith("compare/all/p-") and rel.endswith(".js"))
    assert b'"ap"' in curves and b'"f4"' in curves  # (the page's curves are in its piece scripts)


def test_damaged_points_in_the_cache_read_their_run_again(archive: Path, tmp_path: Path, caplog):
    """A reused run's summary is read without its points (most rebuilds draw no page of it);
    when a comparison page then finds those points damaged, the run is read again, its summary
    mended, and the pages are those of a build from scratch."""
    from sitegen.cache.store import _SUMMARY_HEAD, Store

    def files(site: Path) -> dict[str, bytes]:
        return without_news({p.relative_to(site.resolve()).as_posix(): p.read_bytes() for p in site.resolve().rglob("*")
                             if p.is_file() and not p.name.startswith("manifest")})

    out, cache = tmp_path / "site", tmp_path / "cache"
    build(archive, out, BuildOptions(config=Config(), cache=cache, source_date_epoch=2, executor=Serial()))
    sums = sorted((cache / "runs").rglob("*.sum"))
    assert len(sums) == 3
    for victim in sums:
        data = bytearray(victim.read_bytes())
        data[_SUMMARY_HEAD + 1] ^= 0x40  # a point count: the points' checksum fails, the document's holds
        victim.write_bytes(bytes(data))
        assert Store(cache).get_summary_text(victim.stem) is not None  # (reading its points would drop it)
    # one run grows: the comparison pieces holding it are drawn again, from the others' points too
    grown = archive / "proj" / "model" / "run2"
    shutil.rmtree(grown)
    write_run(grown, tags=["train/loss", "val/acc"], steps=400, seed=2, start=1.7e9 + 2)
    again = build(archive, out, BuildOptions(config=Config(), cache=cache, source_date_epoch=2, executor=Serial()))
    assert again.runs == 3 and manifest.verify(out) == []
    assert sum("lost the points" in r.getMessage() for r in caplog.records) >= 2
    assert sum(Store(cache).get_points(v.stem) is not None for v in sums) == 2  # mended (the grown run's old one is not)
    build(archive, tmp_path / "fresh", BuildOptions(config=Config(), use_cache=False, source_date_epoch=2))
    assert files(out) == files(tmp_path / "fresh")


def test_relative_and_absolute_archive_paths_share_unchanged_pages(archive: Path, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(archive.parent)
    out, cache = tmp_path / "site", tmp_path / "cache"
    build(Path(archive.name), out, BuildOptions(config=Config(), cache=cache))
    before = inodes(out)
    build(archive.resolve(), out, BuildOptions(config=Config(), cache=cache))
    after = inodes(out)
    pages = [rel for rel in before if rel.startswith("runs/")]
    assert pages and all(after[rel] == before[rel] for rel in pages)  # the same files, linked


def test_a_summary_that_is_not_one_draws_its_run_again(archive: Path, tmp_path: Path):
    """A kept summary that parses but is not a summary (a damaged or foreign cache) is drawn
    again, never the end of the build; the site is the same as from a sound cache."""
    from sitegen.cache.store import Store

    out, cache = tmp_path / "site", tmp_path / "cache"
    build(archive, out, BuildOptions(config=Config(), cache=cache, source_date_epoch=2))  # (no run is running on either date)
    pages = without_news({p.relative_to(out.resolve()).as_posix(): p.read_bytes() for p in out.resolve().rglob("*.html")})
    store, sums = Store(cache), sorted((cache / "runs").rglob("*.sum"))
    assert len(sums) == 3
    for victim, bad in zip(sums, ({"run": []}, {"lines": [1]}, [])):
        doc, points = json.loads(store.get_summary_text(victim.stem)), store.get_points(victim.stem)
        doc.update(bad) if isinstance(bad, dict) else None
        store.put_summary(victim.stem, doc if isinstance(bad, dict) else {}, points)  # JSON, wrong shape
    again = build(archive, out, BuildOptions(config=Config(), cache=cache, source_date_epoch=1))  # reuses every run
    assert again.runs == 3 and manifest.verify(out) == []
    assert without_news({p.relative_to(out.resolve()).as_posix(): p.read_bytes() for p in out.resolve().rglob("*.html")}) == pages


def test_comparison_pages_redraw_only_the_pieces_of_changed_runs(tmp_path: Path, monkeypatch):
    """A comparison page's curves come in pieces of a few runs: a rebuild after one log grew
    draws only the pieces holding its run, takes the others as the last build kept them, and
    gives the very pages a build from scratch gives (also when the kept pieces are damaged)."""
    from sitegen.cache.store import Store
    from sitegen.pages import compare

    monkeypatch.setattr(compare, "PIECE_RUNS", 3)  # many pieces from a small archive
    monkeypatch.setattr(compare, "MIN_PIECE_RUNS", 1)
    root = tmp_path / "logs"
    for p in range(2):
        for i in range(8):
            write_run(root / f"proj{p}" / "model" / f"run{i}", tags=["loss", "acc"], steps=60, seed=10 * p + i, start=1.7e9 + i)
    drawn: list[list[str]] = []
    overlay = compare._overlay
    monkeypatch.setattr(compare, "_overlay", lambda group, labels, runs, *a: (
        drawn.append([group.runs[i].slug for i in runs]) or overlay(group, labels, runs, *a)))
    out, cache = tmp_path / "site", tmp_path / "cache"
    build(archive=root, out=out, options=BuildOptions(config=Config(), cache=cache, executor=Serial()))
    first = list(drawn)
    assert len(first) > 6  # several pieces per page
    grown = root / "proj1" / "model" / "run5"
    shutil.rmtree(grown)
    write_run(grown, tags=["loss", "acc"], steps=90, seed=15, start=1.7e9 + 5)
    drawn.clear()

    def piece_files(site: Path) -> dict[str, int]:
        return {p.relative_to(site.resolve()).as_posix(): p.stat().st_ino for p in site.resolve().glob("compare/*/p-*.js")}

    before = piece_files(out)
    build(archive=root, out=out, options=BuildOptions(config=Config(), cache=cache, executor=Serial()))
    slug = slugify("proj1/model/run5")
    assert drawn and all(slug in part for part in drawn), drawn  # only the pieces of the grown run
    assert len(drawn) == 3  # its piece on the whole-archive, project and model pages
    # every other piece's script is the live build's file, linked (not read, drawn or written)
    after = piece_files(out)
    assert len(set(after) - set(before)) == 3 and all(before[rel] == ino for rel, ino in after.items() if rel in before)

    def pages(site: Path) -> dict[str, bytes]:
        return {p.relative_to(site.resolve()).as_posix(): p.read_bytes() for p in site.resolve().glob("compare/*/*")}

    build(archive=root, out=tmp_path / "fresh", options=BuildOptions(config=Config(), use_cache=False, executor=Serial()))
    assert pages(out) == pages(tmp_path / "fresh")
    # damaged pieces (cut short, bytes changed, a head of the wrong shape, not a pieces file)
    # are drawn again, to the same pages
    shard_heads = Store(cache)._pieces_dir(INDEX_SHARDS)  # (the index's shards are kept there too)
    kept = sorted(p for p in (cache / "pages").rglob("*") if p.is_file() and str(p.parent) != shard_heads)
    assert kept and all(Store(cache).get_piece(p.parent.name, p.name) is None for p in kept)  # (folders: hashed slugs)
    assert any(Store(cache).get_piece("all", p.name) is not None for p in kept)
    # one file per piece: the pieces of the last build's pages only
    assert len(kept) == sum(len(page_payload(p)["tags"][0]["base"]) for p in out.resolve().glob("compare/*/index.html"))
    for k, victim in enumerate(kept):
        data = bytearray(victim.read_bytes())
        if k % 4 == 0:
            data = data[:-7]
        elif k % 4 == 1:
            data[-20] ^= 0x20
        elif k % 4 == 2:
            head = json.dumps({"x": [1]}).encode()
            data = data[:8] + len(head).to_bytes(8, "little") + (0).to_bytes(4, "little") + head
        else:
            data = b"{}"
        victim.write_bytes(bytes(data))
    build(archive=root, out=out, options=BuildOptions(config=Config(), cache=cache, source_date_epoch=1, executor=Serial()))
    assert pages(out) == pages(tmp_path / "fresh")


def test_unchanged_pages_are_linked_whole_or_drawn_again(tmp_path: Path, monkeypatch):
    """A comparison page whose runs did not change is linked from the live build with its piece
    scripts; when the live build lost one of them, the page is
    drawn again, to the page a build from scratch gives."""
    from sitegen.pages import compare

    monkeypatch.setattr(compare, "MIN_PIECE_RUNS", 1)  # a run a piece at full resolution

    root = tmp_path / "logs"
    for p in range(2):
        for i in range(4):
            write_run(root / f"proj{p}" / "model" / f"run{i}", tags=["loss"], steps=40, seed=10 * p + i, start=1.7e9 + i)
    out, cache = tmp_path / "site", tmp_path / "cache"
    build(root, out, BuildOptions(config=Config(), cache=cache, executor=Serial()))
    before = inodes(out)
    page = next(rel for rel in before if rel.startswith("compare/proj0-model") and rel.endswith("/index.html"))
    pieces = [rel for rel in before if rel.startswith(page.rsplit("/", 1)[0] + "/p-") and rel.endswith(".js")]
    assert len(pieces) == 4  # a run a piece at full resolution
    (out.resolve() / pieces[0]).unlink()  # lost by the live build (its manifest still lists it)
    grown = root / "proj1" / "model" / "run2"  # in another project: proj0's pages stay unchanged
    shutil.rmtree(grown)
    write_run(grown, tags=["loss"], steps=60, seed=12, start=1.7e9 + 2)
    build(root, out, BuildOptions(config=Config(), cache=cache, executor=Serial()))
    after = inodes(out)
    # the other unchanged page is the live build's, file for file
    other = next(rel for rel in before if rel.startswith("compare/proj0-") and "model" not in rel and rel.endswith("/index.html"))
    assert all(after[rel] == ino for rel, ino in before.items() if rel.startswith(other.rsplit("/", 1)[0] + "/"))
    assert pieces[0] in after  # drawn again
    build(root, tmp_path / "fresh", BuildOptions(config=Config(), use_cache=False, executor=Serial()))
    assert page_payload(out / page) == page_payload(tmp_path / "fresh" / page)




# --------------------------------------------------------------------------- counts of a rebuild

PROJECTS, MODELS, RUNS = 3, 2, 2  # 12 runs; comparison pages: all, 3 projects, 6 models
GROWN = ["proj0/model0/run0", "proj0/model1/run1", "proj1/model0/run0"]


@pytest.fixture()
def tbx_archive(tmp_path: Path) -> Path:
    """12 runs in 3 projects, each an event file written by tensorboardX."""
    root = tmp_path / "tbx"
    for p in range(PROJECTS):
        for m in range(MODELS):
            for r in range(RUNS):
                write_tbx(root / f"proj{p}" / f"model{m}" / f"run{r}", seed=p * 100 + m * 10 + r)
    return root


class Counts:
    """What a build does, counted where it happens: each log file decoded and the byte it was
    decoded from (the decode function the cache is handed), each run drawn, each comparison
    page drawn (by slug)."""

    def __init__(self, monkeypatch) -> None:
        import sitegen.pipeline.build as B
        import sitegen.pipeline.jobs as J
        from sitegen.cache.store import Store

        self.decoded: list[tuple[str, int]] = []
        self.runs: list[str] = []
        self.pages: list[str] = []
        self.trends: list[str] = []
        read_file, draw_run, draw_group, trend_files = Store.read_file, J.draw_run, B.draw_group, B.trend_files

        def counting_read(store, path, options, decode):
            def counting_decode(p, opts, **kw):
                self.decoded.append((str(p), kw.get("start", 0)))
                return decode(p, opts, **kw)
            return read_file(store, path, options, counting_decode)

        def counting_run(job):
            self.runs.append(job.family[0].name)
            return draw_run(job)

        def counting_group(job):
            self.pages.append(job.group.slug)
            return draw_group(job)

        monkeypatch.setattr(Store, "read_file", counting_read)
        monkeypatch.setattr(J, "draw_run", counting_run)  # (process_run looks it up in jobs)
        monkeypatch.setattr(B, "draw_group", counting_group)  # (send_pages looks it up in build)
        monkeypatch.setattr(B, "trend_files", lambda key, *a, **kw: self.trends.append("/".join(key)) or trend_files(key, *a, **kw))

    def clear(self) -> None:
        self.decoded.clear(), self.runs.clear(), self.pages.clear(), self.trends.clear()


def _build(archive: Path, out: Path, cache: Path):
    return build(archive, out, BuildOptions(config=Config(), cache=cache, executor=Serial()))


def _event_file(archive: Path, run: str) -> Path:
    (path,) = (archive / run).glob("*tfevents*")
    return path


@pytest.mark.usefixtures("cache_every_file")
def test_appended_logs_decode_only_their_tails_and_redraw_only_their_pages(tbx_archive: Path, tmp_path: Path, monkeypatch):
    from sitegen.pages.compare import group_slug

    counts = Counts(monkeypatch)
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(tbx_archive, out, cache)
    names = [f"proj{p}/model{m}/run{r}" for p in range(PROJECTS) for m in range(MODELS) for r in range(RUNS)]
    assert sorted(counts.runs) == names and len(counts.decoded) == 12
    assert all(start == 0 for _, start in counts.decoded)
    assert len(counts.pages) == 1 + PROJECTS + PROJECTS * MODELS
    live = out.resolve()
    before = inodes(out)

    sizes = {str(_event_file(tbx_archive, run)): corpus.append_scalars(_event_file(tbx_archive, run), "train/loss", range(30, 40))
             for run in GROWN}
    counts.clear()
    _build(tbx_archive, out, cache)
    assert out.resolve() != live and manifest.verify(out) == []
    # (a) only the 3 grown files are decoded again, each from where the last build stopped
    assert sorted(counts.decoded) == sorted(sizes.items())
    # (b) only their runs are drawn
    assert sorted(counts.runs) == sorted(GROWN)
    # (c) only the comparison pages that list them: the whole archive, 2 projects, 3 models
    grown_groups = {"all"} | {group_slug(tuple(run.split("/")[:k])) for run in GROWN for k in (1, 2)}
    assert sorted(counts.pages) == sorted(grown_groups) and len(counts.pages) == 6
    # ... and only their trend pages (2 projects, 3 models; the other trend pages are linked)
    assert sorted(counts.trends) == sorted({"/".join(run.split("/")[:k]) for run in GROWN for k in (1, 2)})
    after = inodes(out)
    new = {rel for rel, ino in after.items() if before.get(rel) != ino}  # written by this build
    drawn = tuple(f"runs/{slugify(run)}/" for run in GROWN) + tuple(f"{kind}/{g}/" for g in grown_groups for kind in ("compare", "trends"))
    index = {"index.html", "index.html.gz", "index-data.js", "index-data.js.gz"}
    # (and the index's shards that hold a grown run: the others are linked)
    index |= {f"index/{name}.js{gz}" for name, _ in index_head(out)["shards"] for gz in ("", ".gz")
              if any(r[0] in {slugify(run) for run in GROWN} for r in index_shard(out, name)["rows"])}
    report = {"manifest.json", "manifest.json.gz", "build-report.json", "changes.json", "changes.json.gz", "changes.md", "feed.xml"}
    assert "index.html" in new and new <= index | report | {rel for rel in after if rel.startswith(drawn)}, sorted(new)
    # every other file is the live build's, linked (the same inode): runs, pages, assets
    replaced = {rel for rel in before if rel.startswith("index/") and rel not in after}  # (the grown runs' old shards)
    assert len(replaced) <= len({rel for rel in new if rel.startswith("index/")})
    others = [rel for rel in before if not rel.startswith(drawn) and rel not in index | report | replaced]
    assert len(others) > 50 and all(after.get(rel) == before[rel] for rel in others)
    for run in GROWN:  # each grown run's page was written again
        assert f"runs/{slugify(run)}/index.html" in new
    # (d) the bytes written are a small part of the site's (about a tenth here: 3 of 12 run
    # pages, 6 comparison pages, the index; the Vega bundle and the other pages are linked)
    size = {rel: (out / rel).stat().st_size for rel in after}
    written = sum(size[rel] for rel in new)
    assert written < 0.15 * sum(size.values()), (written, sum(size.values()))

    # and nothing changed since: nothing is decoded or drawn, the live build stays
    live = out.resolve()
    counts.clear()
    again = _build(tbx_archive, out, cache)
    assert (counts.decoded, counts.runs, counts.pages, counts.trends) == ([], [], [], [])
    assert out.resolve() == live and again.runs == 12


def test_serial_and_a_local_pool_build_the_same_bytes(tbx_archive: Path, tmp_path: Path, monkeypatch):
    """Runs and comparison pages drawn in 2 worker processes (forced for this small archive)
    give the very site this process draws."""
    import sitegen.pipeline.build as B
    from sitegen.pipeline.executors import LocalPool

    monkeypatch.setattr(B, "MIN_PARALLEL_ITEMS", 1)
    monkeypatch.setattr(B, "MIN_PARALLEL_BYTES", 0)
    import sitegen.pipeline.jobs as J

    build(tbx_archive, tmp_path / "serial", BuildOptions(config=Config(), cache=tmp_path / "c1", executor=Serial()))
    drawn_here: list[str] = []
    draw_run = J.draw_run
    monkeypatch.setattr(J, "draw_run", lambda job: drawn_here.append(job.family[0].name) or draw_run(job))
    build(tbx_archive, tmp_path / "pool", BuildOptions(config=Config(), cache=tmp_path / "c2", executor=LocalPool(2)))
    assert drawn_here == []  # every run was drawn by a worker (which does not see this patch)
    assert_same_site(tmp_path / "serial", tmp_path / "pool")


def test_unchanged_runs_are_read_from_the_run_table(tbx_archive: Path, tmp_path: Path, monkeypatch):
    """A rebuild takes the unchanged runs' summaries from the last build's run table, one pass
    over one file: with every summary file's document damaged, only the grown run is drawn.
    Without the table they are read from their own files (here: all damaged, so all drawn
    again); a damaged table is read up to the damage. Each way, the same site as a fresh build."""
    from sitegen.cache import table

    counts = Counts(monkeypatch)
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(tbx_archive, out, cache)
    path = table.table_path(cache, out)
    assert len(list(table.read(path, ContainsAll()))) == 12

    def damage_documents(at: int) -> None:  # (the document is a summary file's last part; its points stay whole)
        for f in cache.glob("runs/*/*.sum"):
            data = bytearray(f.read_bytes())
            data[at] ^= 0x01
            f.write_bytes(bytes(data))

    def grow(run: str, steps: range) -> None:
        corpus.append_scalars(_event_file(tbx_archive, run), "train/loss", steps)

    damage_documents(-2)
    grow(GROWN[0], range(30, 40))
    counts.clear()
    _build(tbx_archive, out, cache)
    assert counts.runs == [GROWN[0]]
    _build(tbx_archive, tmp_path / "fresh1", tmp_path / "cache-fresh1")
    assert_same_site(out, tmp_path / "fresh1", same_paths=False, news=False)

    damage_documents(-3)  # (the grown run's new summary too)
    path.unlink()
    grow(GROWN[1], range(30, 40))
    counts.clear()
    _build(tbx_archive, out, cache)
    assert sorted(counts.runs) == sorted(f"proj{p}/model{m}/run{r}" for p in range(PROJECTS) for m in range(MODELS) for r in range(RUNS))

    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # an entry in the middle: those before it are read from the table
    path.write_bytes(bytes(data))
    grow(GROWN[2], range(30, 40))
    counts.clear()
    _build(tbx_archive, out, cache)
    assert counts.runs == [GROWN[2]]  # (the summary files are whole again: the rest from them)
    _build(tbx_archive, tmp_path / "fresh2", tmp_path / "cache-fresh2")
    assert_same_site(out, tmp_path / "fresh2", same_paths=False, news=False)


class ContainsAll:
    def __contains__(self, item: object) -> bool:
        return True
