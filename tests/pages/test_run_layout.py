"""Run page layout (issue 23, item 4): key metrics first, one-point ``hparam/*`` metrics as values
in the hyperparameter table, notes near the top, collapsible groups and chart text alternatives."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from sitegen.pages.runpage import key_rank
from tests.support import page_payload

TAGS = ["grad_norm/layer0", "grad_norm/layer1", "custom/score", "eval/accuracy", "train/accuracy", "eval/loss", "train/loss", "lr"]


@pytest.fixture(scope="module")
def layout_site(tmp_path_factory) -> Path:
    from sitegen.config import Config, IndexConfig
    from sitegen.pipeline.build import BuildOptions, build
    from tests.support.eventgen import scalar_event, version_event, write_run

    root = tmp_path_factory.mktemp("layout")
    run = root / "archive" / "proj" / "model" / "run1"
    write_run(run, tags=TAGS, steps=40, seed=3, start=1.7e9, config="lr: 0.1\n")
    # the hparams plugin's final metrics: one point each (one of them charted as a series too)
    (run / "events.out.tfevents.1700000100.final").write_bytes(
        version_event(1.7e9 + 100) + scalar_event("hparam/accuracy", 0, 1.7e9 + 100, 0.875) + scalar_event("hparam/loss", 0, 1.7e9 + 100, 0.25)
    )
    (run / "README.md").write_text("Notes of this run.\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n")
    out = root / "site"
    build(root / "archive", out, BuildOptions(config=Config(title="layout", index=IndexConfig(key_metrics=("custom/score",))), use_cache=False))
    return out


def _page(site: Path) -> tuple[Path, str]:
    html = next((site / "runs").glob("*/index.html"))
    return html, html.read_text("utf-8")


def _captions(section: str) -> list[str]:
    return re.findall(r"<figcaption>([^<]*)</figcaption>", section)


def test_key_metrics_come_first_in_their_order(layout_site: Path):
    _, html = _page(layout_site)
    first = html.split('id="g-1"', 1)[1].split("</section>", 1)[0]
    assert "Key metrics" in first
    # the configured one, then losses (train, eval), then accuracies (train, eval)
    assert _captions(first) == ["custom/score", "train/loss", "eval/loss", "train/accuracy", "eval/accuracy"]
    assert html.index("<figcaption>grad_norm/layer0</figcaption>") > html.index('id="hparams"')  # the rest after the table
    assert all(f"<figcaption>{t}</figcaption>" not in html.split('id="g-1"', 1)[0] for t in TAGS)


def test_key_rank_rule():
    assert key_rank("val_loss", ()) == (1, 0, 1) and key_rank("train_acc", ()) == (1, 1, 0)
    assert key_rank("loss", ()) < key_rank("eval/loss", ()) < key_rank("accuracy", ())
    assert key_rank("x/y", ("x/y",)) == (0, 0) and key_rank("grad_norm", ()) is None and key_rank("lossy", ()) is None


def test_one_point_hparam_metrics_are_table_values_not_charts(layout_site: Path):
    path, html = _page(layout_site)
    table = html.split('id="hparams"', 1)[1].split("</section>", 1)[0]
    assert re.search(r'<tr class="metric"><th>hparam/accuracy</th><td>0\.875</td></tr>', table)
    assert re.search(r'<tr class="metric"><th>hparam/loss</th><td>0\.25</td></tr>', table)
    assert "<figcaption>hparam/" not in html
    charts = page_payload(path)["charts"]
    assert len(charts) == len(TAGS)  # one per tag, none for the one-point metrics


def test_notes_near_the_top_and_sections_collapsible(layout_site: Path):
    _, html = _page(layout_site)
    assert html.index('id="notes"') < html.index('id="g-1"') < html.index('id="hparams"')
    assert html.count("<details open><summary><h2>") == html.count('class="group')  # every chart group folds
    nav = html.split('<nav class="toc run-toc"', 1)[1].split("</nav>", 1)[0]
    assert [a for a in re.findall(r'href="#([^"]+)"', nav)][:3] == ["notes", "g-1", "hparams"]


def test_charts_have_text_alternatives(layout_site: Path):
    _, html = _page(layout_site)
    labels = re.findall(r'<div class="chart overlay" data-chart="\d+" role="img" aria-label="([^"]*)"', html)
    assert len(labels) == len(TAGS)
    assert any(re.fullmatch(r"train/loss\. last [-\d.e]+, min [-\d.e]+, max [-\d.e]+", lab) for lab in labels), labels


def test_markdown_table_alignment_is_classes(layout_site: Path):
    _, html = _page(layout_site)
    notes = html.split('id="notes"', 1)[1].split("</section>", 1)[0]
    assert '<th class="align-left">a</th>' in notes and '<td class="align-right">2</td>' in notes
    assert "style=" not in html
