"""The MLflow file-store reader against stores written by the real ``mlflow`` client.

Every value the reader returns is compared with what ``MlflowClient`` reads back from the same
store (metric histories, params, tags, run info, artifacts). mlflow is a test dependency only.
"""
from __future__ import annotations

import hashlib
import math
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # mlflow ≥ 3.17 refuses file stores otherwise

import mlflow  # noqa: E402
import yaml  # noqa: E402  (installed with mlflow; the reader itself never imports it)
from mlflow.entities import Metric, ViewType  # noqa: E402
from mlflow.store.tracking.file_store import FileStore  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from sitegen.ingest import mlflow as reader  # noqa: E402
from sitegen.model import RUN_SCALARS_SCHEMA, ReadOptions  # noqa: E402

WEIRD_NAMES = [
    "训练-1 中文",
    "a: b",
    "'q'",
    '"dq"',
    "# hash",
    "null",
    "123",
    "true",
    "~",
    "line\nbreak",
    " lead and trail ",
    "tab\there",
    "é ü 😀",
    "- dash",
    "{b}",
    "ends:",
    "x" * 30 + " " + "y y " * 30 + "end",
    "a " * 60,
    "odd\u2028sep\x85nel",
    "back\\slash",
]


def same(a: float, b: float) -> bool:
    """Equal, NaN equal to NaN, and -0.0 told apart from 0.0."""
    return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))


def client_for(root: Path) -> MlflowClient:
    return MlflowClient(tracking_uri="file://" + str(root))


# --------------------------------------------------------------------------------------------
# the store written by the real client
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    archive = tmp_path_factory.mktemp("archive")
    root = archive / "mlruns"
    client = client_for(root)
    info: dict = {"archive": archive, "root": root, "client": client}

    exp = client.create_experiment("实验 A: 中文", tags={"team": "视觉", "note": "multi\nline"})
    info["exp"] = exp
    rng = np.random.default_rng(7)

    # a run with every kind of value
    r1 = client.create_run(exp, run_name="训练-1 中文", tags={"k": "v: x", "multi": "l1\nl2", "nested/tag": "n"})
    rid = r1.info.run_id
    values = [1.5, math.nan, math.inf, -math.inf, -0.0, 1e-310, 1.7976931348623157e308, -2.5e-8]
    for i, v in enumerate(values):
        client.log_metric(rid, "loss", v, timestamp=1_700_000_000_000 + i, step=i - 1)  # step -1 first
    client.log_metric(rid, "train/acc", 0.25, step=3)
    client.log_metric(rid, "train/acc", 0.5, step=3)  # same step twice: both kept
    client.log_metric(rid, "a/b/c", 7.0, step=10**12, timestamp=0)
    batch = [Metric("bulk", float(x), 1_700_000_000_000 + i, i) for i, x in enumerate(rng.standard_normal(3000))]
    for start in range(0, len(batch), 1000):
        client.log_batch(rid, metrics=batch[start : start + 1000])
    client.log_param(rid, "lr", "0.10")
    client.log_param(rid, "opt/name", "adam w")
    client.log_param(rid, "中文参数", "值")
    client.log_param(rid, "long", "z" * 500)
    client.set_tag(rid, "late", "set later")
    client.log_text(rid, "some text 中文", "notes/a.txt")
    client.log_dict(rid, {"a": [1, 2]}, "cfg.json")
    src = archive.parent / (archive.name + "-src.bin")
    src.write_bytes(bytes(range(256)) * 10)
    client.log_artifact(rid, str(src), "bin")
    client.set_terminated(rid, "FINISHED")
    info["r1"] = rid
    info["artifact_bytes"] = {
        "artifacts/notes/a.txt": "some text 中文".encode(),
        "artifacts/bin/" + src.name: bytes(range(256)) * 10,
    }

    # parent and child with the fluent API (nested=True)
    previous_uri = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri("file://" + str(root))
    try:
        mlflow.set_experiment(experiment_id=exp)
        with mlflow.start_run(run_name="parent") as parent:
            mlflow.log_metric("p", 1.0)
            with mlflow.start_run(run_name="child", nested=True) as child:
                mlflow.log_metric("c", 2.0, step=5)
                mlflow.log_param("depth", 1)
    finally:
        mlflow.set_tracking_uri(previous_uri)
    info["parent"], info["child"] = parent.info.run_id, child.info.run_id

    failed = client.create_run(exp, run_name="failed")
    client.log_metric(failed.info.run_id, "loss", 3.0, step=0)
    client.set_terminated(failed.info.run_id, "FAILED")
    killed = client.create_run(exp, run_name="killed")
    client.set_terminated(killed.info.run_id, "KILLED")
    running = client.create_run(exp)  # no name given: mlflow makes one up
    info["failed"], info["killed"], info["running"] = failed.info.run_id, killed.info.run_id, running.info.run_id

    deleted = client.create_run(exp, run_name="deleted run")
    client.log_metric(deleted.info.run_id, "loss", 9.0)
    client.delete_run(deleted.info.run_id)
    info["deleted"] = deleted.info.run_id

    # names that need quoting, escapes and folded lines in meta.yaml
    exp2 = client.create_experiment("names " + "long " * 20 + '"dq" #not a comment: 中')
    info["weird"] = {}
    for name in WEIRD_NAMES:
        r = client.create_run(exp2, run_name=name)
        info["weird"][r.info.run_id] = name

    # a run in the Default experiment, one in a deleted experiment
    default_run = client.create_run("0", run_name="default")
    client.log_metric(default_run.info.run_id, "x", 1.0)
    info["default"] = default_run.info.run_id
    gone = client.create_experiment("gone")
    gone_run = client.create_run(gone, run_name="in trash")
    client.log_metric(gone_run.info.run_id, "x", 1.0)
    client.delete_experiment(gone)
    info["gone_run"] = gone_run.info.run_id
    return info


