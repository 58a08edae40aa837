"""The one commit a run records: the key forms it is found under (tracker git fields, CI
variables, hyperparameters) and, end to end, runs written by the real W&B, MLflow, Comet, ClearML,
tensorboardX and VisualDL writers (the trackers in git repositories, whose commit from
``git rev-parse`` is the oracle). The commit survives a rebuild that reuses the runs from their
summaries."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sitegen.config import Config
from sitegen.ingest.api import read_runs
from sitegen.model import Commit, Environment
from sitegen.pipeline.build import BuildOptions, build
from sitegen.prepare.commits import commit_of
from tests.support import EXAMPLE
from tests.support.corpus import write_metrics
from tests.support.offline import git_repo

SHA = "3f786850e387550fdab836ed7e6dc881de23001b"


@pytest.mark.parametrize(
    "meta, env, hp, expected",
    [
        ({"tag:git.commit": SHA, "tag:git.branch": "main"}, {}, {}, Commit(SHA, None, "main", "git.commit")),
        ({"tag:mlflow.source.git.commit": SHA.upper(), "tag:mlflow.source.git.branch": "dev"}, {}, {},
         Commit(SHA, None, "dev", "mlflow.source.git.commit")),
        ({}, {"GITHUB_SHA": SHA, "GITHUB_REF": "refs/tags/v1.2"}, {}, Commit(SHA, "v1.2", None, "GITHUB_SHA")),
        ({}, {"env.GITHUB_SHA": SHA, "env.GITHUB_REF": "refs/heads/main"}, {}, Commit(SHA, None, "main", "env.GITHUB_SHA")),
        ({}, {"CI_COMMIT_SHA": SHA, "CI_COMMIT_TAG": "r7", "CI_COMMIT_BRANCH": "main"}, {}, Commit(SHA, "r7", "main", "CI_COMMIT_SHA")),
        ({}, {}, {"git_commit": SHA[:9] + "-dirty"}, Commit(SHA[:9], None, None, "git_commit")),
        ({}, {}, {"version": "v0.3.1-4-g" + SHA[:7]}, None),  # not a key that names a commit
        ({}, {}, {"git_describe": "x", "commit": "v0.3.1-4-g" + SHA[:7]}, Commit(SHA[:7], None, None, "commit")),
        ({}, {"model_revision": SHA, "dataset.revision": SHA}, {}, None),  # a model's or data set's revision is no commit
        ({}, {"GIT_COMMIT": "not a hash", "commit": "main"}, {}, None),
        # the tracker's own field wins over the environment, the environment over a hyperparameter
        ({"tag:git.commit": SHA}, {"GITHUB_SHA": "a" * 40}, {"git_commit": "b" * 40}, Commit(SHA, None, None, "git.commit")),
        ({}, {"GITHUB_SHA": "a" * 40}, {"git_commit": "b" * 40}, Commit("a" * 40, None, None, "GITHUB_SHA")),
    ],
)
def test_the_commit_is_found_under_its_names(meta, env, hp, expected):
    assert commit_of(meta, Environment(items=dict(env)), hp) == expected


WANDB = """
import wandb
run = wandb.init(mode="offline", dir=".", project="p", name="n", id="wb0001")
for i in range(5):
    run.log({"eval/acc": 0.5 + 0.01 * i}, step=i)
run.finish()
"""
MLFLOW = """
import mlflow
mlflow.set_tracking_uri("file:./mlruns")
with mlflow.start_run(run_name="r1"):
    for i in range(5):
        mlflow.log_metric("eval/acc", 0.5 + 0.01 * i, step=i)
