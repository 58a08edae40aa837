"""What's new since the last published build, on logs written by tensorboardX: each change
appears exactly once, a rebuild where nothing changed is empty of changes, the Atom feed is
valid (RFC 4287) with stable ids, the index shows the panel and the badges."""

from __future__ import annotations

import glob
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from sitegen.config import Config
from sitegen.model import slug
from sitegen.pipeline.build import BuildOptions, build
from sitegen.prepare.changes import RunState, compare
from tests.support.corpus import write_metrics
from tests.support.sites import index_data

ATOM = "{http://www.w3.org/2005/Atom}"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def changes_of(out: Path) -> dict:
    return json.loads((out / "changes.json").read_text("utf-8"))


def names(doc: dict, kind: str) -> list[str]:
    return [c["name"] for c in doc["changes"][kind]]


def check_feed(out: Path) -> list[str]:
    """Parse ``feed.xml`` and check what RFC 4287 requires; its entry ids, in order."""
    root = ET.parse(out / "feed.xml").getroot()
    assert root.tag == ATOM + "feed"
    for need_one in ("id", "title", "updated"):
        assert len(root.findall(ATOM + need_one)) == 1, need_one
    assert RFC3339.match(root.findtext(ATOM + "updated") or "")
    assert root.find(f"{ATOM}author/{ATOM}name") is not None  # (or every entry has an author)
    assert root.find(f"{ATOM}link[@rel='self']") is not None
    ids = []
    for e in root.findall(ATOM + "entry"):
        for need_one in ("id", "title", "updated"):
            assert len(e.findall(ATOM + need_one)) == 1, need_one
        assert RFC3339.match(e.findtext(ATOM + "updated") or "")
        assert e.find(f"{ATOM}link[@rel='alternate']") is not None or e.find(ATOM + "content") is not None
        link = e.find(f"{ATOM}link[@rel='alternate']")
        assert link is not None and (out / link.get("href", "")).exists(), link.get("href") if link is not None else None
        ids.append(e.findtext(ATOM + "id") or "")
    assert all(i.startswith("tag:sitegen,2024:") for i in ids) and len(set(ids)) == len(ids)
    return ids


def test_each_change_appears_once_and_an_unchanged_rebuild_has_none(tmp_path: Path):
    logs, out, cache = tmp_path / "logs", tmp_path / "site", tmp_path / "cache"
    for i in range(3):
        write_metrics(logs / "vision" / "resnet" / f"run{i}", 0, 20, seed=i)

    def rebuild(sde: int):
        return build(logs, out, BuildOptions(config=Config(), cache=cache, source_date_epoch=sde))

    first = rebuild(1)
    doc = changes_of(out)
    assert doc["schema"] == "sitegen/changes" and doc["version"] == 1 and doc["previous_runs"] is None
    assert names(doc, "added") == [f"vision/resnet/run{i}" for i in range(3)] and first.changes == doc
    first_ids = check_feed(out)
    feed_before = (out / "feed.xml").read_bytes()

    rebuild(2)  # another date: a new build, and nothing changed
    doc = changes_of(out)
    assert doc["counts"] == {"added": 0, "grown": 0, "finished": 0, "removed": 0, "best": 0}
    assert all(v == [] for v in doc["changes"].values()) and doc["previous_runs"] == 3
    assert (out / "feed.xml").read_bytes() == feed_before  # no new entry, the same ids
    index = (out / "index.html").read_text("utf-8")
    assert "Nothing changed since the last build." in index and "data-badge" not in index

    write_metrics(logs / "vision" / "resnet" / "run3", 0, 20, seed=9)  # added, and the new best eval/acc
    rebuild(3)
    doc = changes_of(out)
    assert names(doc, "added") == ["vision/resnet/run3"] and doc["counts"]["grown"] == doc["counts"]["removed"] == 0
    best = {(c["group"], c["metric"]): c for c in doc["changes"]["best"]}
    assert best[("vision/resnet", "eval/acc")]["run"] == "vision/resnet/run3"
    assert best[("vision/resnet", "eval/acc")]["previous_run"] == "vision/resnet/run2"
    assert best[("vision", "eval/acc")]["value"] == best[("vision/resnet", "eval/acc")]["value"]
    assert ("vision/resnet", "train/loss") not in best  # run0's is still the lowest
    index = (out / "index.html").read_text("utf-8")
    assert index.count('class="fresh" data-badge="new"') == 1 and "What&#39;s new" in index
    assert index_data(out)["fresh"] == [3]
    ids = check_feed(out)
    assert ids[len(ids) - len(first_ids) :] == first_ids  # the old entries follow the new ones, ids unchanged

    write_metrics(logs / "vision" / "resnet" / "run1", 20, 10, seed=1)  # grown: a second file, later steps
    rebuild(4)
    doc = changes_of(out)
    assert names(doc, "grown") == ["vision/resnet/run1"] and doc["changes"]["added"] == []
    (c,) = doc["changes"]["grown"]
    assert (c["previous_last_step"], c["last_step"], c["previous_records"], c["records"]) == (19, 29, 40, 60)

    shutil.rmtree(logs / "vision" / "resnet" / "run0")  # removed
    rebuild(5)
    doc = changes_of(out)
    assert names(doc, "removed") == ["vision/resnet/run0"] and doc["changes"]["added"] == doc["changes"]["grown"] == []
    assert doc["changes"]["removed"][0]["slug"] == slug("vision/resnet/run0")

    rebuild(6)  # and each only once
    assert all(v == [] for v in changes_of(out)["changes"].values())
    md = (out / "changes.md").read_text("utf-8")
    assert md.startswith("# What's new\n") and "Nothing changed" in md