def all_runs(client: MlflowClient, view: int) -> dict[str, object]:
    exps = client.search_experiments(view_type=ViewType.ACTIVE_ONLY)
    runs = client.search_runs([e.experiment_id for e in exps], run_view_type=view, max_results=10_000)
    return {r.info.run_id: r for r in runs}


@pytest.fixture(scope="module")
def read_all(store):
    sources = reader.discover(store["root"], store["archive"])
    return {s.name: (s, reader.read(s, ReadOptions())) for s in sources}


def test_is_store_and_claims(store, tmp_path):
    assert reader.is_store(store["root"])
    assert reader.claims("meta.yaml") is False and reader.claims("loss") is False
    # a store under another name is recognised by its experiment folders
    renamed = tmp_path / "somewhere"
    shutil.copytree(store["root"], renamed)
    assert reader.is_store(renamed)
    # an experiment folder, a run folder and an unrelated folder are not stores
    assert not reader.is_store(renamed / store["exp"])
    assert not reader.is_store(renamed / store["exp"] / store["r1"])
    other = tmp_path / "other"
    (other / "1").mkdir(parents=True)
    (other / "1" / "meta.yaml").write_text("name: x\n")
    assert not reader.is_store(other)
    assert not reader.is_store(tmp_path / "missing")
    # discovery through the renamed store gives the same runs, named relative to the archive
    names = sorted(s.name for s in reader.discover(renamed, tmp_path))
    assert names and all(n.startswith("somewhere/") for n in names)
    assert [n.split("/", 1)[1] for n in names] == sorted(
        s.name.split("/", 1)[1] for s in reader.discover(store["root"], store["archive"])
    )