"""


def write_in_repo(folder: Path, script: str) -> str:
    """Run ``script`` with the real writer inside a fresh git repository; its commit."""
    sha = git_repo(folder)
    (folder / "write_run.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "WANDB_", "MLFLOW_"))}
    env.update(HOME=str(folder.parent / f".{folder.name}-home"), WANDB_MODE="offline", WANDB_SILENT="true",
               MLFLOW_ALLOW_FILE_STORE="true", MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true")  # fmt: skip
    proc = subprocess.run([sys.executable, "write_run.py"], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return sha


def states(site: Path) -> dict[str, dict]:
    return {s["name"]: s for s in json.loads((site / "changes.json").read_text("utf-8"))["runs"]}


def test_real_writers_commits_reach_the_run_states_and_survive_a_rebuild(tmp_path: Path):
    logs = tmp_path / "logs"
    expected: dict[str, tuple[str | None, str | None, str | None]] = {}
    wb = write_in_repo(logs / "wandb", WANDB)
    ml = write_in_repo(logs / "mlflow", MLFLOW)
    for fmt in ("comet", "clearml"):  # the examples' runs, written by the real clients in a git repository
        shutil.copytree(EXAMPLE / fmt, logs / fmt)
    tagged = git_repo(tmp_path / "repo")
    for i, (kind, text) in enumerate([
        ("environment", f"GITHUB_SHA: {tagged}\nGITHUB_REF: refs/tags/v2.0"),
        ("config", json.dumps({"lr": 0.1, "git_commit": tagged[:9]})),
        ("env.json", json.dumps({"CI_COMMIT_SHA": tagged, "CI_COMMIT_BRANCH": "dev"})),
        ("env.json", json.dumps({"model_revision": tagged})),
    ]):  # fmt: skip
        run = logs / "tb" / "m" / f"r{i}"
        write_metrics(run, 0, 5, seed=i)
        if kind == "env.json":
            (run / "env.json").write_text(text)
        else:
            from tensorboardX import SummaryWriter

            w = SummaryWriter(str(run), filename_suffix=".text")
            w.add_text("environment" if kind == "environment" else "hyperparameters/config", text, 0)
            w.close()
    from visualdl import LogWriter

    for i, (text, hparams) in enumerate([(f"GIT_COMMIT: {tagged}\nGIT_BRANCH: release", None), (None, {"git_commit": tagged[:12]})]):
        with LogWriter(logdir=str(logs / "vdl" / "m" / f"r{i}")) as w:  # PaddlePaddle's writer
            for step in range(5):
                w.add_scalar("eval/acc", 0.5 + 0.01 * step, step)
            if text:
                w.add_text("environment", text, 0)
            if hparams:
                w.add_hparams({**hparams, "lr": 0.1}, ["eval/acc"])
    expected["vdl/m/r0"] = (tagged, None, "release")
    expected["vdl/m/r1"] = (tagged[:12], None, None)
    expected["tb/m/r0"] = (tagged, "v2.0", None)
    expected["tb/m/r1"] = (tagged[:9], None, None)
    expected["tb/m/r2"] = (tagged, None, "dev")
    expected["tb/m/r3"] = (None, None, None)
    read = {d.format: d for d in read_runs(logs) if d.format in ("wandb", "mlflow", "comet", "clearml")}
    assert read["wandb"].meta["tag:git.commit"] == wb and read["mlflow"].meta["tag:mlflow.source.git.commit"] == ml
    out, cache = tmp_path / "site", tmp_path / "cache"
    build(logs, out, BuildOptions(config=Config(), cache=cache))
    got = states(out)
    by_format = {}
    for d in read.values():
        (name,) = [n for n in got if n.startswith(d.format + "/")]
        by_format[d.format] = got[name]
    assert (by_format["wandb"]["commit"], by_format["wandb"]["commit_branch"]) == (wb, None)
    assert (by_format["mlflow"]["commit"], by_format["mlflow"]["commit_branch"]) == (ml, "master")
    assert by_format["comet"]["commit"] == read["comet"].meta["tag:git.commit"]
    assert by_format["comet"]["commit_branch"] == "master"  # (Comet records refs/heads/master)
    assert (by_format["clearml"]["commit"], by_format["clearml"]["commit_branch"]) == (read["clearml"].meta["tag:git.commit"], "master")
    assert {n: (s["commit"], s["commit_tag"], s["commit_branch"]) for n, s in got.items() if n.startswith(("tb/", "vdl/"))} == expected
    write_metrics(logs / "tb" / "m" / "r9", 0, 5, seed=9)  # a rebuild: the other runs come from their summaries
    build(logs, out, BuildOptions(config=Config(), cache=cache))
    again = states(out)
    assert {n: again[n] for n in got} == got and again["tb/m/r9"]["commit"] is None
