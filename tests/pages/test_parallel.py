"""The parallel coordinates' data (sitegen.pages.parallel): raw values per axis, text values as
categories, the metric columns offered for the last axis (the first key metric present first),
the hyperparameter axes capped so the metric always fits, the newest runs."""
from __future__ import annotations

import math
from types import SimpleNamespace

from sitegen.pages import parallel
from sitegen.pages.hptable import comparison_table


def _runs(n: int) -> list:
    return [SimpleNamespace(slug=f"run-{i}") for i in range(n)]


def _data(hps, finals, metrics):
    table = comparison_table(hps, finals, finals, metrics)
    runs = _runs(len(hps))
    return table, parallel.parallel_data(table, runs, [f"r{i}" for i in range(len(hps))])


def test_values_go_out_raw_and_texts_as_categories():
    hps = [{"lr": 0.1, "opt": "adam", "amp": True}, {"lr": 0.01, "opt": "sgd", "amp": False}, {"lr": math.nan, "opt": "adam"}]
    finals = [{"acc": 0.5, "loss": 1.0}, {"acc": math.inf}, {"acc": 0.7, "loss": 0.5}]
    _, data = _data(hps, finals, ["none/such", "acc", "loss"])
    axes = {a["key"]: a for a in data["axes"]}
    assert axes["lr"] == {"key": "lr", "cat": False, "v": [0.1, 0.01, None]}  # NaN: no value
    assert axes["opt"] == {"key": "opt", "cat": True, "v": ["adam", "sgd", "adam"]}
    assert axes["amp"]["cat"] and axes["amp"]["v"] == ["True", "False", None]
    # the metric with no value at all is not offered; the first present one comes first
    assert [m["key"] for m in data["metrics"]] == ["acc", "loss"]
    assert data["metrics"][0]["v"] == [0.5, None, 0.7] and data["metrics"][1]["lower"] is True
    assert data["s"] == ["run-0", "run-1", "run-2"] and data["n"] == ["r0", "r1", "r2"]


def test_the_metric_keeps_its_place_past_the_axis_cap():
    hps = [{f"h{k:02d}": float(i * k) for k in range(1, 20)} for i in range(3)]
    finals = [{"acc": float(i)} for i in range(3)]
    table, data = _data(hps, finals, ["acc"])
    assert len(data["axes"]) == parallel.MAX_AXES - 1 and data["axes_total"] == 19
    assert [a["key"] for a in data["axes"]] == [c.key for c in table.columns if c.kind == "hparam"][: parallel.MAX_AXES - 1]
    assert data["metrics"][0]["key"] == "acc"


def test_the_newest_runs_and_nothing_to_draw(monkeypatch):
    monkeypatch.setattr(parallel, "MAX_RUNS", 3)
    hps = [{"lr": float(i)} for i in range(5)]
    finals = [{"acc": float(i)} for i in range(5)]
    _, data = _data(hps, finals, ["acc"])
    assert data["runs"] == 3 and data["s"] == ["run-2", "run-3", "run-4"] and data["axes"][0]["v"] == [2.0, 3.0, 4.0]
    assert _data(hps[:1], finals[:1], ["acc"])[1] is None  # one run
    assert _data([{}, {}], finals[:2], ["acc"])[1] is None  # no hyperparameter varies
