"""Building while a writer appends: only complete records are used, the next build gets the rest."""
from __future__ import annotations

from pathlib import Path

from sitegen.cache.store import Store
from sitegen.config import Config
from sitegen.ingest import tfevents, visualdl
from sitegen.model import ReadOptions
from sitegen.pages.charts import decode_numbers
from sitegen.pipeline.build import BuildOptions, build
from tests.support import corpus, page_payload

N = 2000
PIECE = 997  # bytes a write: never a record boundary for long (a writer mid-flush leaves partial records)
BETWEEN = 7  # pieces written between two builds


class Writer:
    """Appends an event file of ``N`` scalar records, one piece at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = corpus.tf_file([("loss", i, float(i), 1.7e9 + i) for i in range(N)])
        self.pieces = [data[i : i + PIECE] for i in range(0, len(data), PIECE)]
        self.written = 0

    def append(self) -> bool:
        """Write the next piece; False when there is none left."""
        if self.written == len(self.pieces):
            return False
        with self.path.open("ab") as f:
            f.write(self.pieces[self.written])
        self.written += 1
        return True


def _last_drawn_step(site: Path) -> int:
    """The last step of the run page's chart, decoded like the page script does."""
    (page,) = site.resolve().glob("runs/*/index.html")
    chart = page_payload(page)["charts"][0]
    return decode_numbers(chart["rows"]["x"])[-1]


def test_build_while_a_writer_appends(tmp_path, monkeypatch):
    """Pieces are written between builds and during them: right after the decode cache looked
    at the file (its size and mtime) and before it is decoded. Every build's cache holds only
    complete records, in order, as a prefix of the series; the next build gets the rest."""
    run = tmp_path / "arch" / "live"
    run.mkdir(parents=True)
    path = run / "events.out.tfevents.1700000000.host"
    path.write_bytes(b"")
    writer = Writer(path)
    decode = tfevents.decode_file

    def growing(p, options, **kw):  # the file grows while the build reads it
        writer.append()
        return decode(p, options, **kw)

    monkeypatch.setattr(tfevents, "decode_file", growing)
    cache = tmp_path / "cache"
    results, seen = [], []
    while writer.written < len(writer.pieces):
        for _ in range(BETWEEN):
            writer.append()
        results.append(build(tmp_path / "arch", tmp_path / "site", BuildOptions(config=Config(), cache=cache)))
        data = Store(cache).read_file(path, ReadOptions(), decode)
        steps = data.scalars["step"].to_pylist()
        assert steps == list(range(len(steps)))
        assert {p.kind for p in data.problems} <= {"truncated"}
        seen.append(len(steps))
    assert len(results) == -(-len(writer.pieces) // (BETWEEN + 1)) and all(r.runs == 1 for r in results)
    assert seen == sorted(seen) and 0 < seen[0] < N  # the series grew build after build
    # the writer is done: the next build (through the cache, decoding only the appended tail)
    # shows the full series, and a build without the cache agrees
    monkeypatch.setattr(tfevents, "decode_file", decode)
    final = build(tmp_path / "arch", tmp_path / "site", BuildOptions(config=Config(), cache=cache))
    assert not final.problems
    full = Store(cache).read_file(path, ReadOptions(), decode)
    assert full.scalars["step"].to_pylist() == list(range(N)) and full.files[0].decoded_bytes == path.stat().st_size
    fresh, _ = decode(path, ReadOptions())
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
