"""Summarised comparison pages on a rebuild: a group's runs script whose runs did not change is
the live build's file, linked (not drawn again); only the changed runs' points are read again;
the pages equal a build from scratch."""
from __future__ import annotations

import shutil
from pathlib import Path

from sitegen.config import CompareConfig, Config
from sitegen.pipeline.build import BuildOptions, build
from sitegen.pipeline.executors import Serial
from tests.support import page_payload
from tests.support.eventgen import write_run


def test_unchanged_groups_scripts_are_linked(tmp_path: Path, monkeypatch):
    from sitegen.pages import bands

    root = tmp_path / "logs"
    for p in range(2):
        for i in range(5):
            write_run(root / f"proj{p}" / "model" / f"run{i}", tags=["loss", "acc"], steps=40, seed=10 * p + i, start=1.7e9 + i)
    cfg = Config(compare=CompareConfig(summarise_above=3))
    drawn: list[str] = []
    draw = bands._group_file
    monkeypatch.setattr(bands, "_group_file", lambda group, g, *a: drawn.append(g.name) or draw(group, g, *a))
    gathered: list[str] = []  # the runs whose points a summarised page read
    gather = bands.gather
    monkeypatch.setattr(bands, "gather", lambda runs, *a: gathered.extend(r.name for r in runs) or gather(runs, *a))
    out, cache = tmp_path / "site", tmp_path / "cache"
    build(root, out, BuildOptions(config=cfg, cache=cache, executor=Serial()))
    assert sorted(drawn) == ["model"] * 4 + ["proj0", "proj1"]  # the whole archive's groups; the project and model pages' one
    def scripts() -> dict[str, tuple[str, int]]:
        page = out.resolve() / "compare" / "all"  # (the site is a link to the live build)
        return {g["n"]: (g["file"], (page / g["file"]).stat().st_ino) for g in page_payload(page / "index.html")["summary"]["groups"]}

    before = scripts()
    grown = root / "proj1" / "model" / "run3"
    shutil.rmtree(grown)
    write_run(grown, tags=["loss", "acc"], steps=70, seed=13, start=1.7e9 + 3)
    drawn.clear()
    gathered.clear()
    build(root, out, BuildOptions(config=cfg, cache=cache, executor=Serial()))
    after = scripts()
    assert sorted(drawn) == ["model", "model", "proj1"]  # the grown run's groups only
    assert gathered == ["proj1/model/run3"] * 3  # its points, once for each of its 3 pages
    assert after["proj0"] == before["proj0"] and after["proj1"][0] != before["proj1"][0]

    def pages(site: Path) -> dict[str, bytes]:
        return {p.relative_to(site.resolve()).as_posix(): p.read_bytes() for p in site.resolve().glob("compare/*/*")}

    build(root, tmp_path / "fresh", BuildOptions(config=cfg, use_cache=False, executor=Serial()))
    assert pages(out) == pages(tmp_path / "fresh")


def test_damaged_kept_points_are_read_again(tmp_path: Path):
    root = tmp_path / "logs"
    for i in range(5):
        write_run(root / "proj" / f"m{i % 2}" / f"run{i}", tags=["loss"], steps=30, seed=i, start=1.7e9 + i)
    cfg = Config(compare=CompareConfig(summarise_above=3))
    out, cache = tmp_path / "site", tmp_path / "cache"
    build(root, out, BuildOptions(config=cfg, cache=cache, executor=Serial()))
    kept = sorted((cache / "bands").iterdir())
    assert kept
    for path in kept:  # a flipped byte in each: the CRC tells, and the points are read again
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    grown = root / "proj" / "m1" / "run3"
    shutil.rmtree(grown)
    write_run(grown, tags=["loss"], steps=50, seed=3, start=1.7e9 + 3)
    build(root, out, BuildOptions(config=cfg, cache=cache, executor=Serial()))
    build(root, tmp_path / "fresh", BuildOptions(config=cfg, use_cache=False, executor=Serial()))
    for page in (tmp_path / "fresh").resolve().glob("compare/*/*"):
        assert (out.resolve() / page.relative_to((tmp_path / "fresh").resolve())).read_bytes() == page.read_bytes(), page


