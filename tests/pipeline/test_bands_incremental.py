"""Summarised comparison pages on a rebuild: a group's runs script whose runs did not change is
the live build's file, linked (not drawn again); the pages equal a build from scratch."""
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
    build(root, out, BuildOptions(config=cfg, cache=cache, executor=Serial()))
    after = scripts()
    assert sorted(drawn) == ["model", "model", "proj1"]  # the grown run's groups only
    assert after["proj0"] == before["proj0"] and after["proj1"][0] != before["proj1"][0]

    def pages(site: Path) -> dict[str, bytes]:
        return {p.relative_to(site.resolve()).as_posix(): p.read_bytes() for p in site.resolve().glob("compare/*/*")}

    build(root, tmp_path / "fresh", BuildOptions(config=cfg, use_cache=False, executor=Serial()))
    assert pages(out) == pages(tmp_path / "fresh")