def test_discover_lists_exactly_mlflows_runs(store):
    client = store["client"]
    sources = reader.discover(store["root"], store["archive"])
    active = all_runs(client, ViewType.ACTIVE_ONLY)
    by_id = {s.directory.name: s for s in sources}
    assert set(by_id) == set(active)
    assert store["deleted"] not in by_id and store["gone_run"] not in by_id
    for run_id, s in by_id.items():
        r = active[run_id]
        assert s.name == f"mlruns/{r.info.experiment_id}/{run_id}"
        assert s.format == "mlflow" and s.parent is None
        assert s.directory == store["root"] / r.info.experiment_id / run_id
        keys = [p.relative_to(s.directory / "metrics").as_posix() for p in s.files]
        assert keys == sorted(keys) == sorted(r.data.metrics)
    assert [s.name for s in sources] == sorted(s.name for s in sources)

    with_deleted = reader.discover(store["root"], store["archive"], include_deleted=True)
    every = all_runs(client, ViewType.ALL)
    assert {s.directory.name for s in with_deleted} == set(every)
    assert store["deleted"] in {s.directory.name for s in with_deleted}
    assert store["gone_run"] not in {s.directory.name for s in with_deleted}  # .trash never listed


def test_every_value_matches_the_client(store, read_all):
    client = store["client"]
    checked_points = 0
    for name, (source, run) in read_all.items():
        assert run.name == name and run.format == "mlflow"
        assert run.problems == [], run.problems
        assert run.scalars.schema == RUN_SCALARS_SCHEMA
        m = run.meta
        r = client.get_run(m["run_id"])
        exp = client.get_experiment(r.info.experiment_id)
        assert m["title"] == r.info.run_name
        assert m["experiment"] == exp.name
        assert m["experiment_id"] == r.info.experiment_id
        assert m["status"] == r.info.status
        assert m["lifecycle_stage"] == r.info.lifecycle_stage
        assert float(m["start_time"]) == r.info.start_time / 1000
        if r.info.end_time is None:
            assert "end_time" not in m
        else:
            assert float(m["end_time"]) == r.info.end_time / 1000
        assert run.hparams == r.data.params
        assert all(isinstance(v, str) for v in run.hparams.values())
        tags = {k[4:]: v for k, v in m.items() if k.startswith("tag:")}
        assert tags == r.data.tags

        table = run.scalars.to_pydict()
        tags_in_order = table["tag"]
        keys = list(dict.fromkeys(tags_in_order))
        assert keys == sorted(r.data.metrics)
        assert tags_in_order == sorted(tags_in_order)  # one block per key, keys sorted
        for key in keys:
            history = client.get_metric_history(r.info.run_id, key)
            idx = [i for i, t in enumerate(tags_in_order) if t == key]
            assert len(idx) == len(history)
            for i, h in zip(idx, history):
                assert table["step"][i] == h.step
                assert table["wall_time"][i] == h.timestamp / 1000
                assert same(table["value"][i], h.value), (key, table["value"][i], h.value)
                checked_points += 1
        # meta.yaml of the run and of its experiment, the tag and param files, then the metrics
        paths = [f.path for f in run.files]
        assert paths[:2] == [source.directory / "meta.yaml", source.directory.parent / "meta.yaml"]
        metrics = [p for p in paths if "/metrics/" in p.as_posix()]
        assert metrics == list(source.files) and paths[len(paths) - len(metrics):] == metrics
        assert all(p.parent.relative_to(source.directory).parts[0] in ("tags", "params") for p in paths[2:len(paths) - len(metrics)])
        for f in run.files:
            assert f.size == f.path.stat().st_size == f.decoded_bytes
    assert checked_points > 3000


