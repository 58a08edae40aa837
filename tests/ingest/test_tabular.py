"""CSV / JSON-lines metric files: written with the csv and json modules (and by hand for the
awkward cases), compared with values computed independently here."""
from __future__ import annotations

import csv
import io
import json
import math
import struct
from datetime import datetime, timezone
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sitegen.ingest import tabular
from sitegen.model import RUN_SCALARS_SCHEMA, ReadOptions, RunSource

NAN, INF = math.nan, math.inf


def same(a: float, b: float) -> bool:
    return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))


def rows_equal(got: list[tuple], want: list[tuple]) -> bool:
    return len(got) == len(want) and all(
        g[0] == w[0] and g[1] == w[1] and same(g[2], w[2]) and same(g[3], w[3]) for g, w in zip(got, want)
    )


def read(directory: Path, *names: str):
    source = RunSource(name="run", format="tabular", directory=directory,
                       files=tuple(directory / n for n in names))
    run = tabular.read(source, ReadOptions())
    assert run.scalars.schema == RUN_SCALARS_SCHEMA
    assert run.name == "run" and run.format == "tabular"
    return run


def rows_of(run) -> list[tuple]:
    t = run.scalars.to_pydict()
    return list(zip(t["tag"], t["step"], t["wall_time"], t["value"]))


def assert_rows(run, want):
    got = rows_of(run)
    assert rows_equal(got, want), f"\n got: {got}\nwant: {want}"


# --------------------------------------------------------------------------------------------
# claims
# --------------------------------------------------------------------------------------------


def test_claims(monkeypatch):
    assert tabular.claims("metrics.csv") and tabular.claims("x.csv") and tabular.claims("log.jsonl")
    assert tabular.claims("METRICS.CSV")
    assert not tabular.claims("events.out.tfevents.1") and not tabular.claims("meta.yaml")
    assert not tabular.claims("x.csv.bak") and not tabular.claims("x.tsv")
    assert tabular.claims("x.tsv", patterns=("*.tsv",)) and not tabular.claims("x.csv", patterns=("*.tsv",))
    assert tabular.claims("metrics.csv", patterns=["metrics.csv"]) and not tabular.claims("other.csv", patterns=["metrics.csv"])
    assert tabular.DEFAULT_PATTERNS == ("*.csv", "*.jsonl")
    monkeypatch.setattr(tabular, "DEFAULT_PATTERNS", ("*.log",))
    assert tabular.claims("train.log") and not tabular.claims("x.csv")


# --------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------


