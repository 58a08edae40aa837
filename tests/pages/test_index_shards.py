"""The index loads what it shows (issue 26, item 1): the first page from the HTML and a small
head, the rows in content-named shards loaded on scroll, search, sort and group filter, over
file:// and under the site's CSP, in both languages; a rebuild rewrites only the changed run's
shard, and a rebuild from scratch gives the same bytes."""
from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.sites import index_data, index_head, index_shard, inodes

SDE = 1_700_000_000
PAGE = 20  # rows per page in these sites (200 in a real one)
SHARD = 16  # average runs per shard (512 in a real one)
RUNS = 150


def _archive(root: Path) -> Path:
    from tests.support.eventgen import write_archive

    return write_archive(root / "archive", RUNS, steps=8, projects=3, models=4)


def _build(arch: Path, out: Path, lang: str = "en", cache: Path | None = None):
    from sitegen.config import Config
    from sitegen.pages import index, indexdata
    from sitegen.pipeline.build import BuildOptions, build

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(index, "PAGE_ROWS", PAGE)
        mp.setattr(indexdata, "SHARD_RUNS", SHARD)
        return build(arch, out, BuildOptions(config=Config(title="shards", language=lang), cache=cache, use_cache=cache is not None,
                                             source_date_epoch=SDE))


@pytest.fixture(scope="module")
def shard_sites(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("shards")
    arch = _archive(root)
    return {lang: _build(arch, root / f"site-{lang}", lang).out for lang in ("en", "zh-CN")}


def _shard_requests(page) -> list[str]:
    return [u.rsplit("/", 1)[1][:-3] for u in page.log.requests if "/index/" in u and u.endswith(".js")]


def _settled(page) -> None:
    page.wait_for_selector("#runs:not([aria-busy])", state="attached", timeout=20000)


def _names(page) -> list[str]:
    _settled(page)
    return page.eval_on_selector_all("#runs tbody tr:not(.group-row) td:nth-child(4)", "ts => ts.map(t => t.textContent)")


def _open(page, site: Path, hash: str = "") -> None:
    page.set_viewport_size({"width": 1200, "height": 400})  # (the end of the table below the fold)
    page.goto((site / "index.html").as_uri() + hash)
    page.wait_for_selector("#runs[data-ready]", state="attached", timeout=20000)


def test_the_first_screen_needs_no_shard_and_a_small_head(shard_sites):
    site = shard_sites["en"].resolve()
    head, data = index_head(site), index_data(site)
    assert len(head["shards"]) >= 6 and sum(n for _, n in head["shards"]) == head["total"] == RUNS
    assert "runs" not in head and "rows" not in head  # no row in the head
    # the group tree: every project and model, its count and the shards holding its runs
    assert head["tree"]["project0"][0] == 50 and head["tree"]["project0/model1"][0] == sum(
        1 for r in data["runs"] if r[1][:2] == ["project0", "model1"])
    for key, (count, shards) in head["tree"].items():
        rows = [r for k in shards for r in index_shard(site, head["shards"][k][0])["rows"] if "/".join(r[1]).startswith(key)]
        assert len([r for r in rows if r[1][: key.count("/") + 1] == key.split("/")]) == count, key
    # each shard is named by its content
    import hashlib

    for name, _ in head["shards"]:
        text = (site / "index" / f"{name}.js").read_text("utf-8")
        payload = text[len(f'SITEGEN_INDEX_SHARD("{name}",'):-3]
        assert hashlib.sha256(payload.encode()).hexdigest()[:20] == name


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_first_rows_then_shards_on_scroll_search_and_group(page, shard_sites, lang):
    site = shard_sites[lang].resolve()
    data = index_data(site)
    head = index_head(site)
    order = [r[2] for r in data["runs"]]
    _open(page, site)
    assert _names(page) == order[:PAGE]  # the first page, from the HTML
    assert _shard_requests(page) == []  # and nothing else
    assert page.locator("#runs tbody tr td.num.best").count() > 0
    # scrolling to the end of the table asks for the next page's shards
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    for _ in range(100):
        if _shard_requests(page):
            break
        page.wait_for_timeout(100)
    offsets, n = [], 0
    for _, count in head["shards"]:
        offsets.append(n)
        n += count
    page2 = {head["shards"][k][0] for k in range(len(offsets)) if offsets[k] < 2 * PAGE and offsets[k] + head["shards"][k][1] > PAGE}
    assert set(_shard_requests(page)) <= page2 and _shard_requests(page)
    page.click("#page-next")
    assert _names(page) == order[PAGE : 2 * PAGE]
    loaded = set(_shard_requests(page))
    assert len(loaded) < len(head["shards"])
    # a run that only the last shard holds: found by a search, which loads every shard
    last = index_shard(site, head["shards"][-1][0])["rows"][-1]
    assert head["shards"][-1][0] not in loaded
    page.focus("#run-filter")  # the search box's focus starts loading every shard, before a key is typed
    for _ in range(100):
        if set(_shard_requests(page)) == {name for name, _ in head["shards"]}:
            break
        page.wait_for_timeout(100)
    assert set(_shard_requests(page)) == {name for name, _ in head["shards"]}
    page.fill("#run-filter", last[2])
    assert _names(page) == [last[2]]
    assert set(_shard_requests(page)) == {name for name, _ in head["shards"]}
    # ... by a hyperparameter, across every shard
    page.fill("#run-filter", "lr=0.01 model1")
    lr = data["hkeys"].index("lr")
    want = sorted(r[2] for r in data["runs"] if r[1][1] == "model1" and r[10].get(str(lr)) == 0.01)
    assert 0 < len(want) <= PAGE and sorted(_names(page)) == want
    if lang == "zh-CN":
        assert page.locator("label", has=page.locator("#group-filter")).inner_text().startswith("显示")
    assert page.log.errors == [], page.log.errors


def test_a_group_loads_only_its_shards(page, shard_sites):
    site = shard_sites["en"].resolve()
    head, data = index_head(site), index_data(site)
    key = "project1/model2"
    want = [r[2] for r in data["runs"] if r[1][:2] == ["project1", "model2"]]
    _open(page, site, "#group=" + key)  # a group's own address
    assert _names(page) == want[:PAGE] and len(want) == head["tree"][key][0]
    assert set(_shard_requests(page)) == {head["shards"][k][0] for k in head["tree"][key][1]}
    assert len(head["tree"][key][1]) < len(head["shards"]) / 2
    # sorting within the group keeps to its shards
    page.click("#runs thead th[data-col='m0'] button")
    assert sorted(_names(page)) == sorted(want[:PAGE]) or len(want) > PAGE
    page.focus("#run-filter")  # (the search box's focus: the group's shards only)
    page.wait_for_timeout(300)
    assert set(_shard_requests(page)) == {head["shards"][k][0] for k in head["tree"][key][1]}
    # the filter control: back to all runs, then a project
    assert page.input_value("#group-filter") == key
    page.select_option("#group-filter", "")  # (still sorted: now across every shard)
    assert _names(page) == [r[2] for r in sorted(data["runs"], key=lambda r: r[8][0])][:PAGE]
    assert len(set(_shard_requests(page))) == len(head["shards"])
    page.select_option("#group-filter", "project2")
    assert page.url.endswith("#group=project2")
    assert all(r in [x[2] for x in data["runs"] if x[1][0] == "project2"] for r in _names(page))
    # ticking runs of the group opens the smallest group holding them, with them
    boxes = page.locator("#runs tbody input.run-tick")
    boxes.nth(0).check()
    boxes.nth(-1).check()
    ticked = [r for r in data["runs"] if r[0] in {boxes.nth(0).get_attribute("value"), boxes.nth(-1).get_attribute("value")}]
    common = ticked[0][1] if ticked[0][1] == ticked[1][1] else ticked[0][1][:1]
    want = data["groups"]["/".join(common)] + "#runs=" + ",".join(sorted(r[0] for r in ticked))
    assert page.get_attribute("#compare-ticked", "href") == want
    assert page.log.errors == [], page.log.errors


def test_shards_load_under_the_csp(browser, shard_sites):
    from sitegen.tools.serve import SiteServer

    server = SiteServer(shard_sites["zh-CN"].resolve(), 0, quiet=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ctx = browser.new_context()
        ctx.add_init_script("window.__csp = []; document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.blockedURI));")
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
        page.wait_for_selector("#runs[data-ready]", state="attached")
        page.fill("#run-filter", "run00149")
        page.wait_for_selector("#runs:not([aria-busy])", state="attached")
        assert page.locator("#runs tbody tr").count() == 1
        assert page.evaluate("window.__csp") == [] and errors == []
        ctx.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_rebuild_rewrites_only_the_changed_runs_shard(tmp_path: Path):
    from tests.support.eventgen import write_run

    arch = _archive(tmp_path)
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(arch, out, cache=cache)
    before, head0 = inodes(out), index_head(out)
    before_site = out.resolve()  # (kept: the builds folder keeps the last 3)
    shards0 = {name for name, _ in head0["shards"]}
    # run00077 grows: the same log, more steps
    changed = next(p for p in arch.rglob("run00077"))
    for f in changed.iterdir():
        f.unlink()
    config = json.dumps({"lr": 10 ** -(2 + 77 % 3), "batch_size": 32 * (1 + 77 % 4), "seed": 77, "model": {"depth": 8 + 1, "width": 256}})
    write_run(changed, tags=["train/loss", "eval/accuracy"], steps=12, seed=77, start=1.7e9 + 77 * 1000.0, config=config)
    _build(arch, out, cache=cache)
    after, head1 = inodes(out), index_head(out)
    shards1 = {name for name, _ in head1["shards"]}
    new = {rel for rel in after if rel.startswith("index/") and before.get(rel) != after[rel] and not rel.endswith(".gz")}
    assert new == {f"index/{n}.js" for n in shards1 - shards0} and new
    # each shard written holds the grown run, or a run whose best mark moved to or from it
    marks0 = {r[0]: r[11:] for n in shards0 for r in index_shard(before_site, n)["rows"]}
    for rel in new:
        rows = index_shard(out, rel[len("index/"):-3])["rows"]
        assert any(r[2] == "run00077" or marks0[r[0]] != r[11:] for r in rows), rel
    assert len(new) <= 3 and len(shards0 & shards1) >= len(shards0) - 3  # the others: the live build's, linked
    # a build from scratch with the same SOURCE_DATE_EPOCH gives the same bytes
    fresh = tmp_path / "again"
    _build(arch, fresh)
    assert sorted(r for r in inodes(fresh) if r.startswith("index/")) == sorted(r for r in after if r.startswith("index/"))
    for rel in [r for r in after if r.startswith("index/")]:
        assert (fresh / rel).read_bytes() == (out / rel).read_bytes(), rel
    assert {**index_head(fresh), "fresh": []} == {**head1, "fresh": []}  # (what is new differs: all, or none)


def test_boundaries_move_only_beside_a_change():
    from sitegen.pages import indexdata

    def runs(names):
        return [SimpleNamespace(slug=n.replace("/", "-"), parts=tuple(n.split("/"))) for n in names]

    names = [f"p{i // 400}/m{i // 40}/r{i:05d}" for i in range(2000)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(indexdata, "SHARD_RUNS", 32)
        a = indexdata.boundaries(runs(names))
        b = indexdata.boundaries(runs(names[:1000] + ["p2/m25/r01000x"] + names[1000:]))
        c = indexdata.boundaries(runs(names[:500] + names[501:]))
    assert len(a) > 2000 / 32 / 2 and all(0 < y - x <= 32 * indexdata.MAX_SHARD for x, y in zip(a, a[1:]))

    def spans(starts, n):
        return {(x, y) for x, y in zip(starts, starts[1:] + [n])}

    shift = lambda s, at, d: {(x + d if x > at else x, y + d if y > at else y) for x, y in s}  # noqa: E731
    assert len(spans(a, 2000) ^ shift(spans(b, 2001), 1000, -1)) <= 6  # the shard with the new run (and a neighbour)
    assert len(spans(a, 2000) ^ shift(spans(c, 1999), 499, 1)) <= 6


def test_the_head_stays_small_at_100000_runs():
    """The floor of issue 26: the first file the index loads is at most 500 KB at 100,000 runs
    (10 projects x 10 models; the head holds no row, only the group tree and the shard list)."""
    from sitegen.model import slug
    from sitegen.pages import indexdata

    rows = []
    for i in range(100_000):
        name = f"project{i % 10}/model{(i // 10) % 10}/run{i:05d}"
        run = SimpleNamespace(name=name, slug=slug(name), title=name, parts=tuple(name.split("/")), lines=[], start_time=1.7e9 + i,
                              end_time=1.7e9 + i + 60, last_step=19)
        rows.append(indexdata.IndexRow(run, {"lr": 0.1, "seed": i}, [0.5, 0.25], "--"))
    rows.sort(key=lambda r: r.run.name)
    files = dict(indexdata.index_data(rows, {"depth": 2}))
    head = files["index-data.js"]
    assert len(head) <= 500_000 and len(files) - 1 >= 100_000 // indexdata.SHARD_RUNS // 2
    assert sum(len(d) for d in files.values()) > 50 * len(head)  # (the rows are in the shards)
    assert max(len(d) for rel, d in files.items() if rel != "index-data.js") <= 500_000  # (each shard too)


def test_a_rebuild_draws_only_the_shards_whose_rows_changed(tmp_path: Path, monkeypatch):
    """Shards whose runs, marks and key metrics did not change are linked from the live build
    without being drawn; a changed run's shard is drawn, and the site is the one a build from
    scratch makes."""
    from sitegen.pages import indexdata
    from tests.support.eventgen import write_run

    drawn: list[list[str]] = []
    shard = indexdata.shard
    monkeypatch.setattr(indexdata, "shard", lambda rows: drawn.append([r.run.name for r in rows]) or shard(rows))
    arch = _archive(tmp_path)
    out, cache = tmp_path / "site", tmp_path / "cache"
    _build(arch, out, cache=cache)
    total = len(index_head(out)["shards"])
    assert len(drawn) == total
    drawn.clear()
    _build(arch, out, cache=cache)  # (unchanged: the live build is kept, nothing drawn)
    assert drawn == []
    changed = next(p for p in arch.rglob("run00100"))
    for f in changed.iterdir():
        f.unlink()
    write_run(changed, tags=["train/loss", "eval/accuracy"], steps=11, seed=100, start=1.7e9 + 100 * 1000.0)
    _build(arch, out, cache=cache)
    assert 1 <= len(drawn) <= 3 < total and any(n.endswith("run00100") for rows in drawn for n in rows)
    # the cache lost the shards' heads: every shard is drawn again, with the same bytes
    import shutil

    shutil.rmtree(cache / "pages")
    drawn.clear()
    (changed / "notes.md").write_text("grown again")
    _build(arch, out, cache=cache)
    assert len(drawn) == len(index_head(out)["shards"])
    fresh = tmp_path / "again"
    _build(arch, fresh)
    assert sorted(r for r in inodes(fresh) if r.startswith("index/")) == sorted(r for r in inodes(out) if r.startswith("index/"))
    for rel in [r for r in inodes(out) if r.startswith("index/")]:
        assert (fresh / rel).read_bytes() == (out / rel).read_bytes(), rel