def test_a_live_build_without_changes_json_is_compared_through_the_cache(tmp_path: Path):
    logs, out, cache = tmp_path / "logs", tmp_path / "site", tmp_path / "cache"
    for i in range(2):
        write_metrics(logs / "p" / "m" / f"run{i}", 0, 10, seed=i)
    build(logs, out, BuildOptions(config=Config(), cache=cache, source_date_epoch=1))
    live = out.resolve()
    for name in glob.glob(str(live / "changes.json*")):  # as an older sitegen left it
        Path(name).unlink()
    write_metrics(logs / "p" / "m" / "run2", 0, 10, seed=2)
    build(logs, out, BuildOptions(config=Config(), cache=cache, source_date_epoch=2))
    doc = changes_of(out)
    assert names(doc, "added") == ["p/m/run2"] and doc["previous_runs"] == 2


def test_a_status_that_becomes_terminal_is_finished_once():
    def state(records: int, status: str | None) -> RunState:
        return RunState("p/m/r", "s", "p/m", 1.0, 2.0, records, records, status, {"eval/acc": 0.5})

    ch = compare([state(5, "RUNNING")], [state(9, "FINISHED")], ["eval/acc"])
    assert [c["name"] for c in ch.finished] == ["p/m/r"] and ch.grown == [] and ch.count() == 1
    ch = compare([state(9, "FINISHED")], [state(9, "FINISHED")], ["eval/acc"])
    assert ch.count() == 0
    ch = compare([state(5, None)], [state(9, None)], ["eval/acc"])  # no status recorded: it grew
    assert [c["name"] for c in ch.grown] == ["p/m/r"] and ch.finished == []


def test_hostile_names_stay_text_in_the_feed_and_markdown(tmp_path: Path):
    logs, out = tmp_path / "logs", tmp_path / "site"
    bad = 'p/m/<script>x</script> & "q" [a](javascript:1)'
    write_metrics(logs / bad, 0, 5, seed=0)
    build(logs, out, BuildOptions(config=Config(base_url="https://reports.example.org/r/"), cache=tmp_path / "cache"))
    check_feed_text = (out / "feed.xml").read_text("utf-8")
    assert "<script>" not in check_feed_text and "&lt;script&gt;" in check_feed_text
    root = ET.parse(out / "feed.xml").getroot()
    assert root.find(f"{ATOM}link[@rel='self']").get("href") == "https://reports.example.org/r/feed.xml"
    titles = [e.findtext(ATOM + "title") for e in root.findall(ATOM + "entry")]
    assert f"New run: {bad}" in titles
    md = (out / "changes.md").read_text("utf-8")
    assert "[a](javascript" not in md and "\\[a\\]\\(javascript:1\\)" in md
    assert "<script>" not in (out / "index.html").read_text("utf-8")


