"""Resumed runs: the charts show the newest records from the restart step on, the downloads every
record.

Runs are written by tensorboardX (two writers into one folder, the second starting at an earlier
step; a writer whose steps go back inside its one file; ``purge_step``, which writes a SessionLog
START) and what sitegen charts is compared value by value with TensorBoard: its data server
(which preempts per tag) and its EventAccumulator with ``purge_orphaned_data=True`` (which purges
every tag at a START). The vectorized rule is checked against the obvious loop on random runs.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2
from tensorboardX import SummaryWriter

import sitegen
from sitegen.config import ChartsConfig, Config
from sitegen.model import RUN_SCALARS_SCHEMA, ReadOptions, RunSource, grouped_columns
from sitegen.prepare.assemble import assemble
from sitegen.prepare.resume import superseded, superseded_reference
from tests.support import page_payload
from tests.support.corpus import tf_file, tf_record
from tests.support.rustboard import rustboard_histograms, rustboard_scalars
from tests.support.sites import assert_same_site, build_site

BASE = 1_700_000_000.0
WHOLE = Config(title="Resumed", charts=ChartsConfig(points_per_chart=100_000))  # every point charted: compared whole


def charted(run_dir: Path, config: Config = WHOLE) -> dict[str, list[tuple[int, float, float]]]:
    """tag -> [(step, wall_time, value)] of the run's chart lines, as the site draws them
    (``run_dir``: a folder of one run, else the only run below it)."""
    try:
        data = sitegen.read_run(run_dir)
    except FileNotFoundError:
        (data,) = sitegen.read_runs(run_dir)
    site_run = assemble(RunSource(".", data.format, run_dir, ()), data, [], config)
    out = {}
    for ln in site_run.lines:
        assert not ln.series.thinned
        out[ln.tag] = list(zip(ln.series.step.tolist(), ln.series.wall_time.tolist(), ln.series.value.tolist()))
    return out


def assert_same(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for tag in want:
        g, w = got[tag], want[tag]
        assert [s for s, _, _ in g] == [s for s, _, _ in w], tag
        assert np.array_equal(np.array([v for _, _, v in g]).view("u8"), np.array([v for _, _, v in w], np.float64).view("u8")), tag
        assert np.allclose([t for _, t, _ in g], [t for _, t, _ in w], rtol=0, atol=1e-6), tag


def writer(run_dir: Path, suffix: str, **kw) -> SummaryWriter:
    return SummaryWriter(str(run_dir), filename_suffix=suffix, flush_secs=10_000, **kw)  # suffixes: name order = write order


def first_life(w: SummaryWriter, last: int) -> None:
    """Steps 0..last: the loss every step, the learning rate every 5, eval every 25."""
    for step in range(last + 1):
        w.add_scalar("train/loss", 2.0 / (step + 1), step, walltime=BASE + step)
        if step % 5 == 0:
            w.add_scalar("train/lr", 0.1 - step * 1e-4, step, walltime=BASE + step)
        if step % 25 == 0:
            w.add_scalar("eval/acc", step / 1000, step, walltime=BASE + step + 0.5)


def test_two_writers_chart_what_tensorboards_data_server_serves(tmp_path: Path):
    """The job crashed after step 230 and restarted from the checkpoint of step 160, logging the
    loss every 3 steps now (the old records between them must go too) and eval every 25."""
    run = tmp_path / "logs" / "run"
    with writer(run, ".1") as w:
        first_life(w, 230)
    with writer(run, ".2") as w:
        for step in range(160, 400, 3):
            w.add_scalar("train/loss", -1.0 / (step + 1), step, walltime=BASE + 1000 + step)
            if step % 25 == 1:
                w.add_scalar("eval/acc", -step / 1000, step, walltime=BASE + 1000 + step)
    want = {tag: rows for (name, tag), rows in rustboard_scalars(tmp_path / "logs").items() if name == "run"}
    got = charted(run)
    assert_same(got, want)
    # the restart did supersede something, and only from step 160 on
    raw = sitegen.read_scalars(run).to_pydict()
    assert len(raw["step"]) > sum(len(v) for v in got.values())
    assert [s for s, _, _ in got["train/loss"]][:162] == list(range(161)) + [163]
    assert got["train/lr"] == want["train/lr"] and len(got["train/lr"]) == 47  # never written again: all kept


def test_purge_step_session_start_charts_what_the_event_accumulator_keeps(tmp_path: Path):
    """``SummaryWriter(purge_step=S)`` announces the restart (SessionLog START at S): what every
    tag wrote from S on is orphaned, also the tags the second life has not written yet."""
    run = tmp_path / "run"
    with writer(run, ".1") as w:
        first_life(w, 230)
        for step in range(200, 231, 10):
            w.add_scalar("late/metric", step / 7, step, walltime=BASE + step)
    with writer(run, ".2", purge_step=160) as w:
        for step in range(160, 200):  # still running: no eval, no learning rate yet
            w.add_scalar("train/loss", -1.0 / (step + 1), step, walltime=BASE + 1000 + step)
    ea = EventAccumulator(str(run), size_guidance={"scalars": 0}, purge_orphaned_data=True)
    ea.Reload()
    want = {tag: [(e.step, e.wall_time, e.value) for e in ea.Scalars(tag)] for tag in ea.Tags()["scalars"]}
    assert [s for s, _, _ in want["eval/acc"]] == [0, 25, 50, 75, 100, 125, 150]  # purged by the START alone
    assert want.pop("late/metric") == []  # every record orphaned: no chart
    assert_same(charted(run), want)
    # the data server ignores the START: there the old eval records from 175 on would stay
    assert [s for s, _, _ in rustboard_scalars(tmp_path)[("run", "eval/acc")]][-1] == 225
    # with the fast and the reference decoder alike
    data = sitegen.read_run(run, options=ReadOptions(fast=False))
    assert data.restarts == sitegen.read_run(run).restarts == [(231 + 47 + 10 + 4, 160)]


def test_steps_going_back_inside_one_file_are_a_restart_too(tmp_path: Path):
    """One writer whose steps go back (a job that reloads a checkpoint in-process, or appends
    to the file it had): the same rule as across files, as TensorBoard's data server does it.
    A tag logged at one step many times keeps its newest value."""
    run = tmp_path / "logs" / "run"
    with writer(run, ".1") as w:
        first_life(w, 120)
        for step in range(60, 150, 2):
            w.add_scalar("train/loss", 5.0 + step, step, walltime=BASE + 500 + step)
        for i in range(4):
            w.add_scalar("final/score", 0.5 + i, 0, walltime=BASE + 900 + i)
    want = {tag: rows for (name, tag), rows in rustboard_scalars(tmp_path / "logs").items() if name == "run"}
    got = charted(run)
    assert_same(got, want)
    assert [v for _, _, v in got["final/score"]] == [3.5]
    assert got["train/loss"][60] == (60, BASE + 560, 65.0)


def test_statistics_follow_the_newest_records(tmp_path: Path):
    """The last value, min and max (the index's best) of a resumed line are the newer life's."""
    run = tmp_path / "run"
    with writer(run, ".1") as w:
        for step in range(100):
            w.add_scalar("loss", 0.01 if step == 90 else 1.0, step, walltime=BASE + step)  # an orphaned best
    with writer(run, ".2") as w:
        for step in range(80, 95):
            w.add_scalar("loss", 2.0, step, walltime=BASE + 500 + step)
    data = sitegen.read_run(run)
    (line,) = assemble(RunSource(".", data.format, run, ()), data, [], WHOLE).lines
    st = line.series.stats
    assert (st.count, st.last_step, st.last_value, st.min_value, st.max_value) == (95, 94, 2.0, 1.0, 2.0)
    assert (st.min_step, st.max_step) == (0, 80)


def resumed_archive(root: Path) -> Path:
    run = root / "proj" / "run"
    with writer(run, ".1") as w:
        first_life(w, 230)
    with writer(run, ".2", purge_step=160) as w:
        for step in range(160, 260):
            w.add_scalar("train/loss", -1.0 / (step + 1), step, walltime=BASE + 1000 + step)
            if step % 25 == 0:
                w.add_scalar("eval/acc", -step / 1000, step, walltime=BASE + 1000 + step)
    with writer(root / "proj" / "plain", ".1") as w:
        first_life(w, 50)
    return run


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_site_charts_the_newest_and_downloads_keep_every_record(tmp_path: Path, language: str):
    run = resumed_archive(tmp_path / "logs")
    config = Config(title="Resumed", language=language)
    build_site(tmp_path / "logs", tmp_path / "site", config=config)
    (page,) = [p for p in (tmp_path / "site").glob("runs/*/index.html") if "proj-run-" in p.parent.name]
    raw = sitegen.read_scalars(run)
    # the Parquet download: every record, the superseded ones too, each tag's in write order
    (parquet,) = page.parent.glob("*.parquet")
    got = pq.read_table(parquet)
    assert got.num_rows == raw.num_rows == 231 + 47 + 10 + 100 + 4

    def per_tag(t: pa.Table) -> dict:
        d = t.to_pydict()
        out: dict = {}
        for tag, step, value in zip(d["tag"], d["step"], d["value"]):
            out.setdefault(tag, []).append((step, value))
        return out

    assert per_tag(got) == per_tag(raw)
    # the CSV's columns (scalars.js) hold every record too
    js = (page.parent / "scalars.js").read_text()
    columns = json.loads(js[js.index("=") + 1 : js.rindex(";")])
    assert dict(columns["tag"]["rl"]) == {tag: len(rows) for tag, rows in per_tag(raw).items()}
    # the note: how many records, from which steps (both catalogues)
    html = page.read_text()
    gone = 71 + 15 + 3  # loss 160..230, lr 160..230 every 5, eval 175..225
    note = {"en": f"Resumed run: {gone} records at steps 160–230 were written before a restart",
            "zh-CN": f"续训的运行：第 160–230 步的 {gone} 条记录写于重启之前"}[language]
    assert note in html
    plain = [p for p in (tmp_path / "site").glob("runs/*/index.html") if "proj-plain-" in p.parent.name][0]
    assert "superseded-note" not in plain.read_text()
    # the charts: the newest records only, as the run's chart lines hold them
    drawn = {}
    for chart in page_payload(page)["charts"]:
        rows = chart["rows"]
        ((tag, n),) = rows["s"]["rl"]
        drawn[tag] = list(zip(arithmetic(rows["x"]["ap"]), np.frombuffer(base64.b64decode(rows["y"]["f4"]), "<f4").tolist()))
        assert len(drawn[tag]) == n
    assert drawn == {tag: [(s, v) for s, _, v in rows] for tag, rows in charted(run).items()}
    assert [s for s, _ in drawn["train/loss"]] == list(range(260))
    # the comparison page's curves of the run: the same newest records
    compared = {}
    for piece in (tmp_path / "site" / "compare" / "all").glob("p-*.js"):
        text = piece.read_text()
        for tag, (runs, x, _wall, y) in json.loads(text[text.index("]=") + 2 : text.rindex(";")]):
            at = 0
            for entry in runs:
                if entry["s"] == "proj/run":
                    compared[tag] = list(zip(column(x)[at : at + entry["n"]], column(y)[at : at + entry["n"]]))
                at += entry["n"]
    assert compared == drawn


def column(col: dict) -> list:
    """A number column of a chart or comparison piece: an arithmetic run, int32 or float32."""
    if "ap" in col:
        return arithmetic(col["ap"])
    ((kind, data),) = col.items()
    return np.frombuffer(base64.b64decode(data), {"i4": "<i4", "f4": "<f4"}[kind]).tolist()


def arithmetic(ap: list) -> list[int]:
    """A chart's x column written as a start and runs of (difference, count)."""
    out = [ap[0]]
    for step, count in ap[1]:
        out += [out[-1] + step * (k + 1) for k in range(count)]
    return out


def test_an_appended_restart_rebuilds_to_the_cold_build(tmp_path: Path):
    """A run still being written restarts in the same file (a START and earlier steps appended):
    the rebuild, which decodes only the tail through the decode cache, equals a cold build."""
    logs = tmp_path / "logs"
    run = logs / "proj" / "run"
    with writer(run, ".1") as w:
        first_life(w, 120)
    (log,) = run.glob("*tfevents*")
    out, cache = tmp_path / "site", tmp_path / "cache"
    build_site(logs, out, cache=cache)
    start = event_pb2.Event(wall_time=BASE + 800, step=90)
    start.session_log.status = event_pb2.SessionLog.START
    with log.open("ab") as f:
        f.write(tf_record(start.SerializeToString()))
        f.write(tf_file([("train/loss", s, 7.0, BASE + 800 + s) for s in range(90, 100)]))
    build_site(logs, out, cache=cache)
    cold = tmp_path / "cold"
    build_site(logs, cold, cache=tmp_path / "cache2")
    assert_same_site(out, cold, news=False)
    # another file joins the run: the grown file now comes whole from its cache entry
    with writer(run, ".2") as w:
        w.add_scalar("train/extra", 1.0, 300, walltime=BASE + 2000)
    build_site(logs, out, cache=cache)
    cold = tmp_path / "cold2"
    build_site(logs, cold, cache=tmp_path / "cache3")
    assert_same_site(out, cold, news=False)
    data = sitegen.read_run(run)
    assert data.restarts == [(121 + 25 + 5, 90)]
    lines = charted(run)
    assert [s for s, _, _ in lines["eval/acc"]] == [0, 25, 50, 75]
    assert [s for s, _, _ in lines["train/loss"]][-11:] == [89, *range(90, 100)]
    assert "superseded-note" in next(p for p in out.glob("runs/*/index.html")).read_text()


def test_other_formats_restarting_inside_one_file(tmp_path: Path):
    """MLflow (a resumed run appends to its metric file) and CSV (a script that appends after a
    restart) follow the same rule: newest records from the restart step on. MLflow keeps several
    values at one step by design (a metric logged without a step is all step 0): there only a
    step going back is a restart, and the statistics keep every value of a repeated step."""
    from tests.support.corpus import write_mlflow

    lines = b"".join(b"%d %r %d\n" % (1_700_000_000_000 + s, float(s), s) for s in range(10))
    lines += b"".join(b"%d %r %d\n" % (1_700_000_100_000 + s, -float(s), s) for s in range(5, 8))
    write_mlflow(tmp_path / "ml", lines)
    got = charted(tmp_path / "ml")["loss"]
    assert [(s, v) for s, _, v in got] == [(s, float(s)) for s in range(5)] + [(s, -float(s)) for s in range(5, 8)]
    no_step = b"".join(b"%d %r 0\n" % (1_700_000_000_000 + k, v) for k, v in enumerate([0.5, 0.1, 0.3]))
    write_mlflow(tmp_path / "ml0", no_step)
    (data,) = sitegen.read_runs(tmp_path / "ml0")
    site_run = assemble(RunSource(data.name, data.format, tmp_path, ()), data, [], WHOLE)
    (line,) = site_run.lines
    st = line.series.stats
    assert (st.count, st.min_value, st.max_value, st.last_value) == (3, 0.1, 0.5, 0.3) and site_run.superseded is None
    csv_run = tmp_path / "csv"
    csv_run.mkdir()
    rows = ["step,loss"] + [f"{s},{s}" for s in range(10)] + [f"{s},{-s}" for s in range(4, 12)]
    (csv_run / "metrics.csv").write_text("\n".join(rows) + "\n")
    got = charted(csv_run)["loss"]
    assert [(s, v) for s, _, v in got] == [(s, float(s)) for s in range(4)] + [(s, -float(s)) for s in range(4, 12)]


def test_vectorized_rule_matches_the_obvious_loop():
    rng = np.random.default_rng(7)
    for _ in range(2000):
        n = int(rng.integers(1, 60))
        tags = [f"t{k}" for k in rng.integers(0, int(rng.integers(1, 5)), n)]
        steps = rng.integers(-3, 15, n) if rng.random() < 0.6 else np.sort(rng.integers(0, 80, n))
        restarts = [(int(rng.integers(0, n + 1)), int(rng.integers(-2, 15))) for _ in range(int(rng.integers(0, 3)))]
        table = pa.table({"tag": tags, "step": steps.astype(np.int64), "wall_time": np.zeros(n), "value": np.zeros(n)},
                         schema=RUN_SCALARS_SCHEMA)
        g, cols = grouped_columns(table)
        repeats = bool(rng.random() < 0.3)
        mask = superseded(cols["step"], g.bounds, None if g.in_place else g.order, restarts, repeats=repeats)
        got = np.zeros(n, dtype=bool)
        if mask is not None:
            got[(np.arange(n) if g.in_place else g.order)[mask]] = True
        want = superseded_reference(tags, steps.tolist(), restarts, repeats=repeats)
        assert got.tolist() == want, (tags, steps.tolist(), restarts, repeats)


WANDB_RESUMED = """
import sys, time, wandb
run = wandb.init(mode="offline", dir=sys.argv[1], project="p", id="resumed01", resume="allow")
for i in range(5):
    run.log({"loss": float(i)})
run.finish()
time.sleep(1.1)
run = wandb.init(mode="offline", dir=sys.argv[1], project="p", id="resumed01", resume="allow")
for i in range(3):
    run.log({"loss": 10.0 + i})
run.finish()
"""


def test_a_resumed_wandb_run_goes_on_rather_than_rewinds(tmp_path: Path):
    """W&B never rewinds on resume: an offline resume starts ``_step`` at 0 again (wandb's own
    sync numbers those rows after the earlier ones), so nothing of the first life is superseded."""
    import os
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(home), "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true",
           "WANDB_CONSOLE": "off", "WANDB_MODE": "offline"}
    subprocess.run([sys.executable, "-c", WANDB_RESUMED, str(tmp_path)], check=True, env=env, timeout=300, cwd=tmp_path)
    raw = sitegen.read_scalars(tmp_path / "wandb").to_pydict()
    assert raw["step"] == [0, 1, 2, 3, 4, 0, 1, 2]  # (as written: the second life counts from 0)
    (data,) = sitegen.read_runs(tmp_path / "wandb")
    site_run = assemble(RunSource(data.name, data.format, tmp_path, ()), data, [], WHOLE)
    assert site_run.superseded is None
    (line,) = site_run.lines
    assert line.series.stats.count == 8 and line.series.step.tolist()[-2:] == [3, 4]
    assert line.series.value.tolist()[-2:] == [3.0, 4.0]  # the first life's end is still drawn


