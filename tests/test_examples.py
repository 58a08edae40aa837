"""The bundled example archive holds one run of every format, and each reads as its own tools read it.

``examples/make_archive.py`` writes tensorboardX runs plus one VisualDL run, an MLflow file store,
a CSV and a JSON-lines run. These tests check that sitegen finds and builds all of them without a
problem, that the values sitegen reads are the values each format's reference reader returns
(``visualdl.LogReader``, ``mlflow.tracking.MlflowClient``, the ``csv`` and ``json`` modules), and
that the script is deterministic.
"""
from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sitegen
from sitegen.config import Config
from sitegen.model import slug as slugify
from sitegen.pipeline.build import BuildOptions, build
from tests.support import EXAMPLE, ROOT
from tests.support.sites import index_data

VISUALDL_RUN = "paddle/ernie-tiny/2024-06-20_09-00-00"
MLFLOW_STORE = "mlflow/mlruns"
CSV_RUN = "tabular/xgboost/2024-07-01_12-00-00"
JSONL_RUN = "tabular/lightgbm/2024-07-02_12-00-00"
FORMATS = ("tfevents", "visualdl", "mlflow", "tabular", "comet", "clearml", "neptune")


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _assert_series_equal(got: list[tuple], want: list[tuple], what: str) -> None:
    """Lists of tuples whose last item is a float (NaN equals NaN); the rest compared exactly."""
    assert len(got) == len(want), f"{what}: {len(got)} records, the reference reader gives {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g[:-1] == w[:-1] and _same(g[-1], w[-1]), f"{what}: record {i} is {g}, the reference reader gives {w}"


def _series(run, tag: str, fields=("step", "wall_time", "value")) -> list[tuple]:
    import pyarrow.compute as pc

    t = run.scalars.filter(pc.equal(run.scalars.column("tag"), tag))
    return list(zip(*(t.column(f).to_pylist() for f in fields)))


@pytest.fixture(scope="module")
def runs() -> dict:
    return {r.name: r for r in sitegen.read_runs(EXAMPLE)}


# ---------------------------------------------------------------------------------------------
# (a) every format is found


def test_every_format_has_a_run(runs):
    formats = {name: r.format for name, r in runs.items()}
    assert set(formats.values()) >= set(FORMATS), sorted(set(formats.values()))
    assert formats[VISUALDL_RUN] == "visualdl"
    assert formats[CSV_RUN] == "tabular" and formats[JSONL_RUN] == "tabular"
    mlflow_runs = sorted(n for n, f in formats.items() if f == "mlflow")
    assert len(mlflow_runs) == 3 and all(n.startswith(MLFLOW_STORE + "/1/") for n in mlflow_runs), mlflow_runs
    assert any(n.startswith(("vision/", "nlp/")) and f == "tfevents" for n, f in formats.items())
    for name, run in runs.items():
        assert run.problems == [], f"{name}: {run.problems}"
        assert run.scalars.num_rows > 0, name


# ---------------------------------------------------------------------------------------------
# (b) the mixed archive builds with zero problems, one run of each format on the index


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("examples") / "site"
    result = build(EXAMPLE, out, BuildOptions(config=Config(), use_cache=False))
    return out, result


def test_mixed_archive_builds_without_problems(site):
    out, result = site
    assert [(p.kind, p.path, p.message) for p in result.problems] == []
    report = json.loads((out / "build-report.json").read_text("utf-8"))
    assert report["problems"] == 0 and report["items"] == []


def test_index_lists_a_run_of_each_format(site, runs):
    out, _ = site
    data = index_data(out)
    listed = {row[0] for row in data["runs"]}
    page = (out / "index.html").read_text("utf-8")
    by_format: dict[str, list[str]] = {}
    for name, run in runs.items():
        if slugify(name) in listed:
            by_format.setdefault(run.format, []).append(name)
    assert set(by_format) >= set(FORMATS), by_format
    for name in (VISUALDL_RUN, CSV_RUN, JSONL_RUN, *(n for n in runs if n.startswith(MLFLOW_STORE))):
        slug = slugify(name)
        assert slug in listed, name
        assert f'href="runs/{slug}/index.html"' in page, name
        assert (out / "runs" / slug / "index.html").is_file(), name
    # the MLflow runs are shown under their experiment's name, the VisualDL run under its display name
    rows = {row[0]: row for row in data["runs"]}
    assert rows[slugify(VISUALDL_RUN)][2] == "ernie-tiny · ChnSentiCorp"
    mlflow_rows = [rows[slugify(n)] for n in runs if n.startswith(MLFLOW_STORE)]
    assert {r[1][0] for r in mlflow_rows} == {"tabular-baselines"}
    assert sorted(r[2] for r in mlflow_rows) == ["gbdt-depth4", "gbdt-depth8", "gbdt-depth8-cv"]


# ---------------------------------------------------------------------------------------------
# (c) values match each format's reference reader


