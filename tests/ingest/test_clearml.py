"""The ClearML reader against offline sessions written by the real ``clearml`` client
(``Task.set_offline(True)``). The spec in this file is what was logged: every decoded value is
compared with it, value by value; NaN and inf arrive as 0.0, as ClearML writes them.
Damage: a partial last line (a session still being written), a bad line, a zip cut short.
"""

from __future__ import annotations

import math
import shutil
import socket
from pathlib import Path

import pytest

from sitegen.ingest import READERS
from sitegen.ingest.scan import scan
from sitegen.model import RUN_SCALARS_SCHEMA
from tests.support.offline import git_repo, write

HOSTILE = "</script><img src=x onerror=alert(1)>"
SPEC = {
    "project": "proj " + HOSTILE,
    "name": "task " + HOSTILE,
    "tags": ["a", HOSTILE],
    "detect_repository": False,  # clearml's repository scan hung (fork from a thread) under load here
    "params": {"lr": 0.1, "epochs": 3, "nested": {"k": HOSTILE}, "flag": True},
    "metrics": [
        *[[m, v, 1.0 / (i + 1) * (2 if v == "val" else 1), i] for i in range(5) for m, v in (("loss", "train"), ("loss", "val"))],
        ["loss", "train", "nan", 5],
        ["acc", "acc", "inf", 5],
        ["acc", HOSTILE, 0.25, 6],
    ],
}


def expected_rows(spec: dict) -> list[tuple]:
    rows = []
    for metric, variant, value, it in spec["metrics"]:
        v = float(value)
        rows.append((f"{metric}/{variant}", it, 0.0 if math.isnan(v) or math.isinf(v) else v))  # ClearML's 0.0
    return sorted(rows, key=lambda r: r[0])


def rows(run) -> list[tuple]:
    return list(zip(*(run.scalars.column(c).to_pylist() for c in ("tag", "step", "value"))))


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("clearml")
    commit = git_repo(root / "proj")
    write("clearml", root / "proj", SPEC)
    session = next((root / "proj" / "clearml-cache" / "offline").glob("offline-*/"))
    return session, commit


def copy_session(session: Path, tmp: Path, *, with_zip: bool = False) -> Path:
    dst = tmp / "archive" / session.name
    shutil.copytree(session, dst)
    if with_zip:
        shutil.copy(session.with_suffix(".zip"), dst.with_suffix(".zip"))
    return dst


def test_values_params_and_run_info(written, tmp_path):
    session, commit = written
    folder = copy_session(session, tmp_path, with_zip=True)
    found = scan(tmp_path / "archive")
    assert [(s.name, s.format) for s in found] == [(folder.name, "clearml")]  # the zip beside its folder is not a second run
    run = READERS["clearml"].read(found[0])
    assert run.scalars.schema == RUN_SCALARS_SCHEMA
    assert rows(run) == expected_rows(SPEC)
    walls = run.scalars.column("wall_time").to_pylist()
    assert all(float(run.meta["start_time"]) - 1 <= w <= float(run.meta["start_time"]) + 600 for w in walls)
    assert run.hparams == {"General/lr": 0.1, "General/epochs": 3.0, "General/nested/k": HOSTILE, "General/flag": True}
    assert run.meta["title"] == SPEC["name"] and run.meta["experiment"] == SPEC["project"]
    assert run.meta["tags"] == ", ".join(sorted(SPEC["tags"]))
    assert "tag:git.commit" not in run.meta  # (repository detection off: see test_git_commit_of_the_example_run)
    assert run.meta["tag:host"] == socket.gethostname()
    assert "0.0" in run.meta["note"]
    assert run.problems == []