def test_histograms_and_images_of_a_resumed_run_are_the_newest_too(tmp_path: Path):
    """Histograms, images and texts follow the same rule per tag: the histograms shown are the
    ones TensorBoard's data server serves."""
    run = tmp_path / "logs" / "run"
    rng = np.random.default_rng(3)
    image = np.zeros((3, 4, 4), np.uint8)
    with writer(run, ".1") as w:
        for step in range(0, 100, 10):
            w.add_histogram("weights", rng.normal(0, 1, 50), step, walltime=BASE + step)
            w.add_image("sample", image, step, walltime=BASE + step)
            w.add_text("note", f"first life {step}", step, walltime=BASE + step)
    with writer(run, ".2") as w:
        for step in range(55, 80, 10):
            w.add_histogram("weights", rng.normal(5, 1, 50), step, walltime=BASE + 500 + step)
            w.add_image("sample", image + 9, step, walltime=BASE + 500 + step)
    want = rustboard_histograms(tmp_path / "logs")[("run", "weights")]
    data = sitegen.read_run(run)
    site_run = assemble(RunSource(".", data.format, run, ()), data, [], WHOLE)
    got = site_run.data.histograms
    assert [h.step for h in got] == [s for s, _, _ in want] == [0, 10, 20, 30, 40, 50, 55, 65, 75]
    for h, (_, wall, buckets) in zip(got, want):
        rows = np.array(buckets)
        assert wall == pytest.approx(h.wall_time, abs=1e-6)
        assert np.allclose(h.count.sum(), rows[:, 2].sum())
    assert [(im.step, im.wall_time >= BASE + 500) for im in site_run.data.images] == \
        [(s, s in (55, 65, 75)) for s in [0, 10, 20, 30, 40, 50, 55, 65, 75]]
    assert [t.step for t in site_run.data.texts] == list(range(0, 100, 10))  # never written again: all kept