def test_specific_values(store, read_all):
    by_id = {run.meta["run_id"]: run for _, run in read_all.values()}
    r1 = by_id[store["r1"]]
    t = r1.scalars.to_pydict()
    loss = [(s, v) for tag, s, v in zip(t["tag"], t["step"], t["value"]) if tag == "loss"]
    assert [s for s, _ in loss] == list(range(-1, 7))
    assert math.isnan(loss[1][1]) and loss[2][1] == math.inf and loss[3][1] == -math.inf
    assert math.copysign(1, loss[4][1]) == -1 and loss[5][1] == 1e-310
    acc = [v for tag, v in zip(t["tag"], t["value"]) if tag == "train/acc"]
    assert acc == [0.25, 0.5]
    assert [s for tag, s in zip(t["tag"], t["step"]) if tag == "a/b/c"] == [10**12]
    assert r1.meta["title"] == "训练-1 中文"
    assert r1.meta["experiment"] == "实验 A: 中文"
    assert r1.meta["status"] == "FINISHED"
    assert r1.hparams["lr"] == "0.10" and r1.hparams["opt/name"] == "adam w"
    assert r1.hparams["中文参数"] == "值"
    assert r1.meta["tag:multi"] == "l1\nl2" and r1.meta["tag:nested/tag"] == "n"
    # artifacts: relative to the run folder, sizes and hashes of what was logged
    arts = {a.path: a for a in r1.artifacts}
    assert [a.path for a in r1.artifacts] == sorted(arts)
    for path, data in store["artifact_bytes"].items():
        assert arts[path].size == len(data)
        assert arts[path].sha256 == hashlib.sha256(data).hexdigest()
    listed = store["client"].list_artifacts(store["r1"])
    stack, files = list(listed), {}
    while stack:
        a = stack.pop()
        if a.is_dir:
            stack.extend(store["client"].list_artifacts(store["r1"], a.path))
        else:
            files["artifacts/" + a.path] = a.file_size
    assert {p: a.size for p, a in arts.items()} == files

    assert by_id[store["failed"]].meta["status"] == "FAILED"
    assert by_id[store["killed"]].meta["status"] == "KILLED"
    assert by_id[store["running"]].meta["status"] == "RUNNING"
    assert "end_time" not in by_id[store["running"]].meta


def test_parent_and_child(store, read_all):
    names = {run.meta["run_id"]: name for name, (_, run) in read_all.items()}
    child = read_all[names[store["child"]]][1]
    parent = read_all[names[store["parent"]]][1]
    assert child.meta["parent_run"] == names[store["parent"]]
    assert child.meta["tag:mlflow.parentRunId"] == store["parent"]
    assert "parent_run" not in parent.meta
    assert child.hparams == {"depth": "1"}
    assert parent.meta["status"] == child.meta["status"] == "FINISHED"


def test_weird_run_names(store, read_all):
    seen = {}
    for _, run in read_all.values():
        if run.meta["run_id"] in store["weird"]:
            seen[run.meta["run_id"]] = run.meta["title"]
            assert run.meta["title"] == store["client"].get_run(run.meta["run_id"]).info.run_name
    assert seen == store["weird"]
    exp2 = {run.meta["experiment"] for _, run in read_all.values() if run.meta["run_id"] in store["weird"]}
    assert exp2 == {"names " + "long " * 20 + '"dq" #not a comment: 中'}


def test_deleted_run_is_read_when_asked(store):
    s = [s for s in reader.discover(store["root"], store["archive"], include_deleted=True)
         if s.directory.name == store["deleted"]]
    assert len(s) == 1
    run = reader.read(s[0])
    assert run.meta["lifecycle_stage"] == "deleted" and run.meta["title"] == "deleted run"
    assert run.scalars.column("value").to_pylist() == [9.0]


# --------------------------------------------------------------------------------------------
# damage and old formats (stores written by mlflow, then edited by hand)
# --------------------------------------------------------------------------------------------


@pytest.fixture
def one_run(tmp_path):
    root = tmp_path / "mlruns"
    client = client_for(root)
    exp = client.create_experiment("damage")
    run = client.create_run(exp, run_name="victim")
    rid = run.info.run_id
    for i in range(5):
        client.log_metric(rid, "loss", 1.0 / (i + 1), step=i, timestamp=1000 + i)
    client.log_param(rid, "p", "v")
    return {"root": root, "archive": tmp_path, "client": client, "rid": rid,
            "dir": root / exp / rid, "history": client.get_metric_history(rid, "loss")}


def read_one(r: dict):
    sources = [s for s in reader.discover(r["root"], r["archive"]) if s.directory.name == r["rid"]]
    assert len(sources) == 1
    return reader.read(sources[0])


def loss_of(run) -> list[tuple[int, float, float]]:
    t = run.scalars.to_pydict()
    return [(s, w, v) for tag, s, w, v in zip(t["tag"], t["step"], t["wall_time"], t["value"]) if tag == "loss"]


