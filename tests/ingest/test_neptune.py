"""The Neptune reader against offline runs written by the real ``neptune`` 1.x client
(``init_run(mode="offline")``). The spec in this file is what was logged: every decoded value is
compared with it, value by value (the client drops NaN/inf before writing; a point without a
step continues the previous one). Damage: a partial last line (a live run: no problem, so a
``--strict`` build of a live archive passes), a bad line; a neptune-scale folder is named once.
"""

from __future__ import annotations

import math
import shutil
import socket
from pathlib import Path

import pytest

from sitegen.ingest import READERS, neptune
from sitegen.ingest.jsonlines import pick_lines
from sitegen.ingest.scan import scan
from sitegen.model import RUN_SCALARS_SCHEMA
from tests.support.offline import write

HOSTILE = "</script><img src=x onerror=alert(1)>"
SPEC = {
    "name": "run " + HOSTILE,
    "tags": ["t1", HOSTILE],
    "params": {"lr": 0.01, "opt": {"name": "adam", "note": HOSTILE}, "n": 3, "flag": True},
    "metrics": [
        *[["train/loss", 1.0 / (i + 1), i] for i in range(5)],
        *[["train/acc", i / 10, None] for i in range(4)],
        ["train/loss", "nan", 5],
        ["train/loss", "inf", 6],
        ["train/loss", 0.125, 7],
        ["train/acc", 0.9, None],
        ["eval/" + HOSTILE, 2.5, 3],
    ],
    "texts": [["notes/log", HOSTILE, 1], ["notes/log", "second", 2]],
}


def expected_rows(spec: dict) -> list[tuple]:
    """What the client writes: finite values only; a missing step is the previous one + 1."""
    last: dict[str, int] = {}
    rows = []
    for path, value, step in spec["metrics"]:
        v = float(value)
        if math.isnan(v) or math.isinf(v):
            continue
        step = last.get(path, -1) + 1 if step is None else step
        last[path] = step
        rows.append((path, step, v))
    return sorted(rows, key=lambda r: r[0])


def rows(run) -> list[tuple]:
    return list(zip(*(run.scalars.column(c).to_pylist() for c in ("tag", "step", "value"))))


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("neptune")
    (root / "proj").mkdir()
    write("neptune", root / "proj", SPEC)
    return next((root / "proj" / ".neptune" / "offline").glob("run__*/"))


def copy_run(run_dir: Path, tmp: Path) -> Path:
    dst = tmp / "archive" / ".neptune" / "offline" / run_dir.name
    shutil.copytree(run_dir, dst)
    return dst


def test_values_params_texts_and_run_info(written, tmp_path):
    folder = copy_run(written, tmp_path)
    (source,) = scan(tmp_path / "archive")
    assert (source.name, source.format) == (f".neptune/offline/{folder.name}", "neptune")
    run = READERS["neptune"].read(source)
    assert run.scalars.schema == RUN_SCALARS_SCHEMA
    assert rows(run) == expected_rows(SPEC)
    start = float(run.meta["start_time"])
    assert all(start - 1 <= w <= start + 600 for w in run.scalars.column("wall_time").to_pylist())
    assert [(t.tag, t.text, t.step) for t in run.texts] == [tuple(x) for x in SPEC["texts"]]
    assert run.hparams == {
        "parameters/lr": 0.01, "parameters/opt/name": "adam", "parameters/opt/note": HOSTILE, "parameters/n": 3.0, "parameters/flag": True,
    }  # fmt: skip
    assert run.meta["title"] == SPEC["name"]
    assert run.meta["tags"] == ", ".join(sorted(SPEC["tags"]))
    assert run.meta["run_id"] == folder.name.split("__")[1]
    assert run.problems == []
    assert all(f.decoded_bytes == f.size for f in run.files)


def test_hostname_and_console_capture(tmp_path):
    """With console capture on, the client assigns ``sys/hostname`` and logs the console under
    ``monitoring/`` (left out)."""
    (tmp_path / "proj").mkdir()
    spec = {"name": "h", "tags": [], "params": {}, "metrics": [["x", 1.0, 0]], "texts": [], "capture": True}
    write("neptune", tmp_path / "proj", spec)
    run = READERS["neptune"].read(scan(tmp_path / "proj")[0])
    assert run.meta["tag:host"] == socket.gethostname()
    assert rows(run) == [("x", 0, 1.0)] and run.texts == [] and run.problems == []


def test_partial_last_line_is_left_for_the_next_build(written, tmp_path):
    folder = copy_run(written, tmp_path)
    log = folder / "data-1.log"
    whole = log.read_bytes()
    line = b'{"obj": {"type": "LogFloats", "path": ["train", "loss"], "values": [{"value": 9.0, "step": 99, "ts": 1.0}]}, "version": 999, "at": 1.0}\n'
    for cut in range(1, len(line) - 1, 7):
        log.write_bytes(whole + line[:cut])
        run = READERS["neptune"].read(scan(tmp_path / "archive")[0])
        assert run.problems == [], cut
        assert rows(run) == expected_rows(SPEC)
        (f,) = [f for f in run.files if f.path == log]
        assert (f.size, f.decoded_bytes) == (len(whole) + cut, len(whole))
    log.write_bytes(whole + line)
    assert ("train/loss", 99, 9.0) in rows(READERS["neptune"].read(scan(tmp_path / "archive")[0]))


