"""The Comet reader against offline experiments written by the real ``comet_ml.OfflineExperiment``.

The spec in this file is what was logged: every decoded value is compared with it, value by
value (Comet ships no reader of its offline zips to compare with). Damage: a zip cut short at
every line of its messages, the 22-byte placeholder a crashed writer leaves, a bad line.
"""

from __future__ import annotations

import io
import json
import math
import shutil
import socket
import zipfile
from pathlib import Path

import pytest

from sitegen.ingest import READERS, comet
from sitegen.ingest.jsonlines import pick_lines
from sitegen.ingest.scan import scan
from sitegen.model import RUN_SCALARS_SCHEMA
from tests.support.offline import git_repo, write

HOSTILE = "</script><img src=x onerror=alert(1)>"
SPEC = {
    "project": "demo-proj",
    "name": "run " + HOSTILE,
    "tags": ["baseline", HOSTILE],
    "params": {"lr": 0.01, "optimizer": {"name": "adam", "beta1": 0.9}, "layers": [64, 32], "note": HOSTILE},
    "others": {"dataset": "cifar10", "why": HOSTILE},
    "metrics": [
        *[["loss", 1.0 / (i + 1), i, i // 2, None] for i in range(6)],
        *[["acc", i / 10, i, None, None] for i in range(0, 6, 2)],
        ["loss", "nan", 6, 3, None],
        ["loss", "inf", 7, 3, None],
        ["loss", "-inf", 8, 4, None],
        ["loss", 1e-300, 9, 4, None],
        ["loss", 3, 10, 5, None],
        ["acc", 0.5, 3, None, "validate"],
        [HOSTILE, 2.5, 1, None, None],
    ],
}


def expected_rows(spec: dict) -> list[tuple]:
    rows = [(f"{c}_{n}" if c else n, s, float(v)) for n, v, s, _, c in spec["metrics"]]
    return sorted(rows, key=lambda r: r[0])  # grouped by tag in name order, logging order within a tag


def flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = float(v) if isinstance(v, (int, float)) else json.dumps(v) if isinstance(v, list) else v
    return out


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("comet")
    commit = git_repo(root / "proj")
    write("comet", root / "proj", SPEC)
    return root, commit


def read_only_run(root: Path):
    found = scan(root)
    assert [s.format for s in found] == ["comet"], found
    return found[0], READERS["comet"].read(found[0])


def logged_rows(run) -> list[tuple]:
    """The decoded points of the logged tags (the client adds ``sys.*`` and ``process duration``)."""
    names = {r[0] for r in expected_rows(SPEC)}
    cols = [run.scalars.column(c).to_pylist() for c in ("tag", "step", "value", "wall_time")]
    rows = list(zip(*cols))
    extra = {r[0] for r in rows if r[0] not in names}
    assert all(t.startswith("sys.") or t == "process duration" for t in extra), extra
    return [r for r in rows if r[0] in names]


def test_values_params_and_run_info(written):
    root, commit = written
    source, run = read_only_run(root)
    assert source.name.startswith("proj/.cometml-runs/") and len(source.name.rsplit("/", 1)[1]) == 32
    assert run.scalars.schema == RUN_SCALARS_SCHEMA
    got = logged_rows(run)
    want = expected_rows(SPEC)
    assert len(got) == len(want)
    start, end = float(run.meta["start_time"]), float(run.meta["end_time"])
    for g, w in zip(got, want):
        assert g[0] == w[0] and g[1] == w[1] and same(g[2], w[2]), (g, w)
        assert start - 1 <= g[3] <= end + 1, g
    assert run.hparams == flat(SPEC["params"])
    assert run.meta["title"] == SPEC["name"]
    assert run.meta["experiment"] == "demo-proj" and run.meta["workspace"] == "ws"
    assert run.meta["tags"] == ", ".join(sorted(SPEC["tags"]))
    assert run.meta["tag:dataset"] == "cifar10" and run.meta["tag:why"] == HOSTILE
    assert run.meta["tag:git.commit"] == commit
    assert run.meta["tag:git.remote"] == "https://example.com/team/repo.git"
    assert run.meta["tag:host"] == socket.gethostname()
    assert run.problems == []
    assert run.files[0].decoded_bytes == run.files[0].size == source.files[0].stat().st_size


def _member_span(data: bytes, name: str) -> tuple[int, int]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo(name)
        assert info.compress_type == zipfile.ZIP_STORED  # as comet_ml writes it
    n, x = (
        int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little"),
        int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little"),
    )
    start = info.header_offset + 30 + n + x
    return start, start + info.compress_size


def _copy(written_root: Path, tmp: Path) -> Path:
    src = next((written_root / "proj" / ".cometml-runs").glob("*.zip"))
    (tmp / ".cometml-runs").mkdir(parents=True)
    dst = tmp / ".cometml-runs" / src.name
    shutil.copy(src, dst)
    return dst


def test_zip_cut_short_keeps_every_whole_line(written, tmp_path):
    zpath = _copy(written[0], tmp_path)
    data = zpath.read_bytes()
    lo, hi = _member_span(data, "messages.json")
    full = logged_rows(READERS["comet"].read(scan(tmp_path)[0]))
    members = data[lo:hi]
    ends = [lo + i + 1 for i, b in enumerate(members) if b == 0x0A]
    cuts = sorted({lo, *ends, *(e - 5 for e in ends), hi, hi + 10, len(data) - 1})
    for cut in cuts:
        zpath.write_bytes(data[:cut])
        (source,) = scan(tmp_path)
        run = READERS["comet"].read(source)
        assert any(p.kind == "truncated" for p in run.problems), cut
        # the whole lines before the cut are the messages kept
        whole = members[: max(0, min(cut, hi) - lo)]
        whole = whole[: whole.rfind(b"\n") + 1] if cut < hi else whole
        n_metrics = sum(
            1 for line in whole.splitlines() if b'"metric_msg"' in line and b'"sys.' not in line and b"process duration" not in line
        )
        got = logged_rows(run)
        assert len(got) == n_metrics, cut
        assert {repr(r) for r in got} <= {repr(r) for r in full}  # (repr: NaN equals NaN)


def test_placeholder_zip_of_a_crashed_run(tmp_path):
    (tmp_path / ".cometml-runs").mkdir()
    path = tmp_path / ".cometml-runs" / ("ab" * 16 + ".zip")
    with zipfile.ZipFile(path, "w"):
        pass
    assert path.stat().st_size == 22
    (source,) = scan(tmp_path)
    run = READERS["comet"].read(source)
    assert run.scalars.num_rows == 0
    assert [p.kind for p in run.problems] == ["truncated"] and "placeholder" in run.problems[0].message


def test_bad_line_in_the_middle_keeps_the_later_lines(written, tmp_path):
    zpath = _copy(written[0], tmp_path)
    with zipfile.ZipFile(zpath) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    lines = members["messages.json"].split(b"\n")
    target = next(i for i, line in enumerate(lines) if b'"metricName":"loss"' in line and b'"step":2' in line)
    lines[target] = lines[target][: len(lines[target]) // 2] + b"\x00garbage"
    members["messages.json"] = b"\n".join(lines)
    with zipfile.ZipFile(zpath, "w") as zf:
        for name, body in members.items():
            zf.writestr(name, body)
    run = READERS["comet"].read(scan(tmp_path)[0])
    offset = sum(len(line) + 1 for line in lines[:target])
    assert [(p.kind, p.offset) for p in run.problems] == [("bad-record", offset)]
    assert run.problems[0].path.endswith(":messages.json")
    want = [r for r in expected_rows(SPEC) if (r[0], r[1]) != ("loss", 2)]
    got = logged_rows(run)
    assert [(g[0], g[1]) for g in got] == [(w[0], w[1]) for w in want]
    assert all(same(g[2], w[2]) for g, w in zip(got, want))


def test_legacy_ws_msg_messages(tmp_path):
    """Older clients wrote every message as ``ws_msg`` with the parts side by side."""
    msgs = [
        {
            "type": "ws_msg",
            "payload": {
                "local_timestamp": 1700000000000,
                "context": None,
                "metric": {"metricName": "loss", "metricValue": "NaN", "step": 3, "epoch": None},
            },
        },
        {"type": "ws_msg", "payload": {"local_timestamp": 1700000001000, "param": {"paramName": "a|b", "paramValue": 2, "step": None}}},
        {"type": "ws_msg", "payload": {"local_timestamp": 1700000002000, "log_other": {"key": "Name", "val": "old run"}}},
        {"type": "ws_msg", "payload": {"local_timestamp": 1700000003000, "git_meta": {"parent": "abc123", "origin": "o", "branch": "b"}}},
    ]
    (tmp_path / ".cometml-runs").mkdir()
    with zipfile.ZipFile(tmp_path / ".cometml-runs" / ("cd" * 16 + ".zip"), "w") as zf:
        zf.writestr("experiment.json", json.dumps({"offline_id": "cd" * 16, "project_name": "p", "start_time": 1700000000000}))
        zf.writestr("messages.json", "\n".join(json.dumps(m) for m in msgs) + "\n")
    run = READERS["comet"].read(scan(tmp_path)[0])
    rows = list(zip(*(run.scalars.column(c).to_pylist() for c in ("tag", "step", "wall_time"))))
    assert rows == [("loss", 3, 1700000000.0)] and math.isnan(run.scalars.column("value")[0].as_py())
    assert run.hparams == {"a.b": 2.0}
    assert run.meta["title"] == "old run" and run.meta["tag:git.commit"] == "abc123"
    assert run.meta["start_time"] == "1700000000.0" and run.problems == []


def test_bulk_reading_equals_the_line_by_line_replay(written, tmp_path):
    """The ``metric_msg`` lines parsed in one ``pyarrow.json`` pass give the same table as the
    replay of every line (the reference): the real client's messages without the lines that log
    NaN/inf as text (those send a run to the replay, checked last), plus lines with a context,
    missing steps and a float step."""
    source, _ = read_only_run(written[0])
    with zipfile.ZipFile(source.files[0]) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    real = [ln for ln in members["messages.json"].splitlines(keepends=True) if b'"NaN"' not in ln and b'Infinity"' not in ln]
    made = [
        json.dumps(
            {
                "payload": {
                    "context": c,
                    "local_timestamp": 1796446660000 + i,
                    "metric": {"metricName": "m", "metricValue": i / 7, "step": s},
                },
                "type": "metric_msg",
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
        for i, (c, s) in enumerate([(None, None), ("train", 4), ("train", None), (None, 7.0), ("", None), ("train", 2)])
    ]

    def zipped(lines: list[bytes]):
        folder = tmp_path / "x" / ".cometml-runs"
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(folder / source.files[0].name, "w") as zf:
            for name, data in members.items():
                zf.writestr(name, b"".join(lines) if name == "messages.json" else data)
        (run_source,) = scan(tmp_path / "x")
        return run_source

    run_source = zipped(real + made)
    assert comet._bulk_scalars(pick_lines(b"".join(real + made), *comet.METRIC)[0]) is not None  # the bulk path is taken
    bulk, lines = comet.read(run_source), comet.read(run_source, bulk=False)
    assert bulk.scalars.num_rows == lines.scalars.num_rows > 10 and table_rows(bulk) == table_rows(lines)
    assert bulk.hparams == lines.hparams and bulk.meta == lines.meta and bulk.problems == lines.problems
    run_source = zipped(members["messages.json"].splitlines(keepends=True))  # NaN as text: replayed, same values
    assert table_rows(comet.read(run_source)) == table_rows(comet.read(run_source, bulk=False))


def table_rows(run) -> list[tuple]:
    """Every column of the scalars, NaN as a string (so that rows compare equal)."""
    cols = [run.scalars.column(c).to_pylist() for c in ("tag", "step", "wall_time", "value")]
    return [tuple("nan" if isinstance(x, float) and math.isnan(x) else x for x in r) for r in zip(*cols)]