def test_a_resumed_visualdl_run_charts_the_newest_records(tmp_path: Path):
    """VisualDL's LogWriter starts a new ``vdlrecords`` file per session (VisualDL itself reads
    only the newest one): the two sessions fold into one run, the newest records from the
    restart on, as the obvious loop over every record in write order says."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from visualdl import LogWriter

    run = tmp_path / "run"
    for session, (first, last, sign) in enumerate([(0, 120, 1.0), (70, 150, -1.0)]):
        with LogWriter(logdir=str(run), file_name=f"vdlrecords.{1_700_000_000 + session}.log") as w:
            for step in range(first, last + 1, 1 if session == 0 else 4):
                w.add_scalar("train/loss", sign / (step + 1), step, walltime=1_700_000_000_000 + 1000 * session + step)
                if step % 30 == 0:
                    w.add_scalar("eval/acc", sign * step / 200, step, walltime=1_700_000_000_000 + 1000 * session + step)
    raw = sitegen.read_scalars(run).to_pydict()
    dropped = superseded_reference(raw["tag"], raw["step"], [])
    want: dict = {}
    for tag, step, wall, value, gone in zip(raw["tag"], raw["step"], raw["wall_time"], raw["value"], dropped):
        if not gone:
            want.setdefault(tag, []).append((step, wall, value))
    assert sum(dropped) == 51 + 2  # loss 70..120, eval 90 and 120
    assert_same(charted(run), want)
