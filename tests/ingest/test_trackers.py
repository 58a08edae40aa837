"""The HF Trainer, Lightning, Keras and dvclive readers against files their real packages wrote.

The fixtures (``tests/fixtures/trackers/``) were written by ``make_fixtures.py`` with
transformers 5.25.0 (``TrainerState``), lightning 2.6.6 (``CSVLogger``), keras 3.15.1 (torch
backend, ``CSVLogger(append=True)``) and dvclive 3.49.1 / dvc 3.67.1 (``dvc repro``); the
versions are in ``expected.json`` beside what was logged. Every decoded value is compared with
what was logged, value by value.
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

from sitegen.ingest import READERS
from sitegen.ingest.api import read_runs
from sitegen.ingest.scan import scan
from sitegen.model import RUN_SCALARS_SCHEMA

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "trackers"
EXPECTED = json.loads((FIX / "expected.json").read_text())


def rows(run) -> list[tuple]:
    return list(zip(*(run.scalars.column(c).to_pylist() for c in ("tag", "step", "wall_time", "value"))))


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def assert_rows(got: list[tuple], want: list[tuple], wall: bool = False) -> None:
    """``want`` in logging order; the readers group the scalars by tag (in name order)."""
    want = sorted(want, key=lambda r: r[0])
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert g[0] == w[0] and g[1] == w[1] and same(g[3], w[3]), (g, w)
        if not wall:
            assert math.isnan(g[2]), g


def runs_of(folder: Path) -> list:
    found = scan(folder)
    return [(s, READERS[s.format].read(s)) for s in found]


# --------------------------------------------------------------------------------------------
# Hugging Face Trainer
# --------------------------------------------------------------------------------------------


def hf_expected(history: list[dict]) -> list[tuple]:
    out = []
    for row in history:
        if "train_runtime" in row:
            continue
        evaluation = any(k.startswith("eval_") for k in row)
        for key in sorted(row):  # TrainerState writes sorted keys
            if key == "step" or (evaluation and key == "epoch"):  # the epoch of an eval row repeats the train row's
                continue
            tag = "eval/" + key[5:] if key.startswith("eval_") else "train/" + key
            out.append((tag, row["step"], math.nan, row[key]))
    return out


def test_hf_trainer_state_values_summary_config(tmp_path):
    found = runs_of(FIX / "hftrainer")
    assert [(s.name, s.format) for s, _ in found] == [("out", "hftrainer")]
    source, run = found[0]
    assert run.scalars.schema == RUN_SCALARS_SCHEMA
    assert_rows(rows(run), hf_expected(EXPECTED["hftrainer"]))
    assert run.files[0].path == FIX / "hftrainer" / "out" / "trainer_state.json"
    summary = EXPECTED["hftrainer"][-1]
    assert {k: v for k, v in run.meta.items() if k.startswith("summary.")} == {
        f"summary.{k}": repr(float(v)) if isinstance(v, float) else str(v) for k, v in summary.items() if k != "step"
    }
    state = json.loads((FIX / "hftrainer" / "out" / "trainer_state.json").read_text())
    assert run.meta["best_metric"] == repr(state["best_metric"]) and run.meta["best_model_checkpoint"] == state["best_model_checkpoint"]
    assert run.hparams["model.hidden_size"] == 32.0 and run.hparams["model.model_type"] == "bert"
    assert run.hparams["train_batch_size"] == 8.0 and run.hparams["max_steps"] == 20.0
    assert not run.problems
    # NaN and Infinity written bare are values
    assert any(math.isinf(r[3]) for r in rows(run)) and any(math.isnan(r[3]) for r in rows(run))


def test_hf_highest_global_step_wins_and_damage_gives_way(tmp_path):
    out = tmp_path / "out"
    shutil.copytree(FIX / "hftrainer" / "out", out)
    (out / "trainer_state.json").unlink()
    (source,) = scan(tmp_path)
    assert sorted(p.relative_to(out).as_posix() for p in source.files) == [
        "checkpoint-10/config.json", "checkpoint-10/trainer_state.json",
        "checkpoint-20/config.json", "checkpoint-20/trainer_state.json", "config.json",
    ]  # fmt: skip
    run = READERS["hftrainer"].read(source)
    assert run.files[0].path == out / "checkpoint-20" / "trainer_state.json"
    assert_rows(rows(run), hf_expected(EXPECTED["hftrainer"]))
    # the newest checkpoint cut short: its intact rows, when more than the older checkpoint has
    data = (out / "checkpoint-20" / "trainer_state.json").read_bytes()
    old = json.loads((out / "checkpoint-10" / "trainer_state.json").read_text())["log_history"]
    cut = data.index(b'"eval_loss"', data.index(b'"step": 12'))
    (out / "checkpoint-20" / "trainer_state.json").write_bytes(data[:cut])
    run = READERS["hftrainer"].read(source)
    assert run.files[0].path == out / "checkpoint-20" / "trainer_state.json"
    full = json.loads(data)["log_history"]
    kept = full[: next(i for i, r in enumerate(full) if "eval_loss" in r and r["step"] == 20)]
    assert_rows(rows(run), hf_expected(kept))
    assert len(kept) > len(old)
    assert [(p.kind, p.path) for p in run.problems] == [("truncated", str(out / "checkpoint-20" / "trainer_state.json"))]
    assert run.problems[0].offset is not None and 0 < run.problems[0].offset <= cut


def test_hf_never_unpickles_training_args(tmp_path):
    out = tmp_path / "arch" / "out"
    shutil.copytree(FIX / "hftrainer" / "out", out)
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (out / "training_args.bin").write_bytes(pickle.dumps(Payload()))
    (out / "checkpoint-20" / "training_args.bin").write_bytes(pickle.dumps(Payload()))
    # the payload is live: unpickling it (in another process) creates the marker
    subprocess.run([sys.executable, "-c", f"import pickle; pickle.load(open({str(out / 'training_args.bin')!r}, 'rb'))"], check=True)
    assert marker.exists()
    marker.unlink()
    from sitegen.pipeline.build import BuildOptions, build

    build(tmp_path / "arch", tmp_path / "site", BuildOptions(use_cache=False))
    assert not marker.exists()
    assert (tmp_path / "site").is_dir()


# --------------------------------------------------------------------------------------------
# Lightning
# --------------------------------------------------------------------------------------------


def lightning_expected() -> list[tuple]:
    header = ["epoch", "step", "train_loss_epoch", "train_loss_step", "val_acc", "val_loss"]
    out, last = [], None
    for step, metrics in EXPECTED["lightning"]["rows"]:
        repeat = (step, metrics["epoch"]) == last  # epoch once per step: the logger adds it to every row
        last = (step, metrics["epoch"])
        out += [(k, step, math.nan, float(metrics[k])) for k in header if k in metrics and not (k == "epoch" and repeat)]
    return out


def test_lightning_csvlogger_values_and_python_tags():
    found = runs_of(FIX / "lightning")
    assert [(s.name, s.format) for s, _ in found] == [("lightning_logs/version_0", "lightning")]  # not also a CSV run
    _, run = found[0]
    assert b"\r\n" in (FIX / "lightning" / "lightning_logs" / "version_0" / "metrics.csv").read_bytes()
    assert_rows(rows(run), lightning_expected())
    assert b"!!python/" in (FIX / "lightning" / "lightning_logs" / "version_0" / "hparams.yaml").read_bytes()
    assert run.hparams == EXPECTED["lightning"]["hparams"]
    assert not run.problems


def test_lightning_yaml_tags_never_construct_objects(tmp_path):
    d = tmp_path / "version_0"
    d.mkdir()
    (d / "metrics.csv").write_text("epoch,step,loss\n0,0,1.5\n")
    marker = tmp_path / "pwned"
    (d / "hparams.yaml").write_text(
        f"a: !!python/object/apply:builtins.open [{str(marker)!r}, w]\n"
        f"b: !!python/object/new:builtins.open\n  args: [{str(marker)!r}, w]\n"
        "c: !!python/name:os.system ''\nd: 1\n"
    )
    (source,) = scan(tmp_path)
    run = READERS["lightning"].read(source)
    assert not marker.exists()
    assert run.hparams == {"a": "builtins.open", "b": "builtins.open", "c": "os.system", "d": 1.0}
    assert_rows(rows(run), [("epoch", 0, math.nan, 0.0), ("loss", 0, math.nan, 1.5)])


# --------------------------------------------------------------------------------------------
# Keras
# --------------------------------------------------------------------------------------------


def test_keras_csvlogger_append_gives_one_run_per_fit():
    found = runs_of(FIX / "keras")
    assert [(s.name, s.format) for s, _ in found] == [("training.log", "keras"), ("training.log#2", "keras")]
    for (_, run), history in zip(found, EXPECTED["keras"]):
        keys = sorted(history)
        n = len(history["loss"])
        want = [(k, e, math.nan, history[k][e]) for e in range(n) for k in keys]
        assert_rows(rows(run), want)
        assert not run.problems
    assert "val_loss" not in {r[0] for r in rows(found[0][1])}  # NA is no value


def test_keras_is_told_from_other_csv_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "h.csv").write_text("epoch,loss\n0,1\n1,0.5\n")  # Keras
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "m.csv").write_text("epoch,loss\n0.5,1\n1.0,2\n")  # fractional epochs: generic CSV
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "m.csv").write_text("step,loss\n0,1\n")
    assert [(s.name, s.format) for s in scan(tmp_path)] == [("a/h.csv", "keras"), ("b", "tabular"), ("c", "tabular")]


# --------------------------------------------------------------------------------------------
# dvclive
# --------------------------------------------------------------------------------------------


def test_dvclive_metrics_params_summary_and_dvc_lock_provenance():
    found = runs_of(FIX / "dvclive")
    assert [(s.name, s.format) for s, _ in found] == [("dvclive", "dvclive")]
    _, run = found[0]
    exp = EXPECTED["dvclive"]
    got = rows(run)
    want = [(tag, i, math.nan, v) for tag in ("train/loss", "train/lr", "val/acc") for i, v in enumerate(exp[tag])]
    assert_rows([(t, s, math.nan, v) for t, s, _, v in got], want)
    tsv = (FIX / "dvclive" / "dvclive" / "plots" / "metrics" / "train" / "loss.tsv").read_text().splitlines()
    assert [g[2] for g in got[: len(tsv) - 1]] == [int(line.split("\t")[0]) / 1000 for line in tsv[1:]]
    assert run.hparams == exp["params"]
    assert {k: v for k, v in run.meta.items() if k.startswith("summary.")} == {
        "summary.train/loss": repr(exp["train/loss"][-1]),
        "summary.train/lr": repr(exp["train/lr"][-1]),
        "summary.val/acc": repr(exp["val/acc"][-1]),
        "summary.best/acc": repr(exp["summary"]["best/acc"]),
    }
    data = (FIX / "dvclive" / "data" / "train.txt").read_bytes()
    md5 = hashlib.md5(data).hexdigest()
    assert run.meta["tag:dvc.lock train deps data/train.txt"] == f"md5 {md5} · {len(data)} bytes"
    assert run.meta["tag:dvc.lock train cmd"] == "python train.py"
    assert run.meta["tag:dvc.lock train params params.yaml:train.lr"] == "0.05"
    assert not run.problems


def test_dvclive_provenance_reaches_the_run_page(tmp_path):
    from sitegen.pipeline.build import BuildOptions, build

    shutil.copytree(FIX / "dvclive", tmp_path / "arch" / "repo")
    build(tmp_path / "arch", tmp_path / "site", BuildOptions(use_cache=False))
    (page,) = [p for p in (tmp_path / "site").rglob("index.html") if p.parent.parent.name == "runs"]
    html = page.read_text()
    md5 = hashlib.md5((FIX / "dvclive" / "data" / "train.txt").read_bytes()).hexdigest()
    assert 'id="environment"' in html and md5 in html and "python train.py" in html


def test_read_scalars_takes_every_tracker(tmp_path):
    from sitegen import read_scalars

    for name in ("hftrainer", "lightning", "keras", "dvclive"):
        shutil.copytree(FIX / name, tmp_path / name)
    table = read_scalars(tmp_path)
    runs = set(table.column("run").to_pylist())
    assert runs == {"hftrainer/out", "lightning/lightning_logs/version_0", "keras/training.log", "keras/training.log#2", "dvclive/dvclive"}
    assert table.num_rows == sum(r.scalars.num_rows for r in read_runs(tmp_path))


def test_hf_fast_path_equals_the_reference(tmp_path):
    """The pyarrow.json path gives what the row-by-row path gives, on every state the writer made."""
    import numpy as np

    from sitegen.ingest import hftrainer

    for path in sorted((FIX / "hftrainer").rglob("trainer_state.json")):
        data = path.read_bytes()
        state = hftrainer._fast(np.frombuffer(bytearray(data), np.uint8))
        assert state is not None, path
        fast, fast_summary = hftrainer._table_scalars(state["log_history"])
        ref, ref_summary = hftrainer._scalars(json.loads(data)["log_history"])
        assert fast_summary == ref_summary
        assert_rows(rows(type("R", (), {"scalars": fast})), rows(type("R", (), {"scalars": ref})))


def test_hf_fast_path_in_halves_equals_the_reference():
    """A state large enough to be parsed in two halves gives what the row-by-row path gives: a
    key only in the second half, eval rows, and a key whose ints turn into floats after the middle
    (the halves' columns disagree: parsed again as one object)."""
    import numpy as np

    from sitegen.ingest import hftrainer

    for flip in (None, 2500):
        history = []
        for i in range(1, 3001):
            row = {"epoch": i / 100, "learning_rate": 1e-4 * (1 - i / 3000), "loss": 1 / i, "step": i}
            if flip is not None:
                row["flos"] = i if i < flip else i + 0.5
            if i > 2900:
                row["late"] = -i
            history.append(row)
            if i % 10 == 0:
                history.append({"epoch": i / 100, "eval_loss": 2 / i, "step": i})
        data = json.dumps({"global_step": 3000, "log_history": history}, indent=2, sort_keys=True).encode()
        buf = np.frombuffer(bytearray(data), np.uint8)
        state = hftrainer._fast(buf)
        assert state is not None and buf.tobytes() == data
        assert state["log_history"].num_rows == len(history)
        fast, _ = hftrainer._table_scalars(state["log_history"])
        ref, _ = hftrainer._scalars(history)
        assert_rows(rows(type("R", (), {"scalars": fast})), rows(type("R", (), {"scalars": ref})))


def test_lightning_second_header_is_the_header_of_the_rows_after_it(tmp_path):
    """A metrics.csv appended to by a second session: its rows follow their own header."""
    d = tmp_path / "version_0"
    d.mkdir()
    first = (FIX / "lightning" / "lightning_logs" / "version_0" / "metrics.csv").read_bytes()
    (d / "metrics.csv").write_bytes(first + b"epoch,step,zeta\r\n5,100,0.5\r\n5,101,oops\r\n")
    (d / "hparams.yaml").write_text("lr: 0.1\n")
    (source,) = scan(tmp_path)
    run = READERS["lightning"].read(source)
    got = rows(run)
    assert_rows([r for r in got if r[1] < 100], lightning_expected())
    assert_rows([r for r in got if r[1] >= 100], [("epoch", 100, math.nan, 5.0), ("zeta", 100, math.nan, 0.5), ("epoch", 101, math.nan, 5.0)])
    ((kind, offset),) = [(p.kind, p.offset) for p in run.problems]
    assert kind == "bad-value" and offset == len(first) + len(b"epoch,step,zeta\r\n5,100,0.5\r\n")


def test_yaml_reader_equals_pyyaml_on_what_safe_dump_writes():
    """What loggers write with ``yaml.dump``/``safe_dump`` (block style) reads back as PyYAML reads it."""
    import yaml
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from sitegen.ingest import yamlish

    keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12)
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False, width=64),
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
    )  # fmt: skip
    docs = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)), max_leaves=20)

    @settings(max_examples=150, deadline=None, derandomize=True)
    @given(st.dictionaries(keys, docs, min_size=1, max_size=5), st.booleans())
    def check(doc, unicode):
        text = yaml.safe_dump(doc, default_flow_style=False, allow_unicode=unicode, sort_keys=True)
        value, problem = yamlish.load(text)
        assert problem is None, text
        assert value == yaml.safe_load(text), text

    check()