def expected(history) -> list[tuple[int, float, float]]:
    return [(h.step, h.timestamp / 1000, h.value) for h in history]


def test_old_two_field_lines(one_run):
    path = one_run["dir"] / "metrics" / "old"
    path.write_bytes(b"1500000000000 0.5\n1500000000001 nan\n1500000000002 -Infinity\n")
    run = read_one(one_run)
    assert run.problems == []
    hist = one_run["client"].get_metric_history(one_run["rid"], "old")
    t = run.scalars.to_pydict()
    got = [(s, w, v) for tag, s, w, v in zip(t["tag"], t["step"], t["wall_time"], t["value"]) if tag == "old"]
    want = expected(hist)
    assert len(got) == len(want) == 3
    assert all(g[:2] == w[:2] and same(g[2], w[2]) for g, w in zip(got, want))
    assert [g[0] for g in got] == [0, 0, 0]


def test_five_field_lines_keep_their_step(one_run):
    (one_run["dir"] / "metrics" / "ds").write_bytes(b"1000 0.5 7 train abc123\n1001 0.25 8 train abc123\n")
    run = read_one(one_run)
    t = run.scalars.to_pydict()
    got = [(s, w, v) for tag, s, w, v in zip(t["tag"], t["step"], t["wall_time"], t["value"]) if tag == "ds"]
    assert got == [(7, 1.0, 0.5), (8, 1.001, 0.25)]
    assert run.problems == []


def test_bad_line_in_the_middle(one_run):
    path = one_run["dir"] / "metrics" / "loss"
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    bad = b"this is not a metric\n"
    damaged = b"".join(lines[:2]) + bad + b"".join(lines[2:]) + b"\xff\xfe 1 2\n" + b"1 2 3 4\n"
    path.write_bytes(damaged)
    run = read_one(one_run)
    got = loss_of(run)
    want = expected(one_run["history"])
    assert len(got) == len(want) == 5 and all(g == w for g, w in zip(got, want))
    offsets = sorted(p.offset for p in run.problems)
    assert offsets == [len(b"".join(lines[:2])), len(data) + len(bad), len(data) + len(bad) + len(b"\xff\xfe 1 2\n")]
    assert all(p.path == str(path) and p.kind == "bad-record" for p in run.problems)
    assert _metric_file(run).decoded_bytes == len(damaged)


def test_truncated_last_line(one_run):
    path = one_run["dir"] / "metrics" / "loss"
    data = path.read_bytes()
    path.write_bytes(data + b"1700000000123 0.12")  # cut before the step
    run = read_one(one_run)
    assert loss_of(run) == expected(one_run["history"])
    assert [(p.kind, p.offset, p.path) for p in run.problems] == [("truncated", len(data), str(path))]
    assert _metric_file(run).decoded_bytes == len(data) and _metric_file(run).size == len(data) + 18
    # a complete line that only lacks its newline is read
    path.write_bytes(data + b"1700000000123 0.12 9")
    run = read_one(one_run)
    assert run.problems == []
    assert loss_of(run)[-1] == (9, 1700000000.123, 0.12)
    assert _metric_file(run).decoded_bytes == len(data) + 20


@pytest.mark.parametrize(
    "content",
    [b"", b"\x00\x01\x02garbage\xff\xfe", b"just some words\nwithout any mapping\n", b"run_id: 'unterminated\n"],
)
def test_garbage_meta_yaml(one_run, content):
    meta = one_run["dir"] / "meta.yaml"
    meta.write_bytes(content)
    run = read_one(one_run)  # still discovered: it has metrics/ and params/
    assert any(p.kind == "bad-meta" and p.path == str(meta) for p in run.problems), run.problems
    assert loss_of(run) == expected(one_run["history"])
    assert run.meta["title"] == "victim"  # from the mlflow.runName tag
    assert run.meta["run_id"] == one_run["rid"]
    assert run.hparams == {"p": "v"}