def test_added_grown_finished_and_removed_once_each_with_mlflows_writer(tmp_path: Path, monkeypatch):
    """The same with runs written by MLflow's own client (a file store): a run it still reports
    RUNNING grows, then finishes when the client ends it; each change appears in one build only."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow.tracking import MlflowClient

    logs, out, cache = tmp_path / "logs", tmp_path / "site", tmp_path / "cache"
    client = MlflowClient(tracking_uri=(logs / "mlruns").as_uri())
    exp = client.create_experiment("vision")
    ids = [client.create_run(exp, run_name=f"r{k}").info.run_id for k in range(2)]
    for k, run_id in enumerate(ids):
        for i in range(5):
            client.log_metric(run_id, "eval/acc", 0.5 + 0.01 * i + 0.1 * k, step=i, timestamp=1_700_000_000_000 + 1000 * i)
    kinds = ("added", "grown", "finished", "removed")

    def rebuild(sde: int) -> dict[str, list[str]]:
        build(logs, out, BuildOptions(config=Config(), cache=cache, source_date_epoch=sde))
        doc = changes_of(out)
        return {k: [n.rsplit("/", 1)[-1] for n in names(doc, k)] for k in kinds}

    assert rebuild(1) == {"added": sorted(ids), "grown": [], "finished": [], "removed": []}
    assert rebuild(2) == dict.fromkeys(kinds, [])
    client.log_metric(ids[0], "eval/acc", 0.7, step=5, timestamp=1_700_000_005_000)  # still RUNNING, one more step
    assert rebuild(3) == {"added": [], "grown": [ids[0]], "finished": [], "removed": []}
    client.set_terminated(ids[0])  # FINISHED
    assert rebuild(4) == {"added": [], "grown": [], "finished": [ids[0]], "removed": []}
    assert rebuild(5) == dict.fromkeys(kinds, [])
    (run_dir,) = (logs / "mlruns").glob(f"*/{ids[1]}")
    shutil.rmtree(run_dir)
    assert rebuild(6) == {"added": [], "grown": [], "finished": [], "removed": [ids[1]]}
    assert rebuild(7) == dict.fromkeys(kinds, [])


def test_changes_json_written_in_pieces_is_the_one_json_dump(monkeypatch):
    """``changes.json`` goes to disk in pieces (objects member by member, long lists a batch at a
    time): the bytes are json's, for hostile names, nested objects, non-string keys, non-ASCII,
    empty and long lists, and objects json learns through ``default``."""
    import random

    from sitegen.pages import changes as changes_page
    from sitegen.prepare.changes import to_json

    rng = random.Random(5)
    alphabet = ["a", '"', "}", ",", "\\", "\n", "é", "日", "\U0001f600", " ", "[", "]", "\u2028"]

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))

    def state(i: int) -> RunState:
        return RunState(text(), f"s{i}", text(), 1.5, None, i, i, None, {text(): 0.25}, {}, None)

    monkeypatch.setattr(changes_page, "LIST_PIECE", 3)
    for n in (0, 1, 3, 4, 7, 50):
        doc = {
            "runs": [state(i) for i in range(n)],
            "changes": {"added": [{"name": text(), "k": [1, 2.5, None]} for _ in range(n)], text(): [], "z": {}},
            "metrics": [text() for _ in range(n % 5)],
            "numbered": {1: "a", 2: "b"},
            text(): n,
        }
        whole = json.dumps(doc, ensure_ascii=False, sort_keys=True, allow_nan=False, separators=(",", ":"), default=to_json)
        assert b"".join(changes_page.pieces(doc, default=to_json)) == (whole + "\n").encode("utf-8")
