"""Hyperparameters from text summaries (JSON and a safe YAML subset) and the comparison table."""
from __future__ import annotations

import math

from sitegen.model import is_config_tag, lower_is_better
from sitegen.pages.hptable import comparison_table
from sitegen.prepare.hparams import parse_config, parse_yaml_map


def test_json_config_is_flattened():
    assert parse_config('{"lr": 0.1, "model": {"depth": 18, "act": "relu"}, "tags": [1, 2], "amp": true}') == {
        "lr": 0.1, "model.depth": 18.0, "model.act": "relu", "tags": "[1, 2]", "amp": True,
    }


def test_yaml_subset_nested_maps_and_scalars():
    text = "# run config\nlr: 3e-4\nmodel:\n  name: 'gpt2'\n  layers: 12\n  dropout: .1\noptimizer:\n  betas: [0.9, 0.95]\nnotes: fine # comment\nempty:\n"
    assert parse_config(text) == {
        "lr": 3e-4, "model.name": "gpt2", "model.layers": 12.0, "model.dropout": 0.1,
        "optimizer.betas": "[0.9, 0.95]", "notes": "fine", "empty": "null",
    }


def test_text_that_is_no_config_is_refused():
    assert parse_config("# Notes\n\nThis run diverged at step 300.") is None
    assert parse_config("- a\n- b") is None
    assert parse_yaml_map("!!python/object:os.system x") is None
    assert parse_config('{"broken": ') is None


def test_config_tags():
    assert is_config_tag("hyperparameters/config/text_summary")
    assert is_config_tag("config") and is_config_tag("args/text_summary") and is_config_tag("hparams")
    assert not is_config_tag("notes/text_summary") and not is_config_tag("samples/predictions")


def test_comparison_table_collapses_constants_and_marks_best():
    hps = [{"lr": 0.1, "opt": "sgd", "seed": 1.0}, {"lr": 0.01, "opt": "sgd", "seed": 2.0}, {"lr": 0.001, "opt": "sgd"}]
    finals = [{"eval/loss": 0.5, "eval/acc": 0.8}, {"eval/loss": 0.3, "eval/acc": 0.7}, {"eval/loss": math.nan, "eval/acc": 0.9}]
    table = comparison_table(hps, finals, finals, ["eval/acc", "eval/loss"])
    assert table.same == [("opt", "sgd")]
    keys = [(c.key, c.kind) for c in table.columns]
    assert keys == [("lr", "hparam"), ("seed", "hparam"), ("eval/acc", "final"), ("eval/acc", "best"), ("eval/loss", "final"), ("eval/loss", "best")]
    best = {(c.key, c.kind): c.best for c in table.columns}
    assert best[("eval/acc", "final")] == 0.9  # higher is better
    assert best[("eval/loss", "final")] == 0.3  # lower is better, NaN ignored
    assert lower_is_better("损失/训练") and lower_is_better("val/perplexity") and lower_is_better("train/error_rate") and not lower_is_better("eval/acc")
    assert lower_is_better("val_wer") and not lower_is_better("answer_score")
    assert table.rows[2][1] is None  # missing seed stays empty