def test_missing_meta_yaml_and_vanished_files(one_run):
    (one_run["dir"] / "meta.yaml").unlink()
    sources = [s for s in reader.discover(one_run["root"], one_run["archive"]) if s.directory.name == one_run["rid"]]
    assert len(sources) == 1
    (one_run["dir"] / "metrics" / "loss").unlink()  # gone between scan and read
    art = one_run["dir"] / "artifacts"
    art.mkdir(exist_ok=True)
    (art / "dangling").symlink_to(one_run["dir"] / "nowhere")
    run = reader.read(sources[0])
    kinds = sorted(p.kind for p in run.problems)
    assert kinds == ["missing-meta", "unreadable", "unreadable"], run.problems
    assert run.scalars.num_rows == 0 and run.meta["title"] == "victim"


def test_unreadable_experiment_meta_is_reported(one_run):
    exp_meta = one_run["dir"].parent / "meta.yaml"
    exp_meta.write_bytes(b"\x00\x00")
    run = read_one(one_run)
    assert run.problems and {p.path for p in run.problems} == {str(exp_meta)}
    assert {p.kind for p in run.problems} == {"bad-meta"}
    assert "experiment" not in run.meta and run.meta["experiment_id"] == one_run["dir"].parent.name
    assert loss_of(run) == expected(one_run["history"])


# --------------------------------------------------------------------------------------------
# properties: the meta.yaml parser against PyYAML, the metric parser against mlflow's own
# --------------------------------------------------------------------------------------------

yaml_keys = st.from_regex(r"[a-z_][a-z_0-9]{0,11}", fullmatch=True)
yaml_values = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=" a'\"\\:#-\n\t\r\x85\u2028é中", max_size=120),
    st.integers(),
    st.none(),
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(yaml_keys, yaml_values, max_size=6), st.sampled_from([80, 30, 10**6]))
def test_meta_yaml_parser_matches_pyyaml(mapping, width):
    text = yaml.safe_dump(mapping, default_flow_style=False, allow_unicode=True, width=width)
    back = yaml.safe_load(text) or {}
    got, errors = reader.parse_meta_yaml(text)
    assert errors == []
    assert set(got) == set(back)
    for k, v in back.items():
        assert got[k] == (None if v is None else str(v)), (text, k)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**62),
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(-(2**62), 2**62),
            st.sampled_from([2, 3, 3, 3, 5]),
        ),
        max_size=40,
    ),
    st.sampled_from([b"\n", b"\r\n"]),
)
def test_metric_parser_matches_mlflow(rows, eol):
    lines = []
    for ts, v, step, n in rows:
        fields = [str(ts), str(v), str(step), "ds", "digest"][:n]
        lines.append(" ".join(fields).encode() + eol)
    data = b"".join(lines)
    ts, values, steps, end, problems = reader.parse_metric_bytes(data, "m")
    assert problems == [] and end == len(data)
    want = [FileStore._get_metric_from_line("r", "m", ln.decode(), "0") for ln in lines]
    assert ts.tolist() == [w.timestamp for w in want]
    assert all(same(a, w.value) for a, w in zip(values.tolist(), want))
    # mlflow reports step 0 for 5-field lines; the written step is kept here
    assert steps.tolist() == [r[2] if r[3] >= 3 else 0 for r in rows]
    assert [w.step for w, r in zip(want, rows) if r[3] != 5] == [r[2] if r[3] == 3 else 0 for r in rows if r[3] != 5]


def test_large_artifacts_are_listed_without_hash(one_run, monkeypatch):
    client = one_run["client"]
    client.log_text(one_run["rid"], "x" * 200, "big.txt")
    client.log_text(one_run["rid"], "y" * 50, "deep/er/small.txt")
    monkeypatch.setattr(reader, "MAX_HASH_BYTES", 100)
    run = read_one(one_run)
    assert [(a.path, a.size, a.sha256) for a in run.artifacts] == [
        ("artifacts/big.txt", 200, ""),
        ("artifacts/deep/er/small.txt", 50, hashlib.sha256(b"y" * 50).hexdigest()),
    ]


def _metric_file(run):
    """The one metric file of a run read in the damage tests."""
    (f,) = [f for f in run.files if "/metrics/" in f.path.as_posix()]
    return f