def test_visualdl_run_matches_logreader(runs):
    from visualdl import LogReader

    run = runs[VISUALDL_RUN]
    files = sorted((EXAMPLE / VISUALDL_RUN).glob("vdlrecords*"))
    assert len(files) == 2, "the example VisualDL run is a restart: two vdlrecords files"
    assert [Path(f.path).name for f in run.files] == [f.name for f in files]
    want: dict[str, list[tuple]] = {}
    texts, images, histograms, names = [], [], [], set()
    for f in files:  # VisualDL itself shows only the newest file of a folder: read each one
        reader = LogReader(file_path=str(f))
        tags = reader.get_tags()
        for tag in tags["scalar"]:
            want.setdefault(tag, []).extend(
                (v.id, v.timestamp / 1000.0, float(v.value)) for v in reader.get_data("scalar", tag))
        for tag in tags.get("text", []):
            texts += [(tag, v.id, v.text.encoded_text_string) for v in reader.get_data("text", tag)]
        for tag in tags.get("image", []):
            images += [(tag, v.id, v.image.encoded_image_string) for v in reader.get_data("image", tag)]
        for tag in tags.get("histogram", []):
            histograms += [(tag, v.id, list(v.histogram.hist)) for v in reader.get_data("histogram", tag)]
        names |= set(reader.tags2name.values())
    got_tags = sorted(set(run.scalars.column("tag").to_pylist()))
    assert got_tags == sorted(want) == ["eval/accuracy", "eval/loss", "train/loss", "train/lr"]
    for tag, series in want.items():
        _assert_series_equal(_series(run, tag), series, tag)
    losses = [v for _, _, v in want["train/loss"]]
    assert sum(math.isnan(v) for v in losses) == 1
    steps = [s for s, _, _ in want["train/loss"]]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)  # resumed after the checkpoint
    assert names == {run.meta["title"]} == {"ernie-tiny · ChnSentiCorp"}
    assert sorted((t.tag, t.step, t.text) for t in run.texts) == sorted(texts) and texts
    assert sorted((i.tag, i.step) for i in run.images) == sorted((t, s) for t, s, _ in images) and images
    assert sorted(hashlib.sha256(i.data).hexdigest() for i in run.images) == \
        sorted(hashlib.sha256(b).hexdigest() for _, _, b in images)
    assert sorted((h.tag, h.step) for h in run.histograms) == sorted((t, s) for t, s, _ in histograms)
    assert len(histograms) >= 2
    assert run.hparams["lr"] == pytest.approx(5e-5) and run.hparams["batch_size"] == 32