def test_rebuilds_equal_builds_from_scratch_and_read_only_changed_groups(tmp_path: Path, monkeypatch):
    """Through a sequence of rebuilds (runs grown, added, removed, a new best run, a tag added
    that moves every group's best run, the cache deleted, kept entries damaged), every file of
    the site equals a build from scratch; a group whose runs did not change is not read point
    by point (its digest and kept bands answer for it)."""
    from sitegen.cache.store import Store

    root = tmp_path / "logs"

    def run(p: int, m: int, i: int, steps: int, tags: tuple[str, ...] = ("loss", "acc"), seed: int = 0) -> None:
        d = root / f"p{p}" / f"m{m}" / f"r{i}"
        shutil.rmtree(d, ignore_errors=True)
        write_run(d, tags=list(tags), steps=steps, seed=seed or 100 * p + 10 * m + i, start=1.7e9 + 10 * p + i)

    for p in range(3):
        for m in range(2):
            for i in range(2):
                run(p, m, i, 250 + 30 * i + 20 * m)
    cfg = Config(title="bands", compare=CompareConfig(summarise_above=3))
    out, cache = tmp_path / "site", tmp_path / "cache"
    loaded: list[tuple[str, str]] = []
    get = Store.get_gathered
    monkeypatch.setattr(Store, "get_gathered", lambda self, slug, name: loaded.append((slug, name)) or get(self, slug, name))

    def files(site: Path) -> dict[str, bytes]:
        site = site.resolve()
        return {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}

    def check(step: str) -> None:
        loaded.clear()
        build(root, out, BuildOptions(config=cfg, cache=cache, executor=Serial(), source_date_epoch=7))
        fresh = tmp_path / "fresh"
        shutil.rmtree(fresh, ignore_errors=True)
        build(root, fresh, BuildOptions(config=cfg, use_cache=False, executor=Serial(), source_date_epoch=7))
        mine, theirs = files(out), files(fresh)
        assert sorted(mine) == sorted(theirs), step
        assert [rel for rel in theirs if mine[rel] != theirs[rel]] == [], step

    def points_read(slug: str) -> set[str]:  # groups of a page whose points were read (not only their digest, bands)
        return {name.split("-")[0] for s, name in loaded if s == slug and "/" not in name}  # (a group's key: its slug)

    check("cold")
    run(1, 0, 1, 400)  # grows past every run
    check("grown")
    assert points_read("all") == {"p1"}
    run(1, 0, 1, 420)
    check("grown again")
    assert points_read("all") == {"p1"}
    run(2, 1, 2, 200)
    check("added")
    assert points_read("all") == {"p2"}
    shutil.rmtree(root / "p0" / "m1" / "r0")
    check("removed")
    assert points_read("all") == {"p0"}
    run(2, 0, 0, 600)  # its accuracy passes every other run's: the new best run of p2
    check("new best")
    run(0, 0, 1, 260, tags=("loss", "acc", "aaa"))  # a key metric before "acc": every group's best run moves
    check("tag added")
    assert points_read("all") == {"p0", "p1", "p2"}
    shutil.rmtree(cache)
    check("cache deleted")
    run(1, 1, 0, 300)
    check("after the cache was deleted")
    for path in sorted((cache / "bands").iterdir()):  # a flipped byte in each kept entry: the CRC tells
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    check("damaged")  # (nothing changed: the pages are the live build's)
    run(1, 1, 0, 330)
    check("grown after the damage")
    assert points_read("all") == {"p0", "p1", "p2"}  # read again, and kept again
    run(1, 1, 0, 360)
    check("grown again after the damage")
    assert points_read("all") == {"p1"}