def test_lightning_style_metrics_csv(tmp_path):
    """Rows as Lightning's CSVLogger writes them: every column in every row, mostly empty."""
    header = ["epoch", "step", "train_loss", "val_loss", "val_acc", "lr-Adam"]
    records = [
        {"epoch": 0, "step": 49, "train_loss": 0.9, "lr-Adam": 0.001},
        {"epoch": 0, "step": 99, "train_loss": 0.7},
        {"epoch": 0, "step": 99, "val_loss": 0.8, "val_acc": 0.5},
        {"epoch": 1, "step": 149, "train_loss": float("nan")},
        {"epoch": 1, "step": 199, "train_loss": 0.5, "val_loss": float("inf"), "val_acc": 0.625},
    ]
    with open(tmp_path / "metrics.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(records)
    want = []
    for r in records:
        for col in header:
            if col != "step" and col in r:
                want.append((col, r["step"], NAN, float(r[col])))
    run = read(tmp_path, "metrics.csv")
    assert run.problems == []
    assert_rows(run, want)
    size = (tmp_path / "metrics.csv").stat().st_size
    assert [(f.size, f.decoded_bytes) for f in run.files] == [(size, size)]


def test_crlf_bom_chinese_headers_and_literals(tmp_path):
    text = (
        "\ufeff迭代,损失,准确率,备注,wall_time\r\n"
        "0,1.5,,开始,1700000000\r\n"
        "1,nan,0.5,x,1700000000500\r\n"
        "2,NaN,inf,,\r\n"
        "3,-inf,Infinity,y,1700000001.25\r\n"
        "4, -Infinity , 2 ,z,\r\n"
        "\r\n"
        "5,,,,\r\n"
    )
    (tmp_path / "a.csv").write_bytes(text.encode("utf-8"))
    run = read(tmp_path, "a.csv")
    # no step column (迭代 is not one of the step names): steps are row numbers
    want = [
        ("迭代", 0, 1700000000.0, 0.0), ("损失", 0, 1700000000.0, 1.5),
        ("迭代", 1, 1700000000.5, 1.0), ("损失", 1, 1700000000.5, NAN), ("准确率", 1, 1700000000.5, 0.5),
        ("迭代", 2, NAN, 2.0), ("损失", 2, NAN, NAN), ("准确率", 2, NAN, INF),
        ("迭代", 3, 1700000001.25, 3.0), ("损失", 3, 1700000001.25, -INF), ("准确率", 3, 1700000001.25, INF),
        ("迭代", 4, NAN, 4.0), ("损失", 4, NAN, -INF), ("准确率", 4, NAN, 2.0),
        ("迭代", 5, NAN, 5.0),
    ]
    assert run.problems == []
    assert_rows(run, want)


def test_step_column_priority_and_case(tmp_path):
    (tmp_path / "a.csv").write_text("Epoch,Global_Step,loss\n0,10,1\n0,20,2\n1,30,3\n")
    assert_rows(read(tmp_path, "a.csv"), [
        ("Epoch", 10, NAN, 0.0), ("loss", 10, NAN, 1.0),
        ("Epoch", 20, NAN, 0.0), ("loss", 20, NAN, 2.0),
        ("Epoch", 30, NAN, 1.0), ("loss", 30, NAN, 3.0),
    ])
    # a fractional epoch is not a step: the next candidate (none here) → row numbers
    (tmp_path / "b.csv").write_text("epoch,loss\n0.5,1\n1.0,2\n")
    assert_rows(read(tmp_path, "b.csv"), [("epoch", 0, NAN, 0.5), ("loss", 0, NAN, 1.0),
                                          ("epoch", 1, NAN, 1.0), ("loss", 1, NAN, 2.0)])
    # iter beats epoch; float-looking whole numbers are steps; an empty step cell → row number
    (tmp_path / "c.csv").write_text("epoch,ITER,loss\n1,100.0,5\n1,,6\n2,300,7\n")
    assert_rows(read(tmp_path, "c.csv"), [("epoch", 100, NAN, 1.0), ("loss", 100, NAN, 5.0),
                                          ("epoch", 1, NAN, 1.0), ("loss", 1, NAN, 6.0),
                                          ("epoch", 300, NAN, 2.0), ("loss", 300, NAN, 7.0)])
    # negative and large steps
    (tmp_path / "d.csv").write_text("step,x\n-1,1\n1000000000000,2\n9007199254740993,3\n")
    assert_rows(read(tmp_path, "d.csv"), [("x", -1, NAN, 1.0), ("x", 10**12, NAN, 2.0),
                                          ("x", 2**53 + 1, NAN, 3.0)])


def test_wall_time_units(tmp_path):
    (tmp_path / "a.csv").write_text(
        "step,timestamp,v\n"
        "0,1700000000,1\n"          # seconds
        "1,1700000000123,2\n"       # milliseconds
        "2,2024-01-02T03:04:05Z,3\n"  # ISO, UTC
        "3,2024-01-02T03:04:05,4\n"   # naive ISO: taken as UTC
        "4,soon,5\n"                 # unreadable: NaN
    )
    iso = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp()
    run = read(tmp_path, "a.csv")
    assert_rows(run, [("v", 0, 1700000000.0, 1.0), ("v", 1, 1700000000.123, 2.0), ("v", 2, iso, 3.0),
                      ("v", 3, iso, 4.0), ("v", 4, NAN, 5.0)])
    # wall_time beats time; the losing "time" column is a metric
    (tmp_path / "b.csv").write_text("time,wall_time,v\n0.25,10,1\n")
    assert_rows(read(tmp_path, "b.csv"), [("time", 0, 10.0, 0.25), ("v", 0, 10.0, 1.0)])


def test_long_format(tmp_path):
    with open(tmp_path / "long.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["tag", "step", "value", "wall_time"])
        w.writerows([["loss", 0, 1.0, 5], ["acc", 0, 0.5, 5], ["loss", 1, "", 6], ["", 1, 3, 6],
                     ["loss", 2, "nan", ""], ["acc", 2, "-inf", 7]])
    assert_rows(read(tmp_path, "long.csv"), [("loss", 0, 5.0, 1.0), ("acc", 0, 5.0, 0.5),
                                             ("loss", 2, NAN, NAN), ("acc", 2, 7.0, -INF)])
    (tmp_path / "m.csv").write_text("metric,value,extra\nf1,0.5,9\nf1,0.75,9\n")
    assert_rows(read(tmp_path, "m.csv"), [("f1", 0, NAN, 0.5), ("f1", 1, NAN, 0.75)])
    (tmp_path / "n.csv").write_text("Name,Value,Iteration\nlr,0.1,7\n")
    assert_rows(read(tmp_path, "n.csv"), [("lr", 7, NAN, 0.1)])
    (tmp_path / "bad.csv").write_text("tag,value\nx,1\nx,oops\nx,2\n")
    run = read(tmp_path, "bad.csv")
    assert_rows(run, [("x", 0, NAN, 1.0), ("x", 2, NAN, 2.0)])
    assert [(p.kind, p.offset) for p in run.problems] == [("bad-value", len("tag,value\nx,1\n"))]


def test_text_columns_and_bad_cells(tmp_path):
    text = (
        "step,model,loss,acc,\n"
        "0,resnet,1.0,0.1,0\n"
        "1,resnet,oops,0.2,1\n"
        "2,vit,0.5,n/a,2\n"
        "3,vit,0.25,0.4,3\n"
    )
    (tmp_path / "a.csv").write_text(text)
    run = read(tmp_path, "a.csv")
    # "model" is text (ignored); "loss" and "acc" are numbers with one bad cell each; the
    # unnamed last column (a pandas index) is ignored
    assert_rows(run, [("loss", 0, NAN, 1.0), ("acc", 0, NAN, 0.1), ("acc", 1, NAN, 0.2),
                      ("loss", 2, NAN, 0.5), ("loss", 3, NAN, 0.25), ("acc", 3, NAN, 0.4)])
    probs = sorted((p.offset, p.kind) for p in run.problems)
    assert probs == [(text.index("1,resnet"), "bad-value"), (text.index("2,vit"), "bad-value")]
    assert all(p.path == str(tmp_path / "a.csv") for p in run.problems)


def test_ragged_and_truncated_rows(tmp_path):
    data = b"step,a,b\n0,1,2\n1,3\n2,4,5,6\n3,7"
    (tmp_path / "a.csv").write_bytes(data)
    run = read(tmp_path, "a.csv")
    assert_rows(run, [("a", 0, NAN, 1.0), ("b", 0, NAN, 2.0), ("a", 1, NAN, 3.0),
                      ("a", 2, NAN, 4.0), ("b", 2, NAN, 5.0)])
    probs = sorted((p.kind, p.offset) for p in run.problems)
    assert probs == [("bad-record", data.index(b"2,4,5,6")), ("truncated", data.index(b"3,7"))]
    assert run.files[0].decoded_bytes == data.index(b"3,7") and run.files[0].size == len(data)
    # a complete last row without its newline is read
    (tmp_path / "b.csv").write_bytes(b"step,a\n0,1\n1,2")
    run = read(tmp_path, "b.csv")
    assert run.problems == [] and run.files[0].decoded_bytes == 14
    assert_rows(run, [("a", 0, NAN, 1.0), ("a", 1, NAN, 2.0)])


def test_several_files_share_tags_in_name_order(tmp_path):
    (tmp_path / "b.csv").write_text("step,loss\n5,0.5\n")
    (tmp_path / "a.csv").write_text("step,loss,acc\n0,1.0,0.1\n")
    (tmp_path / "c.jsonl").write_text('{"step": 9, "loss": 0.25}\n')
    run = read(tmp_path, "c.jsonl", "b.csv", "a.csv")
    assert_rows(run, [("loss", 0, NAN, 1.0), ("acc", 0, NAN, 0.1), ("loss", 5, NAN, 0.5), ("loss", 9, NAN, 0.25)])
    assert [f.path.name for f in run.files] == ["a.csv", "b.csv", "c.jsonl"]


def test_semicolon_tab_quotes_and_utf16(tmp_path):
    (tmp_path / "a.csv").write_text('step;"loss; total"\n0;1.5\n')
    assert_rows(read(tmp_path, "a.csv"), [("loss; total", 0, NAN, 1.5)])
    (tmp_path / "b.csv").write_text("step\tloss\n3\t2.5\n")
    assert_rows(read(tmp_path, "b.csv"), [("loss", 3, NAN, 2.5)])
    (tmp_path / "c.csv").write_text('step,"a,b","multi\nline"\n0,1,2\n')
    assert_rows(read(tmp_path, "c.csv"), [("a,b", 0, NAN, 1.0), ("multi\nline", 0, NAN, 2.0)])
    (tmp_path / "d.csv").write_bytes("step,损失\r\n1,0.5\r\n".encode("utf-16"))
    assert_rows(read(tmp_path, "d.csv"), [("损失", 1, NAN, 0.5)])


def test_not_utf8_and_unreadable(tmp_path):
    data = b"step,loss\n0,1\n\xff\xfe,2\n1,3\n"
    (tmp_path / "a.csv").write_bytes(data)
    run = read(tmp_path, "a.csv", "missing.csv")
    # the undecodable step cell is reported and its row gets its row number (1)
    assert_rows(run, [("loss", 0, NAN, 1.0), ("loss", 1, NAN, 2.0), ("loss", 1, NAN, 3.0)])
    assert sorted((p.kind, p.offset, Path(p.path).name) for p in run.problems) == [
        ("bad-encoding", data.index(b"\xff"), "a.csv"), ("bad-value", data.index(b"\xff"), "a.csv"),
        ("unreadable", None, "missing.csv")]
    assert [f.path.name for f in run.files] == ["a.csv"]


def test_empty_and_header_only_files(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"")
    (tmp_path / "b.csv").write_bytes(b"step,loss\r\n")
    (tmp_path / "c.jsonl").write_bytes(b"\n\n")
    run = read(tmp_path, "a.csv", "b.csv", "c.jsonl")
    assert run.scalars.num_rows == 0 and run.problems == []
    assert len(run.files) == 3


# --------------------------------------------------------------------------------------------
# JSON lines
# --------------------------------------------------------------------------------------------


def test_jsonl_written_by_json_module(tmp_path):
    records = [
        {"step": 0, "loss": 1.0, "phase": "train", "ok": True},
        {"step": 1, "loss": float("nan"), "acc": 0.5, "wall_time": 1700000000.5},
        {"acc": float("inf"), "step": 2, "loss": float("-inf"), "lr": None, "hist": [1, 2]},
        {"step": 3, "eval": {"loss": 0.25, "f1": {"macro": 0.5}}, "timestamp": 1},
        {"global_step": 99, "loss": 7},  # no "step" key on this line: row number
        {"step": 5, "acc": "inf", "note": "0.5", "big": 10**400},
    ]
    with open(tmp_path / "log.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")  # NaN / Infinity as JSON literals
    # computed here: step key = "step"; wall key = "wall_time" (first present of the names)
    want = [
        ("loss", 0, NAN, 1.0),
        ("loss", 1, 1700000000.5, NAN), ("acc", 1, 1700000000.5, 0.5),
        ("acc", 2, NAN, INF), ("loss", 2, NAN, -INF),
        ("eval/loss", 3, NAN, 0.25), ("eval/f1/macro", 3, NAN, 0.5), ("timestamp", 3, NAN, 1.0),
        ("global_step", 4, NAN, 99.0), ("loss", 4, NAN, 7.0),
        ("acc", 5, NAN, INF), ("big", 5, NAN, INF),
    ]
    run = read(tmp_path, "log.jsonl")
    assert run.problems == []
    assert_rows(run, want)


def test_jsonl_bad_lines_and_truncation(tmp_path):
    lines = [b'{"step": 0, "x": 1}\r\n', b'{"step": 1, "x": \n', b"[1, 2]\n", b"\xff\xfe\n",
             b'{"step": 2, "x": 3}\n', b"\n", b'{"step": 3, "x": 4}\n']
    tail = b'{"step": 4, "x'
    data = b"\xef\xbb\xbf" + b"".join(lines) + tail
    (tmp_path / "a.jsonl").write_bytes(data)
    run = read(tmp_path, "a.jsonl")
    assert_rows(run, [("x", 0, NAN, 1.0), ("x", 2, NAN, 3.0), ("x", 3, NAN, 4.0)])

    def off(i: int) -> int:
        return 3 + len(b"".join(lines[:i]))

    assert [(p.kind, p.offset) for p in run.problems] == [
        ("bad-record", off(1)), ("bad-record", off(2)), ("bad-record", off(3)), ("truncated", off(7))]
    assert run.files[0].decoded_bytes == off(7) and run.files[0].size == len(data)


def test_jsonl_long_format(tmp_path):
    (tmp_path / "a.jsonl").write_text(
        '{"tag": "loss", "step": 0, "value": 0.5, "wall_time": 1700000000000}\n'
        '{"metric": "acc", "step": 0, "value": "NaN"}\n'
        '{"name": "lr", "value": null, "step": 1}\n'
        '{"step": 2, "value": 3}\n'
    )
    assert_rows(read(tmp_path, "a.jsonl"), [("loss", 0, 1700000000.0, 0.5), ("acc", 0, NAN, NAN),
                                            ("value", 2, NAN, 3.0)])


# --------------------------------------------------------------------------------------------
# properties: random tables through the csv / json writers
# --------------------------------------------------------------------------------------------

reserved = set(tabular.STEP_COLUMNS + tabular.TIME_COLUMNS + tabular.TAG_COLUMNS + (tabular.VALUE_COLUMN,))
col_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), min_size=1, max_size=8).filter(
    lambda s: s.strip() == s and s.lower() not in reserved and s.isprintable()
)
cells = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**6), 10**6),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(col_names, min_size=1, max_size=5, unique_by=str.lower),
    st.lists(st.tuples(st.integers(-(10**9), 10**9), st.lists(cells, min_size=5, max_size=5)), max_size=30),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
)
def test_random_wide_csv(tmp_path_factory, names, rows, eol, bom):
    d = tmp_path_factory.mktemp("csv")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator=eol)
    w.writerow(["step", *names])
    for step, vals in rows:
        w.writerow([step, *["" if v is None else repr(v) for v in vals[: len(names)]]])
    (d / "m.csv").write_bytes(("\ufeff" if bom else "").encode() + buf.getvalue().encode("utf-8"))
    # a column whose cells are all empty holds no metric; everything else is numeric
    want = []
    for step, vals in rows:
        for name, v in zip(names, vals):
            if v is not None:
                want.append((name, step, NAN, float(v)))
    run = read(d, "m.csv")
    assert run.problems == []
    assert_rows(run, want)
    # the same file without its last newline (read by the row-by-row path) and with blank lines
    # and quoted cells (read by the bulk path when it can) gives the same scalars
    body = buf.getvalue()
    (d / "n.csv").write_bytes(body.rstrip("\r\n").encode("utf-8"))
    run = read(d, "n.csv")
    assert run.problems == []
    assert_rows(run, want)
    quoted = io.StringIO()
    csv.writer(quoted, lineterminator=eol).writerow(["step", *names])
    wq = csv.writer(quoted, lineterminator=eol, quoting=csv.QUOTE_ALL)
    for step, vals in rows:
        wq.writerow([step, *["" if v is None else repr(v) for v in vals[: len(names)]]])
        quoted.write(eol)
    (d / "q.csv").write_bytes(quoted.getvalue().encode("utf-8"))
    run = read(d, "q.csv")
    assert run.problems == []
    assert_rows(run, want)