def test_every_cut_keeps_the_whole_lines(written, tmp_path):
    folder = copy_run(written, tmp_path)
    log = folder / "data-1.log"
    whole = log.read_bytes()
    ends = [i + 1 for i, b in enumerate(whole) if b == 0x0A]
    full = {repr(r) for r in rows(READERS["neptune"].read(scan(tmp_path / "archive")[0]))}
    for cut in range(0, len(whole) + 1, 13):
        log.write_bytes(whole[:cut])
        run = READERS["neptune"].read(scan(tmp_path / "archive")[0])
        kept = whole[: max([e for e in ends if e <= cut + 1], default=0)]  # (a line short of its newline only is whole)
        n = sum(1 for x in kept.splitlines() if b'"LogFloats"' in x)
        assert len(rows(run)) == n and {repr(r) for r in rows(run)} <= full, cut
        assert run.problems == []


def test_bad_line_in_the_middle_keeps_the_later_lines(written, tmp_path):
    folder = copy_run(written, tmp_path)
    log = folder / "data-1.log"
    lines = log.read_bytes().split(b"\n")
    target = next(i for i, x in enumerate(lines) if b'"train", "loss"' in x and b'"step": 2,' in x)
    lines[target] = lines[target][:30] + b"\xff\x00garbage"
    log.write_bytes(b"\n".join(lines))
    run = READERS["neptune"].read(scan(tmp_path / "archive")[0])
    assert [(p.kind, p.offset) for p in run.problems] == [("bad-record", sum(len(x) + 1 for x in lines[:target]))]
    assert rows(run) == [r for r in expected_rows(SPEC) if r[:2] != ("train/loss", 2)]


def test_neptune_scale_folder_is_named_once(tmp_path):
    scale = tmp_path / "archive" / ".neptune" / "ws_proj_run-1_1700000000"
    scale.mkdir(parents=True)
    (scale / "run_operations.sqlite3").write_bytes(b"SQLite format 3\x00")
    problems: list = []
    assert scan(tmp_path / "archive", problems=problems) == []
    assert [(p.path, p.kind) for p in problems] == [(str(scale), "unsupported")]
    assert "neptune-scale" in problems[0].message


def test_bulk_reading_equals_the_line_by_line_replay(written, tmp_path):
    """The ``LogFloats`` lines parsed in one ``pyarrow.json`` pass give the same table as the
    replay of every line (the reference), on the real client's file and on one with a missing
    step mid-series, float steps, console capture, a second data file and a partial last line."""
    (source,) = [s for s in scan(written) if s.format == "neptune"]
    data = next(p for p in source.files if p.name == "data-1.log").read_bytes()
    assert neptune._bulk_scalars(pick_lines(data, neptune.FLOATS)[0]) is not None  # the bulk path is taken
    folder = tmp_path / ".neptune" / "offline" / "run__x__1__y"
    folder.mkdir(parents=True)
    line = '{"obj": {"type": "LogFloats", "path": %s, "values": [%s]}, "version": 1, "at": 5.0}\n'
    extra = [line % ('["a", "b"]', '{"value": %r, "step": %s, "ts": %r}' % (0.5 * i, "null" if i % 3 else i, 1e9 + i)) for i in range(40)]
    extra += [line % ('["m"]', '{"value": 1, "step": 2.0, "ts": 3}, {"value": 2.5, "step": null, "ts": null}')]
    extra += [line % ('["monitoring", "cpu"]', '{"value": 1.0, "step": 1, "ts": 3.0}')]
    (folder / "data-1.log").write_bytes(data + "".join(extra[:20]).encode())
    (folder / "data-2.log").write_bytes("".join(extra[20:]).encode() + b'{"obj": {"type": "LogFl')
    (run_source,) = [s for s in scan(tmp_path) if s.format == "neptune"]
    bulk, lines = neptune.read(run_source), neptune.read(run_source, bulk=False)
    assert bulk.scalars.num_rows == lines.scalars.num_rows > 40 and table_rows(bulk) == table_rows(lines)
    assert bulk.hparams == lines.hparams and bulk.meta == lines.meta
    assert bulk.problems == lines.problems and [t.text for t in bulk.texts] == [t.text for t in lines.texts] != []
    # a line the bulk parse cannot take (a value as text) sends the whole run through the replay
    (folder / "data-2.log").write_bytes((line % ('["a", "b"]', '{"value": "NaN", "step": 99, "ts": 1.0}')).encode())
    assert table_rows(neptune.read(run_source)) == table_rows(neptune.read(run_source, bulk=False))


def table_rows(run) -> list[tuple]:
    """Every column of the scalars, NaN as a string (so that rows compare equal)."""
    cols = [run.scalars.column(c).to_pylist() for c in ("tag", "step", "wall_time", "value")]
    return [tuple("nan" if isinstance(x, float) and math.isnan(x) else x for x in r) for r in zip(*cols)]