@pytest.fixture()
def mlflow_copy(tmp_path, monkeypatch) -> Path:
    """A copy of the example store (mlflow may write to a store it opens), mlflow set to use it."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DO_NOT_TRACK", "true")
    copy = tmp_path / "elsewhere" / "mlruns"
    shutil.copytree(EXAMPLE / MLFLOW_STORE, copy)
    # git keeps no empty folders, and MLflow refuses a run without its (empty) artifacts folder
    for meta in copy.glob("*/*/meta.yaml"):
        (meta.parent / "artifacts").mkdir(exist_ok=True)
    (copy / ".trash").mkdir(exist_ok=True)
    return copy


def test_mlflow_store_matches_mlflow_client(runs, mlflow_copy, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_copy.as_uri())
    exp = client.get_experiment_by_name("tabular-baselines")
    assert exp is not None and exp.experiment_id == "1"
    found = client.search_runs([exp.experiment_id])
    assert sorted(r.info.run_name for r in found) == ["gbdt-depth4", "gbdt-depth8", "gbdt-depth8-cv"]
    ours = {r.meta["run_id"]: r for r in runs.values() if r.format == "mlflow"}
    assert sorted(ours) == sorted(r.info.run_id for r in found)
    names = {r.meta["run_id"]: n for n, r in runs.items() if r.format == "mlflow"}
    for mr in found:
        run = ours[mr.info.run_id]
        assert run.meta["title"] == mr.info.run_name
        assert run.meta["experiment"] == "tabular-baselines"
        assert run.meta["status"] == mr.info.status == "FINISHED"
        assert float(run.meta["start_time"]) * 1000 == mr.info.start_time
        assert float(run.meta["end_time"]) * 1000 == mr.info.end_time
        assert run.hparams == mr.data.params and {"lr", "depth"} <= set(run.hparams)
        assert {k[4:]: v for k, v in run.meta.items() if k.startswith("tag:")} == mr.data.tags
        assert sorted(set(run.scalars.column("tag").to_pylist())) == sorted(mr.data.metrics)
        for key in mr.data.metrics:
            history = client.get_metric_history(mr.info.run_id, key)
            want = [(m.step, m.timestamp / 1000.0, m.value) for m in history]
            _assert_series_equal(_series(run, key), want, f"{mr.info.run_name}: {key}")
            assert len(want) >= 1
        # relocatable: no absolute path was left in the store
        assert not mr.info.artifact_uri.startswith(("/", "file:")), mr.info.artifact_uri
    by_name = {r.info.run_name: r for r in found}
    parent, child = by_name["gbdt-depth8"], by_name["gbdt-depth8-cv"]
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert ours[child.info.run_id].meta["parent_run"] == names[parent.info.run_id]
    assert by_name["gbdt-depth4"].data.tags["model_family"] == "gbdt"
    assert len(client.get_metric_history(parent.info.run_id, "train/logloss")) == 160

    # the artifact: sitegen lists <run>/artifacts; mlflow resolves the relative artifact_uri
    # ("./mlruns/...") from the folder that holds mlruns/, wherever the store was moved to
    monkeypatch.chdir(mlflow_copy.parent)
    for mr in (by_name["gbdt-depth4"], parent):
        listed = [a.path for a in client.list_artifacts(mr.info.run_id, "notes")]
        assert listed == ["notes/summary.md"]
        local = Path(client.download_artifacts(mr.info.run_id, "notes/summary.md", str(tmp_path)))
        data = local.read_bytes()
        assert data.startswith(f"# {mr.info.run_name}\n".encode())
        (artifact,) = ours[mr.info.run_id].artifacts
        assert artifact.path == "artifacts/notes/summary.md"
        assert artifact.size == len(data) and artifact.sha256 == hashlib.sha256(data).hexdigest()


def test_mlflow_store_holds_no_absolute_path_nor_random_id():
    store = EXAMPLE / MLFLOW_STORE
    for path in store.rglob("*"):
        if path.is_file():
            text = path.read_text("utf-8")
            assert "file://" not in text and "/tmp" not in str(text) and str(ROOT) not in text, path
    metas = {p.parent.name: p.read_text("utf-8") for p in store.glob("*/*/meta.yaml")}
    assert len(metas) == 3
    for run_id, meta in metas.items():
        assert f"run_id: {run_id}\n" in meta and f"artifact_uri: ./mlruns/1/{run_id}/artifacts\n" in meta
        assert "experiment_id: '1'\n" in meta and "user_id: example\n" in meta


def test_csv_run_matches_csv_module(runs):
    run = runs[CSV_RUN]
    with open(EXAMPLE / CSV_RUN / "metrics.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["step", "train_loss", "valid_auc"]
    want = [(col, int(r["step"]), float(r[col])) for r in rows for col in ("train_loss", "valid_auc") if r[col] != ""]
    empty = sum(r[col] == "" for r in rows for col in ("train_loss", "valid_auc"))
    assert 2 <= empty <= 5, "the example CSV has a few empty cells"
    got = list(zip(*(run.scalars.column(c).to_pylist() for c in ("tag", "step", "value"))))
    _assert_series_equal(got, want, "metrics.csv")
    assert all(math.isnan(w) for w in run.scalars.column("wall_time").to_pylist())  # no time column


def test_jsonl_run_matches_json_module(runs):
    run = runs[JSONL_RUN]
    lines = (EXAMPLE / JSONL_RUN / "metrics.jsonl").read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert len({frozenset(r) for r in records}) >= 3, "keys differ from line to line"
    want = [(k, r["step"], r["timestamp"], float(v)) for r in records for k, v in r.items()
            if k not in ("step", "timestamp")]
    assert sum(math.isnan(v) for *_, v in want) == 1
    got = list(zip(*(run.scalars.column(c).to_pylist() for c in ("tag", "step", "wall_time", "value"))))
    _assert_series_equal(got, want, "metrics.jsonl")


# ---------------------------------------------------------------------------------------------
# the script


#: example projects written by tests/fixtures/trackers/make_fixtures.py with the real packages
#: (transformers, lightning, keras, dvclive: too heavy to install for make_archive.py)
TRACKER_PROJECTS = ("hf", "lightning", "keras", "dvclive", "wandb")  # committed, written by the real packages
#: written by tests/fixtures/trackers/make_offline.py with comet_ml, clearml and neptune 1.x
TRACKER_PROJECTS += ("comet", "clearml", "neptune")


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_make_archive_is_deterministic_and_matches_the_example(tmp_path):
    script = ROOT / "examples" / "make_archive.py"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
    (tmp_path / "b").mkdir()
    for out, cwd in ((tmp_path / "a" / "archive", tmp_path), (Path("archive"), tmp_path / "b")):
        r = subprocess.run([sys.executable, str(script), str(out)], cwd=cwd, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    a, b = _tree(tmp_path / "a" / "archive"), _tree(tmp_path / "b" / "archive")
    assert sorted(a) == sorted(b)
    assert [rel for rel in a if a[rel] != b[rel]] == []
    # the committed example is the script's output (same files; the plain-text ones byte for byte)
    assert sorted(a) == sorted(k for k in _tree(EXAMPLE) if k.split("/")[0] not in TRACKER_PROJECTS)
    for rel in (f"{CSV_RUN}/metrics.csv", f"{JSONL_RUN}/metrics.jsonl"):
        assert a[rel] == (EXAMPLE / rel).read_bytes(), rel


def test_example_archive_is_small():
    size = sum(p.stat().st_size for p in EXAMPLE.rglob("*") if p.is_file())
    assert size < 2 * 1024 * 1024