def test_zip_alone_reads_like_the_folder(written, tmp_path):
    session, _ = written
    folder = copy_session(session, tmp_path, with_zip=True)
    want = READERS["clearml"].read(scan(tmp_path / "archive")[0])
    shutil.rmtree(folder)
    (source,) = scan(tmp_path / "archive")
    assert source.files == (folder.with_suffix(".zip"),)
    run = READERS["clearml"].read(source)
    assert rows(run) == rows(want) and run.hparams == want.hparams and run.problems == []
    assert run.scalars.column("wall_time").to_pylist() == want.scalars.column("wall_time").to_pylist()
    data = source.files[0].read_bytes()
    source.files[0].write_bytes(data[: len(data) // 2])
    cut = READERS["clearml"].read(source)
    assert cut.problems[0].kind == "truncated"  # and the member it cut, when it is not JSON lines
    assert [p.kind for p in cut.problems[1:]] in ([], ["bad-record"])
    assert {repr(r) for r in rows(cut)} <= {repr(r) for r in rows(want)}


def test_partial_last_line_is_left_for_the_next_build(written, tmp_path):
    folder = copy_session(written[0], tmp_path)
    metrics = folder / "metrics.jsonl"
    whole = metrics.read_bytes()
    extra = b'[{"timestamp": 1, "type": "training_stats_scalar", "iter": 99, "metric": "loss", "variant": "train", "value": 9.0}]\n'
    metrics.write_bytes(whole + extra[:40])
    (source,) = scan(tmp_path / "archive")
    run = READERS["clearml"].read(source)
    assert run.problems == []  # a live session: not a problem under --strict
    assert rows(run) == expected_rows(SPEC)
    (f,) = [f for f in run.files if f.path.name == "metrics.jsonl"]
    assert (f.size, f.decoded_bytes) == (len(whole) + 40, len(whole))
    metrics.write_bytes(whole + extra)
    assert ("loss/train", 99, 9.0) in rows(READERS["clearml"].read(source))


def test_bad_line_in_the_middle_keeps_the_later_lines(written, tmp_path):
    folder = copy_session(written[0], tmp_path)
    metrics = folder / "metrics.jsonl"
    whole = metrics.read_bytes()  # the client writes a batch of events per line: here all in one
    later = b'[{"timestamp": 1, "type": "training_stats_scalar", "iter": 99, "metric": "loss", "variant": "train", "value": 9.0}]\n'
    metrics.write_bytes(whole + b'[{"timestamp": 1, "type": "training_stats_scalar", "iter": 7, "metric"\x00 garbage\n' + later)
    run = READERS["clearml"].read(scan(tmp_path / "archive")[0])
    assert [(p.kind, p.offset) for p in run.problems] == [("bad-record", len(whole))]
    assert rows(run) == sorted(expected_rows(SPEC) + [("loss/train", 99, 9.0)], key=lambda r: r[0])


def test_git_commit_of_the_example_run():
    """The example run was written with repository detection on, in a git repository."""
    (source,) = scan(Path(__file__).resolve().parents[2] / "examples" / "archive" / "clearml")
    run = READERS["clearml"].read(source)
    assert len(run.meta["tag:git.commit"]) == 40 and int(run.meta["tag:git.commit"], 16) >= 0
    assert run.meta["tag:git.remote"] == "https://example.com/team/repo.git" and run.meta["tag:git.branch"] == "master"
    assert run.problems == [] and run.scalars.num_rows == 70


def test_a_git_tag_in_the_script_section_is_read(tmp_path):
    """``script.tag`` (set when the task ran on a tagged commit) beside the commit and branch."""
    import json

    session = next(p for p in (Path(__file__).resolve().parents[2] / "examples" / "archive" / "clearml").rglob("task.json")).parent
    copy = tmp_path / "archive" / session.name
    shutil.copytree(session, copy)
    task = json.loads((copy / "task.json").read_text("utf-8"))
    task["script"]["tag"] = "v2.1"
    (copy / "task.json").write_text(json.dumps(task), "utf-8")
    run = READERS["clearml"].read(scan(tmp_path / "archive")[0])
    assert run.meta["tag:git.tag"] == "v2.1" and run.meta["tag:git.commit"] == task["script"]["version_num"]
