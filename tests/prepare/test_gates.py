"""Gates: every rule form parsed, a bad rule named with its line and what is wrong, and the pass,
fail, missing-metric and no-baseline cases on run states."""
from __future__ import annotations

from pathlib import Path

import pytest

from sitegen.config import GatesConfig, load_config, parse_base, parse_rule
from sitegen.errors import ConfigError
from sitegen.prepare.changes import RunState
from sitegen.prepare.gates import evaluate, matches


@pytest.mark.parametrize("text, want", [
    ("vision/resnet50: eval/acc >= 0.91", dict(selector="vision/resnet50", metric="eval/acc", op=">=", number=0.91)),
    ("*/*: eval/loss <= baseline * 1.02", dict(selector="*/*", op="<=", base="baseline", arith="*", k=1.02)),
    ("nlp/*:eval/ppl<best+0.5", dict(selector="nlp/*", metric="eval/ppl", op="<", base="best", arith="+", k=0.5)),
    ("*/*: eval/acc > median(5) - 1e-3", dict(op=">", base="median", n=5, arith="-", k=0.001)),
    ("a/b: eval/acc >= run(a/b/2024-06-01 (rerun))", dict(base="run", run="a/b/2024-06-01 (rerun)", arith="")),
    ("a/b: eval/acc >= run(a/b/r1) * 0.99", dict(base="run", run="a/b/r1", arith="*", k=0.99)),
    ("a: loss <= -.5", dict(number=-0.5)),
])
def test_every_rule_form_parses(text: str, want: dict):
    rule = parse_rule(text)
    for key, value in want.items():
        assert getattr(rule, key) == value, (key, rule)


@pytest.mark.parametrize("text, what", [
    ("vision eval/acc >= 1", "expected 'SELECTOR: METRIC OP VALUE'"),
    (": eval/acc >= 1", "no selector"),
    ("a//b: eval/acc >= 1", "empty part"),
    ("a: eval/acc 0.9", "no comparison"),
    ("a: eval/acc => 0.9", "unknown comparison '=>'"),
    ("a: eval/acc == 0.9", "unknown comparison '=='"),
    ("a: eval/acc >=", "nothing to compare with"),
    ("a: eval/acc >= good", "bad value 'good'"),
    ("a: eval/acc >= median(0)", "median(N) needs a whole number N of at least 1, got '0'"),
    ("a: eval/acc >= median()", "median(N) needs"),
    ("a: eval/acc >= run()", "run(NAME) needs a run's name"),
    ("a: eval/acc >= best * x", "bad number 'x' after '*'"),
])
def test_a_bad_rule_says_what_is_wrong(text: str, what: str):
    with pytest.raises(ValueError, match=None) as exc:
        parse_rule(text)
    assert what in str(exc.value)


def test_bad_rules_are_reported_at_once_with_their_lines(tmp_path: Path):
    path = tmp_path / "sitegen.toml"
    path.write_text('title = "t"\n\n[gates]\nbaseline = "worst"\nmissing = "maybe"\nrules = [\n'
                    '  "vision/*: eval/acc >= 0.9",\n  "vision eval/acc >= 1",\n  \'a: b => 1\',\n]\n')
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    text = str(exc.value)
    assert "gates.rules[1] (line 8, 'vision eval/acc >= 1'): expected 'SELECTOR: METRIC OP VALUE'" in text
    assert "gates.rules[2] (line 9, 'a: b => 1'): unknown comparison '=>'" in text
    assert "gates.baseline: expected best, median(N) or run(NAME), got 'worst'" in text
    assert 'gates.missing: must be "fail" or "skip"' in text
    path.write_text('[gates]\nbaseline = "median(3)"\nrules = ["vision/*: eval/acc >= 0.9"]\n')
    cfg = load_config(path)
    (rule,) = cfg.gates.parsed()
    assert (rule.line, rule.number) == (3, 0.9) and parse_base(cfg.gates.baseline).n == 3


def state(name: str, start: float, **metrics: float) -> RunState:
    return RunState(name, name.replace("/", "-"), name.rsplit("/", 1)[0], start, start + 1, 10, 10, None, metrics)


RUNS = [
    state("vision/resnet/r1", 1, acc=0.80, loss=0.50),
    state("vision/resnet/r2", 2, acc=0.90, loss=0.40),
    state("vision/resnet/r3", 3, acc=0.85, loss=0.45),
    state("vision/resnet/r4", 4, acc=0.88, loss=0.46),  # the new run
    state("vision/vit/v1", 1, acc=0.70),
    state("nlp/gpt/g1", 1, ppl=20.0),
]


