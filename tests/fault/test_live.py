"""Building while a writer appends: only complete records are used, the next build gets the rest."""
from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import corpus
from testpaths import page_payload
from sitegen.pipeline.build import BuildOptions, build
from sitegen.pages.charts import decode_numbers
from sitegen.config import Config
from sitegen.ingest import tfevents, visualdl
from sitegen.cache.store import Store
from sitegen.model import ReadOptions

N = 2000


def _writer(path: Path, stop: threading.Event, done: threading.Event) -> None:
    """Append raw records in small, unaligned pieces (a writer mid-flush leaves partial records)."""
    data = corpus.tf_file([("loss", i, float(i), 1.7e9 + i) for i in range(N)])
    with path.open("ab", buffering=0) as f:
        pos = 0
        while pos < len(data) and not stop.is_set():
            step = 997  # never a record boundary for long
            f.write(data[pos : pos + step])
            pos += step
            time.sleep(0.05)
    done.set()


def _last_drawn_step(site: Path) -> int:
    """The last step of the run page's chart, decoded like the page script does."""
    (page,) = site.resolve().glob("runs/*/index.html")
    chart = page_payload(page)["charts"][0]
    return decode_numbers(chart["rows"]["x"])[-1]


def test_build_while_a_writer_appends(tmp_path):
    run = tmp_path / "arch" / "live"
    run.mkdir(parents=True)
    path = run / "events.out.tfevents.1700000000.host"
    path.write_bytes(b"")
    cache = tmp_path / "cache"
    stop, done = threading.Event(), threading.Event()
    t = threading.Thread(target=_writer, args=(path, stop, done), daemon=True)
    t.start()
    try:
        results = []
        while not done.is_set() or not results:
            results.append(build(tmp_path / "arch", tmp_path / "site", BuildOptions(config=Config(), cache=cache)))
            # the cache holds only complete records, in order, as a prefix of the series
            data = Store(cache).read_file(path, ReadOptions(), tfevents.decode_file)
            steps = data.scalars["step"].to_pylist()
            assert steps == list(range(len(steps)))
            assert {p.kind for p in data.problems} <= {"truncated"}
    finally:
        stop.set()
        t.join(30)
    assert len(results) >= 2 and all(r.runs == 1 for r in results)
    # the writer is done: the next build (through the cache, decoding only the appended tail)
    # shows the full series, and a build without the cache agrees
    final = build(tmp_path / "arch", tmp_path / "site", BuildOptions(config=Config(), cache=cache))
    assert not final.problems
    full = Store(cache).read_file(path, ReadOptions(), tfevents.decode_file)
    assert full.scalars["step"].to_pylist() == list(range(N)) and full.files[0].decoded_bytes == path.stat().st_size
    fresh, _ = tfevents.decode_file(path, ReadOptions())
    assert fresh.scalars.equals(full.scalars)
    assert _last_drawn_step(tmp_path / "site") == N - 1


def test_tensorboardx_and_visualdl_writers_flushing(tmp_path):
    """The real writers, flushed after every record, read through the decode cache after each flush:
    always a clean prefix, and everything once the writer is closed."""
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(tmp_path / "tb"), flush_secs=3600)
    (tb,) = (tmp_path / "tb").glob("*tfevents*")
    cache = Store(tmp_path / "cache")
    for i in range(60):
        w.add_scalar("loss", float(i), i)
        w.flush()
        run = cache.read_file(tb, ReadOptions(), tfevents.decode_file)
        steps = run.scalars["step"].to_pylist()  # tensorboardX's flush does not wait for its queue
        assert steps == list(range(len(steps))) and {p.kind for p in run.problems} <= {"truncated"}
    w.close()
    run = cache.read_file(tb, ReadOptions(), tfevents.decode_file)
    assert run.scalars["step"].to_pylist() == list(range(60)) and not run.problems

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from visualdl import LogWriter
    lw = LogWriter(logdir=str(tmp_path / "vdl"))
    for i in range(40):
        lw.add_scalar("loss", float(i), i)
        lw.flush()
        (vf,) = (tmp_path / "vdl").glob("vdlrecords*")
        run = cache.read_file(vf, ReadOptions(), visualdl.decode_file)
        steps = run.scalars["step"].to_pylist()
        assert steps == list(range(len(steps))) and {p.kind for p in run.problems} <= {"truncated"}
    lw.close()
    run = cache.read_file(vf, ReadOptions(), visualdl.decode_file)
    assert run.scalars["step"].to_pylist() == list(range(40)) and not run.problems
