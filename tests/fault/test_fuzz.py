"""Random bytes into every reader: a clean result or problems, never an exception."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sitegen.ingest import mlflow, tabular, tfevents, visualdl
from sitegen.model import ReadOptions, RunSource
from tests.support import corpus

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
_TMP = Path(tempfile.mkdtemp(prefix="sitegen-fuzz-"))

# random bytes, and random bytes glued to real records (so the framing is often right)
_TF = corpus.tf_file([("loss", i, 0.5, 1.7e9 + i) for i in range(3)])
blobs = st.one_of(
    st.binary(max_size=600),
    st.builds(lambda a, b: a + _TF + b, st.binary(max_size=40), st.binary(max_size=40)),
    st.builds(lambda a, n: corpus.tf_record(a)[: n or None], st.binary(max_size=200), st.integers(0, 250)),
)


def _valid(run) -> None:
    assert run.scalars.num_rows == len(run.scalars.column("tag"))
    for p in run.problems:
        assert p.kind and p.message and isinstance(p.path, str)


@SETTINGS
@given(blobs, st.booleans(), st.booleans())
def test_tfevents(data, fast, verify):
    path = _TMP / "events.out.tfevents.1.fuzz"
    path.write_bytes(data)
    run, state = tfevents.decode_file(path, ReadOptions(fast=fast, verify=verify))
    _valid(run)
    assert 0 <= state["end"] <= len(data)


@SETTINGS
@given(blobs, st.booleans())
def test_tfevents_fast_equals_reference(data, verify):
    path = _TMP / "events.out.tfevents.2.fuzz"
    path.write_bytes(data)
    a, sa = tfevents.decode_file(path, ReadOptions(fast=True, verify=verify))
    b, sb = tfevents.decode_file(path, ReadOptions(fast=False, verify=verify))
    assert corpus.items(a) == corpus.items(b) and a.problems == b.problems and sa["end"] == sb["end"]


@SETTINGS
@given(st.one_of(st.binary(max_size=600), st.builds(lambda a, b: (8 + len(a)).to_bytes(8, "little") + b"\x0a" + a + b, st.binary(max_size=60), st.binary(max_size=60))), st.booleans())
def test_visualdl(data, fast):
    path = _TMP / "vdlrecords.fuzz.log"
    path.write_bytes(data)
    run, state = visualdl.decode_file(path, ReadOptions(fast=fast))
    _valid(run)
    assert 0 <= state["end"] <= len(data)


@SETTINGS
@given(st.one_of(st.binary(max_size=400), st.text(alphabet="0123456789 .-e\nnaif", max_size=200).map(str.encode)))
def test_mlflow_metric_parser(data):
    ts, values, steps, end, problems = mlflow.parse_metric_bytes(data, "metrics/x")
    assert len(ts) == len(values) == len(steps) and 0 <= end <= len(data)


@SETTINGS
@given(st.one_of(st.binary(max_size=400), st.text(alphabet="step,value,tag,wall_time\"\n0123456789.-{}:[]ä\x00", max_size=300).map(str.encode)))
def test_tabular(data):
    d = _TMP / "tab"
    d.mkdir(exist_ok=True)
    files = []
    for name in ("metrics.csv", "metrics.jsonl"):
        (d / name).write_bytes(data)
        files.append(d / name)
    run = tabular.read(RunSource("tab", "tabular", d, tuple(files)))
    _valid(run)


@SETTINGS
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_mlflow_run_folder(meta, metric):
    run_dir = corpus.write_mlflow(_TMP / "ml", b"")
    (run_dir / "meta.yaml").write_bytes(meta)
    (run_dir / "metrics" / "loss").write_bytes(metric)
    src = RunSource("ml", "mlflow", run_dir, (run_dir / "metrics" / "loss",))
    run = mlflow.read(src)
    _valid(run)