def results(rules: list[str], fresh: list[str], **options) -> list[tuple[str, str, str]]:
    got = evaluate(GatesConfig(rules=tuple(rules), **options), fresh, RUNS)
    assert got is not None
    return [(r["run"], r["status"], r["detail"]) for r in got["results"]]


def test_fixed_thresholds_pass_and_fail():
    assert results(["vision/resnet: acc >= 0.87"], ["vision/resnet/r4"]) == [
        ("vision/resnet/r4", "pass", "acc = 0.88 >= 0.87 (a fixed threshold)")]
    assert results(["vision/resnet: acc >= 0.89"], ["vision/resnet/r4"]) == [
        ("vision/resnet/r4", "fail", "acc = 0.88 not >= 0.89 (a fixed threshold)")]


def test_baselines_best_median_and_a_named_run():
    # best so far of the runs of the model that started before r4: r2's 0.90
    assert results(["*/*: acc >= best - 0.01"], ["vision/resnet/r4"])[0][1:] == ("fail", "acc = 0.88 not >= 0.89 (best so far)")
    assert results(["*/*: loss <= best * 1.2"], ["vision/resnet/r4"])[0][1] == "pass"  # lowest loss 0.40 * 1.2
    # median of the last 2 before r4 (r2 0.40, r3 0.45): 0.425 * 1.02 = 0.4335 < 0.46
    assert results(["*/*: loss <= baseline * 1.02"], ["vision/resnet/r4"], baseline="median(2)")[0][1:] == (
        "fail", "loss = 0.46 not <= 0.4335 (median of the last 2 runs)")
    assert results(["*/*: loss <= median(3) * 1.03"], ["vision/resnet/r4"])[0][1] == "pass"  # median 0.45 * 1.03 = 0.4635
    assert results(["*/*: acc >= run(vision/resnet/r1)"], ["vision/resnet/r4"])[0][1:] == ("pass", "acc = 0.88 >= 0.8 (run vision/resnet/r1)")
    assert results(["*/*: acc >= baseline"], ["vision/resnet/r4"], baseline="run(vision/resnet/r2)")[0][1] == "fail"


def test_missing_metric_and_missing_baseline():
    got = evaluate(GatesConfig(rules=("*/*: loss <= 1", "*/*: acc >= best")), ["vision/vit/v1", "vision/resnet/r1"], RUNS)
    assert got is not None
    assert [(r["run"], r["rule"], r["status"]) for r in got["results"]] == [
        ("vision/resnet/r1", "*/*: loss <= 1", "pass"),
        ("vision/resnet/r1", "*/*: acc >= best", "no_baseline"),  # the first run of its model
        ("vision/vit/v1", "*/*: loss <= 1", "missing"),
        ("vision/vit/v1", "*/*: acc >= best", "no_baseline"),
    ]
    assert got["counts"] == {"pass": 1, "fail": 0, "missing": 1, "no_baseline": 2} and got["failed"] == 1
    skip = evaluate(GatesConfig(rules=("*/*: loss <= 1",), missing="skip"), ["vision/vit/v1"], RUNS)
    assert skip is not None and skip["failed"] == 0 and skip["counts"]["missing"] == 1
    assert results(["*/*: acc >= run(no/such/run)"], ["vision/resnet/r4"])[0][1:] == ("no_baseline", "no baseline yet (run no/such/run not found)")


def test_selectors_match_part_by_part_and_only_new_runs_are_evaluated():
    r4 = RUNS[3]
    assert matches("vision/*", r4) and matches("*/*", r4) and matches("vision/resnet/r4", r4) and matches("*/*/r?", r4)
    assert not matches("*", r4) and not matches("nlp/*", r4) and not matches("vision", r4)
    assert results(["nlp/*: ppl <= 30", "vision/*: acc >= 0"], ["nlp/gpt/g1"]) == [("nlp/gpt/g1", "pass", "ppl = 20 <= 30 (a fixed threshold)")]
    assert evaluate(GatesConfig(), ["nlp/gpt/g1"], RUNS) is None  # no rule: no gates
    assert results(["*/*: acc >= 0"], []) == []  # nothing new: nothing to gate
