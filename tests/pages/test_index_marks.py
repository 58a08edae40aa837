"""The index's marks (issue 23, item 7): best runs per model and per project, never across
projects; one column per hyperparameter logged under two names; the "running" badge."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from sitegen.pages.hpnames import canonical, columns
from tests.support.sites import index_data

SDE = 1_700_100_000  # the build time: run "live" wrote its last record 10 minutes before it


def _data(site: Path) -> dict:
    return index_data(site)


@pytest.fixture(scope="module")
def marks_site(tmp_path_factory) -> Path:
    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build
    from tests.support.eventgen import write_run

    root = tmp_path_factory.mktemp("marks")
    arch = root / "archive"
    runs = {  # name: (seed, config text)
        "projA/m1/r1": (1, "lr: 0.1\n"), "projA/m1/r2": (2, "learning_rate: 0.01\n"), "projA/m2/r3": (3, "lr: 0.001\n"),
        "projA/m2/r4": (4, "lr: 0.002\n"), "projB/m1/r5": (5, "hparams/lr: 0.3\n"), "projB/m1/r6": (6, "lr: 0.2\n"),
    }
    for i, (name, (seed, config)) in enumerate(sorted(runs.items())):
        write_run(arch / name, tags=["train/loss", "eval/accuracy"], steps=30 + 10 * seed, seed=seed, start=1.6e9 + i * 1000, config=config)
    live = write_run(arch / "projB" / "m2" / "live", tags=["train/loss"], steps=10, seed=9, start=SDE - 600 - 4.5)
    with open(live, "ab") as f:
        f.write(b"\x07garb")  # and its log ends mid-record
    write_run(arch / "projB" / "m2" / "recent", tags=["train/loss"], steps=10, seed=8, start=SDE - 1800)
    out = root / "site"
    build(arch, out, BuildOptions(config=Config(title="marks"), use_cache=False, source_date_epoch=SDE))
    return out


def test_best_marks_per_model_and_project_never_across_projects(marks_site: Path):
    data = _data(marks_site)
    rows = data["runs"]
    for m, metric in enumerate(data["metrics"]):
        lower = data["lower"][m]
        pick = min if lower else max
        want: dict[str, str] = {}
        for level, cut in (("m", 2), ("p", 1)):
            groups: dict[tuple, list[tuple[float, int]]] = {}
            for i, r in enumerate(rows):
                v = r[8][m]
                if isinstance(v, float) and math.isfinite(v):
                    groups.setdefault(tuple(r[1][:cut]), []).append((v, i))
            for vals in groups.values():
                if len(vals) > 1:
                    want[str(pick(vals)[1])] = level
        assert data["best"][m] == want, metric
        assert list(want.values()).count("p") == 2  # one per project, not one for the archive
    html = (marks_site / "index.html").read_text("utf-8")
    assert html.count('class="num best best-p"') == sum(list(b.values()).count("p") for b in data["best"])
    assert html.count('class="num best best-m"') == sum(list(b.values()).count("m") for b in data["best"])


def test_one_column_for_a_hyperparameter_logged_under_two_names(marks_site: Path):
    data = _data(marks_site)
    html = (marks_site / "index.html").read_text("utf-8")
    heads = [h for h in html.split("<thead>")[1].split("</thead>")[0].split("</th>") if 'class="hparam"' in h]
    assert len(heads) == 1 and ">lr</button>" in heads[0]  # the spelling most runs use
    assert "learning_rate" in heads[0] and "hparams/lr" in heads[0]  # the others in its title
    (col,) = data["hcols"]
    assert sorted(data["hkeys"][k] for k in col) == ["hparams/lr", "learning_rate", "lr"]


def test_column_rule():
    assert canonical("hparams/LearningRate") == canonical("lr") == canonical("config.learning-rate") == "learning_rate"
    assert canonical("model.depth") == "model.depth"  # only wrappers are dropped, not every namespace
    cols = columns([{"lr": 0.1}, {"learning_rate": 0.2}, {"lr": 0.3, "bs": 4}])
    assert [(c.name, c.keys) for c in cols] == [("bs", ["bs"]), ("lr", ["lr", "learning_rate"])]
    clash = columns([{"lr": 0.1, "learning_rate": 0.2}, {"lr": 0.3}])  # one run logs both, differently: two things
    assert [(c.name, c.keys) for c in clash] == [("learning_rate", ["learning_rate"]), ("lr", ["lr"])]
    same = columns([{"lr": 0.1, "learning_rate": 0.1}, {"lr": 0.3}])
    assert [(c.name, c.keys) for c in same] == [("lr", ["lr", "learning_rate"])]


def test_running_badge_for_runs_still_written_or_recent(marks_site: Path):
    data = _data(marks_site)
    names = {i: r[2] for i, r in enumerate(data["runs"])}
    assert sorted(names[i] for i in data["running"]) == ["live", "recent"]
    html = (marks_site / "index.html").read_text("utf-8")
    assert html.count('class="running" data-badge="running"') == 2


def test_running_without_source_date_epoch_uses_the_newest_record():
    from types import SimpleNamespace

    from sitegen.pages.index import running

    runs = [SimpleNamespace(name=n, end_time=t) for n, t in (("old", 1000.0), ("new", 10_000.0), ("near", 7_000.0), ("none", None))]
    assert running(runs, set(), None) == {"new", "near"}  # within an hour of the newest record
    assert running(runs, {"old"}, 20_000.0) == {"old"}  # a log ending mid-record is running whatever its age
    assert running(runs, set(), 10_700.0) == {"new"}
