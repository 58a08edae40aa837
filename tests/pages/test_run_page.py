"""Complete run pages: environment, notes, artifacts, downloads, image step slider."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sitegen.pages.charts import decode_numbers
from tests.support import page_payload


@pytest.fixture(scope="module")
def rich_site(tmp_path_factory) -> Path:
    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build
    from tests.support.eventgen import write_run

    root = tmp_path_factory.mktemp("rich")
    run = root / "archive" / "proj" / "model" / "run1"
    write_run(run, tags=["train/loss"], steps=3000, seed=1, start=1.7e9, config="lr: 0.1\nmodel:\n  depth: 18\n")
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "last.pt").write_bytes(b"\x00weights" * 100)
    (run / "env.json").write_text(json.dumps({"python": "3.12.1", "torch": "2.4.0", "cuda": "12.4", "gpu": "H100", "hostname": "node-7", "dataset_version": "v3"}))
    (run / "README.md").write_text("# Notes\n\nRan on <b>node 7</b>. [bad](javascript:alert(1)) [ok](https://example.org/x)\n")
    out = root / "site"
    build(root / "archive", out, BuildOptions(config=Config(title="rich"), use_cache=False))
    return out


def _run_dir(site: Path) -> Path:
    return next((site / "runs").glob("*/index.html")).parent


def test_environment_notes_and_artifacts(rich_site: Path):
    html = (_run_dir(rich_site) / "index.html").read_text("utf-8")
    for s in ("3.12.1", "2.4.0", "12.4", "H100", "node-7"):
        assert s in html, s
    assert 'class="chip"' in html and "torch 2.4.0" in html
    assert "Data and provenance" in html and "dataset_version" in html
    assert 'id="notes"' in html and "&lt;b&gt;node 7&lt;/b&gt;" in html and "href=\"javascript:" not in html and "[bad](javascript:alert(1))" in html
    digest = hashlib.sha256(b"\x00weights" * 100).hexdigest()
    assert "checkpoints/last.pt" in html and digest in html
    assert "events.out.tfevents" not in html.split('id="artifacts"')[1].split("</section>")[0]
    assert "model.depth" in html  # YAML config text flattened into the hyperparameters


def test_full_resolution_downloads(rich_site: Path):
    run = _run_dir(rich_site)
    html = (run / "index.html").read_text("utf-8")
    parquet = f"{run.name}.parquet"  # named after the run: over file:// the download attribute is ignored
    assert 'class="csv-download"' in html and f'href="{parquet}"' in html and "3,000 records" in html
    table = pq.read_table(run / parquet)
    assert table.num_rows == 3000 and table.column_names == ["series", "tag", "step", "wall_time", "value"]
    chart = page_payload(run / "index.html")["charts"][0]
    xs, ys = decode_numbers(chart["rows"]["x"]), decode_numbers(chart["rows"]["y"])
    assert 0 < len(xs) == len(ys) < 3000  # the chart itself is thinned
    records = {(s, v) for s, v in zip(table.column("step").to_pylist(), table.column("value").to_pylist())}
    assert all((x, y) in records for x, y in zip(xs, ys))  # every drawn point is a record, exactly


def test_csv_download_has_every_record_exactly(page, tmp_path: Path):
    """The CSV the page script writes (over file://, from scalars.js) equals the Parquet and the
    log, record for record: hostile tag text quoted, NaN/±inf/-0.0 and float64 wall times exact."""
    import csv
    import math

    from tensorboardX import SummaryWriter

    from sitegen import read_scalars
    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build

    w = SummaryWriter(str(tmp_path / "arch" / "run"))
    odd = 'we"ird,tag\n=1+1'
    specials = [float("nan"), float("inf"), float("-inf"), -0.0, 1e-45, 3.4e38]
    for step in range(500):
        w.add_scalar("loss", specials[step] if step < len(specials) else 1 / (step + 1), step, walltime=1.7e9 + step * 0.123456)
        w.add_scalar(odd, step * 0.5, step * 3, walltime=1.7e9 + step)
    w.close()
    # tensorboardX cleans tag names; a hand-written record keeps the hostile one as it is
    from tests.support.eventgen import scalar_event, version_event

    hostile = 'a "quoted", tag\r\nwith =SUM(1) and ü'
    (tmp_path / "arch" / "run" / "events.out.tfevents.1800000000.gen").write_bytes(
        version_event(1.8e9) + b"".join(scalar_event(hostile, i, 1.8e9 + i, i / 7) for i in range(500)))
    build(tmp_path / "arch", tmp_path / "site", BuildOptions(config=Config(), use_cache=False))
    (html,) = (tmp_path / "site").resolve().glob("runs/*/index.html")
    page.goto(html.as_uri())
    link = page.locator("a.csv-download")
    with page.expect_download() as info:
        link.click()
    got = list(csv.reader(open(info.value.path(), newline="", encoding="utf-8")))
    assert got[0] == ["series", "tag", "step", "wall_time", "value"]
    table = pq.read_table(html.parent / f"{html.parent.name}.parquet").to_pylist()
    assert len(got) - 1 == len(table) == 1500
    ref = read_scalars(tmp_path / "arch").to_pylist()
    assert sorted((r["tag"], r["step"], r["wall_time"]) for r in ref) == sorted((r["tag"], r["step"], r["wall_time"]) for r in table)

    def same(a: float, b: float) -> bool:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))

    for row, want in zip(got[1:], table):
        assert row[0] == want["series"] and row[1] == want["tag"] and int(row[2]) == want["step"]
        assert same(float(row[3]), want["wall_time"]) and same(float(row[4]), want["value"]), (row, want)
    assert {r[1] for r in got[1:]} == {r["tag"] for r in ref} and hostile in {r[1] for r in got[1:]}
    assert page.log.errors == []


def test_image_step_slider_shows_every_image(page, example_site: Path):
    for path in sorted((example_site / "runs").glob("*/index.html")):
        if "image-step" in path.read_text("utf-8"):
            break
    else:
        raise AssertionError("no run page of the example has images")
    page.goto(path.as_uri())
    fig = page.locator("figure.image-step").first
    slider = fig.locator("input[type=range]")
    n = int(slider.get_attribute("max")) + 1
    assert n >= 3
    srcs = set()
    for i in range(n):
        slider.evaluate("(e, v) => { e.value = v; e.dispatchEvent(new Event('input')); }", str(i))
        srcs.add(fig.locator("img").get_attribute("src"))
        assert fig.locator(".pos").inner_text() == f"{i + 1} / {n}"
    assert len(srcs) == n
    assert page.log.errors == [], page.log.errors


def test_images_beyond_the_limit_are_thinned_and_the_page_says_so(tmp_path):
    import numpy as np
    from tensorboardX import SummaryWriter

    from sitegen.config import Config, LimitsConfig
    from sitegen.pipeline.build import BuildOptions, build

    w = SummaryWriter(str(tmp_path / "arch" / "run"))
    for step in range(7):
        w.add_image("samples", np.full((3, 4, 4), step * 30, dtype=np.uint8), step)
    w.close()
    out = tmp_path / "site"
    build(tmp_path / "arch", out, BuildOptions(config=Config(limits=LimitsConfig(max_images_per_tag=3)), use_cache=False))
    (page,) = (out / "runs").glob("*/index.html")
    html = page.read_text("utf-8")
    payload = page_payload(page)
    assert [im["step"] for im in payload["images"][0]] == [0, 3, 6]  # spread, first and last kept
    assert "7 images, 3 shown" in html
    assert len(list(page.parent.glob("media/*.png"))) == 3


def test_a_drawn_run_leaves_no_cycles(tmp_path: Path):
    """A run's page data is freed as soon as its page is made (reference counting), not at the
    garbage collector's next pass: a Jinja macro and its render context referred to each other
    and kept each run's points alive until then (workers peaked 25 MB higher, and the collector
    walked them again and again). Every run of the example archive, every format."""
    import gc

    from sitegen.config import Config
    from sitegen.pipeline.jobs import draw_run
    from sitegen.pipeline.plan import make_plan
    from tests.support import EXAMPLE

    jobs = make_plan(EXAMPLE, tmp_path / "site", tmp_path / "cache", config=Config(), verify=True,
                     source_date_epoch=None).jobs
    assert len(jobs) >= 10
    for job in jobs:  # once: imports, templates and caches made on first use
        draw_run(job)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for job in jobs:
            draw_run(job)
        gc.collect()
        left = sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == []
