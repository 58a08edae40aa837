"""The W&B reader against run files written by the real ``wandb`` package (offline mode), each
value compared with what wandb's own protobuf classes and ``json.loads`` read from the same file.

Real runs start wandb's service (about 3 s each here), so one module fixture writes them: a run
of 301 history rows (nested dict, NaN, +-inf, a huge int, a string, a bool, a hostile key, an
explicit step, config and summary updates) and its resumption in a second folder (same id).
The damaged files are made from its bytes; block-end cases are laid out with the framer of
``tests/support/wandbgen.py``.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from sitegen.ingest import READERS
from sitegen.ingest import wandb as reader
from sitegen.ingest.scan import scan
from sitegen.model import ReadOptions, RunSource
from tests.support import wandbgen

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "wandb"


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wandb")
    wandbgen.write_runs(root)
    return root


def rows(run) -> list[tuple]:
    return list(zip(*(run.scalars.column(c).to_pylist() for c in ("tag", "step", "wall_time", "value"))))


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def assert_rows(got: list[tuple], want: list[tuple]) -> None:
    """``want`` in file order; the reader groups the scalars by tag (in name order)."""
    want = sorted(want, key=lambda r: r[0])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[0] == w[0] and g[1] == w[1] and same(g[2], w[2]) and same(g[3], w[3]), (g, w)


def one(path: Path, options: ReadOptions = ReadOptions()):
    return reader.read(RunSource("r", "wandb", path.parent, (path,)), options)


def first_file(archive: Path) -> Path:
    return sorted((archive / "wandb").glob("offline-run-*/run-*.wandb"))[0]


def test_scan_merges_a_resumed_run_and_skips_latest_run(archive: Path):
    problems: list = []
    found = scan(archive, problems=problems)
    assert [s.format for s in found] == ["wandb"]
    assert problems == []  # latest-run is a link to a run folder: not walked into again
    dirs = sorted(p.name for p in (archive / "wandb").glob("offline-run-*"))
    assert found[0].name == f"wandb/{dirs[0]}" and [f.parent.name for f in found[0].files] == dirs


def test_every_value_equals_wandbs_own_reading(archive: Path):
    source = scan(archive)[0]
    run = READERS["wandb"].read(source)
    ref = wandbgen.reference(list(source.files))
    assert run.problems == []
    assert_rows(rows(run), ref["rows"])
    tags = {r[0] for r in ref["rows"]}
    assert {"loss", "acc/top1", "nested.x", "nested.y", "inf", "neg", "big", wandbgen.HOSTILE} <= tags
    assert "text" not in tags and "flag" not in tags and "_step" not in tags
    values = {r[3] for r in rows(run) if r[0] in ("inf", "neg")}
    assert values == {math.inf, -math.inf}
    assert all(math.isnan(r[3]) for r in rows(run) if r[0] == "nested.y")
    assert [r[1] for r in rows(run) if r[0] == "loss"][-4:] == [400, 500, 501, 502]
    # config: the run record's, then the update; summary folded over both files
    assert run.hparams == {"lr": 0.1, "opt.name": "adam", "opt.betas": "[0.9, 0.99]", "drop": 1.0, "extra": 3.0}
    assert ref["config"]["extra"] == 3 and ref["config"]["opt"]["betas"] == [0.9, 0.99]
    for key, value in ref["summary"].items():
        if key.startswith("_"):
            continue
        got = run.meta[f"summary.{key}"]
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            assert got == ("NaN" if math.isnan(value) else ("+inf" if value > 0 else "-inf"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            assert float(got) == value, key
        else:
            assert got == str(value), key
    info = ref["run"]
    assert run.meta["title"] == info["display_name"] and run.meta["experiment"] == info["project"]
    assert run.meta["notes"] == info["notes"] and run.meta["tags"] == ", ".join(info["tags"])
    assert run.meta["tag:host"] == info["host"] and float(run.meta["start_time"]) == info["start_time"]
    assert run.meta["status"] == "FINISHED" and run.meta["exit_code"] == str(ref["exit"]) == "0"
    assert "tag:python" in run.meta  # the environment record (wandb >= 0.19)
    assert_images(run, source.directory, ref)
    assert not any(t.startswith("sample.") for t in tags)  # an image's leaf items are not charts


def test_a_wandb_016_file(tmp_path: Path):
    """A run written by wandb 0.16.6 (flat keys, nested dicts as JSON values), committed."""
    path = next(FIX.glob("*/run-*.wandb"))
    run = one(path)
    ref = wandbgen.reference([path])
    assert run.problems == [] and len(ref["rows"]) > 0
    assert_rows(rows(run), ref["rows"])
    assert {"nested.x", "nested.y"} <= {r[0] for r in ref["rows"]}
    assert run.hparams["opt.name"] == "adam" and run.meta["title"] == ref["run"]["display_name"]
    assert_images(run, path.parent, ref)


def assert_images(run, folder: Path, ref: dict) -> None:
    """The images the history names, each the bytes of its file, at its row's step."""
    assert len(ref["images"]) == 2
    got = [(i.tag, i.step, i.mime, i.data) for i in run.images]
    want = [(t, s, "image/png", (folder / "files" / p).read_bytes()) for t, s, p in ref["images"]]
    assert got == want