json_values = st.one_of(
    st.none(), st.booleans(), st.text(max_size=5), st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**15), 10**15),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.dictionaries(col_names, json_values, max_size=5), max_size=20))
def test_random_jsonl(tmp_path_factory, records):
    d = tmp_path_factory.mktemp("jsonl")
    (d / "m.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    want = []
    nonfinite = {"nan": NAN, "inf": INF, "-inf": -INF, "+inf": INF, "infinity": INF, "-infinity": -INF,
                 "+infinity": INF, "-nan": NAN, "+nan": NAN}
    for i, r in enumerate(records):
        for k, v in r.items():
            if isinstance(v, bool) or v is None:
                continue
            if isinstance(v, str):
                if v.strip().lower() in nonfinite:
                    want.append((k, i, NAN, nonfinite[v.strip().lower()]))
                continue
            want.append((k, i, NAN, float(v)))
    run = read(d, "m.jsonl")
    assert run.problems == []
    assert_rows(run, want)


def test_jsonl_bad_step_values_fall_back_to_row_numbers(tmp_path):
    data = b'{"step": 10, "x": 1}\n{"step": "soon", "x": 2}\n{"step": 12, "x": 3}\n{"step": 13.0, "x": 4}\n'
    (tmp_path / "a.jsonl").write_bytes(data)
    run = read(tmp_path, "a.jsonl")
    assert_rows(run, [("x", 10, NAN, 1.0), ("x", 1, NAN, 2.0), ("x", 12, NAN, 3.0), ("x", 13, NAN, 4.0)])
    assert [(p.kind, p.offset) for p in run.problems] == [("bad-value", data.index(b'{"step": "soon"'))]
    # a fractional "epoch" is no step: row numbers, and epoch is a metric
    (tmp_path / "b.jsonl").write_bytes(b'{"epoch": 0.5, "x": 1}\n{"epoch": 1, "x": 2}\n')
    assert_rows(read(tmp_path, "b.jsonl"), [("epoch", 0, NAN, 0.5), ("x", 0, NAN, 1.0),
                                            ("epoch", 1, NAN, 1.0), ("x", 1, NAN, 2.0)])


def test_bulk_and_row_by_row_paths_agree(tmp_path, monkeypatch):
    """A clean file is parsed in bulk (pyarrow), never row by row; forcing the row-by-row
    path gives the same table."""
    lines = ["step,loss,acc,name,损失"]
    for i in range(2000):
        lines.append(f"{i},{1 / (i + 1)!r},{'' if i % 3 else 'nan'},\"r,{i}\",{'inf' if i % 7 == 0 else -i}")
    (tmp_path / "a.csv").write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    calls = []
    real = tabular._grid_python
    monkeypatch.setattr(tabular, "_grid_python", lambda *a, **k: calls.append(1) or real(*a, **k))
    bulk = rows_of(read(tmp_path, "a.csv"))
    assert calls == []
    monkeypatch.setattr(tabular, "_grid_arrow", lambda *a, **k: None)
    slow = rows_of(read(tmp_path, "a.csv"))
    assert calls == [1]
    assert len(bulk) == 2000 + 2000 // 3 + 1 + 2000 and rows_equal(bulk, slow)