def cut_points(data: bytes) -> list[int]:
    offs = [o for o, _, _ in wandbgen.chunks(data)]
    return [offs[len(offs) // 3] + 3, offs[len(offs) // 2] + 9, len(data) - 1, 8]


def test_a_cut_tail_keeps_every_record_before_it(archive: Path, tmp_path: Path):
    data = first_file(archive).read_bytes()
    for cut in cut_points(data):
        path = tmp_path / "run-x.wandb"
        path.write_bytes(data[:cut])
        run = one(path)
        assert_rows(rows(run), wandbgen.reference([path])["rows"])
        assert [p.kind for p in run.problems] == ["truncated"], cut
        assert run.problems[0].offset <= cut and str(path) == run.problems[0].path
        assert run.meta["status"] == "RUNNING"


def test_a_flipped_byte_stops_reading_at_its_chunk(archive: Path, tmp_path: Path):
    data = bytearray(first_file(archive).read_bytes())
    offs = [o for o, _, _ in wandbgen.chunks(bytes(data))]
    at = offs[len(offs) // 2]
    data[at + 7] ^= 0x40  # in the payload: its checksum no longer matches
    path = tmp_path / "run-x.wandb"
    path.write_bytes(bytes(data))
    run = one(path)
    assert [(p.kind, p.offset) for p in run.problems] == [("bad-crc", at)]
    want = wandbgen.reference([path])["rows"]  # the reference stops at the same chunk
    assert 0 < len(want) and len(rows(run)) == len(want)
    assert_rows(rows(run), want)


def test_block_ends_padding_and_a_zero_length_first_chunk(archive: Path, tmp_path: Path):
    """Records laid out so that one block ends in 3 bytes of padding and the next leaves
    exactly 7 bytes: the writer then starts the next record with an empty FIRST chunk."""
    payloads = wandbgen.records(first_file(archive).read_bytes())
    head, rest = payloads[:5], payloads[5:]
    used = len(wandbgen.frame(head))
    pad = wandbgen.filler(wandbgen.BLOCK - used - 3 - 7)  # this record ends 3 bytes before the block end
    second = wandbgen.filler(wandbgen.BLOCK - 7 - 7)  # the next block: 7 bytes left after it
    data = wandbgen.frame(head + [pad, second] + rest)
    assert data[wandbgen.BLOCK - 3 : wandbgen.BLOCK] == b"\0\0\0"
    assert data[2 * wandbgen.BLOCK - 7 :][4:7] == b"\0\0\x02"  # length 0, FIRST
    path = tmp_path / "run-x.wandb"
    path.write_bytes(data)
    run = one(path)
    assert run.problems == []
    assert_rows(rows(run), wandbgen.reference([path])["rows"])
    assert run.scalars.num_rows == one(first_file(archive)).scalars.num_rows


def test_garbage_and_zeros(tmp_path: Path, archive: Path):
    data = first_file(archive).read_bytes()
    offs = [o for o, _, _ in wandbgen.chunks(data)]
    path = tmp_path / "run-x.wandb"
    path.write_bytes(data[: offs[20]] + b"\0" * 5000)  # a tail never written (zeros)
    run = one(path)
    assert [p.kind for p in run.problems] == ["truncated"] and run.problems[0].offset == offs[20]
    assert_rows(rows(run), wandbgen.reference([path])["rows"])
    path.write_bytes(b"not a wandb file at all" * 10)
    run = one(path)
    assert [p.kind for p in run.problems] == ["bad-record"] and run.scalars.num_rows == 0
    path.write_bytes(b"")
    assert [p.kind for p in one(path).problems] == ["truncated"]


def test_a_hostile_key_is_kept_as_text(archive: Path):
    run = READERS["wandb"].read(scan(archive)[0])
    assert wandbgen.HOSTILE in set(run.scalars.column("tag").to_pylist())
    assert run.meta["title"] == "rich <script>x</script>"  # escaped by the templates, not here


def test_without_crc_checks_the_same(archive: Path):
    path = first_file(archive)
    unchecked, checked = rows(one(path, ReadOptions(verify=False))), rows(one(path))
    assert len(unchecked) == len(checked) > 0
    assert all(a[:3] == b[:3] and same(a[3], b[3]) for a, b in zip(unchecked, checked))


def test_a_copied_run_file_alone_is_a_run(archive: Path, tmp_path: Path):
    folder = tmp_path / "loose"
    folder.mkdir()
    shutil.copy(first_file(archive), folder / "run-rich01.wandb")
    found = scan(tmp_path)
    assert [(s.name, s.format) for s in found] == [("loose", "wandb")]


def test_summary_and_config_removes_fold_in_order(tmp_path: Path):
    """Updates then removes, over several records (laid out field by field as wandb does)."""
    f, item = wandbgen._field, wandbgen._item
    recs = [
        f(1, 1) + f(17, f(1, "r") + f(4, f(1, item("a", "1")) + f(1, item(["b", "c"], '"x"')))),
        f(1, 2) + f(3, f(1, item(["s"], "1.5")) + f(1, item(["t", "u"], "NaN")) + f(1, item("gone", "2"))),
        f(1, 3) + f(5, f(2, item(["b", "c"], ""))),  # config remove b.c
        f(1, 4) + f(3, f(2, f(2, "gone"))),  # summary remove (nested key form)
        f(1, 5) + f(3, f(1, item(["s"], "2.5"))),
    ]
    path = tmp_path / "run-r.wandb"
    path.write_bytes(wandbgen.frame(recs))
    run = one(path)
    assert run.problems == []
    assert run.hparams == {"a": 1.0, "b": "{}"}  # (an emptied section, as wandb leaves it)
    summary = {k: v for k, v in run.meta.items() if k.startswith("summary.")}
    assert summary == {"summary.s": "2.5", "summary.t.u": "NaN"}
    ref = wandbgen.reference([path])
    assert ref["config"] == {"a": 1, "b": {}} and set(ref["summary"]) == {"s", "t.u"}


def test_a_live_file_between_two_writes_is_no_problem(archive: Path, tmp_path: Path):
    """wandb's writer writes a block as soon as it is full and the rest of a record at its next
    flush: a live file can end after whole chunks of a record. That is no damage (a nightly
    ``--strict`` build of a live archive passes); the records before it are read."""
    payloads = wandbgen.records(first_file(archive).read_bytes())
    whole = wandbgen.frame(payloads[:40] + [wandbgen.filler(50_000)])  # spans two blocks
    cut = wandbgen.BLOCK  # after the FIRST chunk that fills block 0
    path = tmp_path / "run-x.wandb"
    path.write_bytes(whole[:cut])
    assert [k for _, k, _ in wandbgen.chunks(whole[:cut])][-1] == 2
    run = one(path)
    assert run.problems == [] and run.meta["status"] == "RUNNING"
    assert_rows(rows(run), wandbgen.reference([path])["rows"])
    assert run.scalars.num_rows > 0 and run.files[0].decoded_bytes < cut
