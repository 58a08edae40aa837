"""The archive boundary: nothing whose real path lies outside the archive (or a folder that
``[archive] follow_symlinks_into`` names) is read into the site, whatever symlink leads there.

Real symlinks on the real file system; the "secret" lives in a folder beside the archive, and
every file of each built site (``.gz`` twins unpacked) is searched for it."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

import pytest

from sitegen.config import ArchiveConfig, Config, load_config
from sitegen.errors import ConfigError
from sitegen.ingest.api import read_run
from sitegen.ingest.files import read_regular
from sitegen.fileio import OutsideRoots
from tests.support import corpus
from tests.support.cli import run_sitegen
from tests.support.eventgen import write_run
from tests.support.sites import build_site

SECRET = "TOP-SECRET-b7c1e9"


def _site_bytes(out: Path) -> dict[str, bytes]:
    """Every file of the live build, ``.gz`` twins unpacked."""
    root = out.resolve()
    got = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            data = p.read_bytes()
            got[p.relative_to(root).as_posix()] = gzip.decompress(data) if name.endswith(".gz") else data
    return got


def _leaks(out: Path, *needles: str | bytes) -> list[str]:
    """The files of the site holding any of ``needles`` (the secret, its digest...)."""
    raw = [n.encode() if isinstance(n, str) else n for n in needles]
    return sorted(rel for rel, data in _site_bytes(out).items() if any(n in data for n in raw))


def _refusals(out: Path) -> list[dict]:
    report = json.loads((out / "build-report.json").read_text())
    return [p for p in report["items"] if p["kind"] == "outside-archive"]


@pytest.fixture()
def place(tmp_path: Path):
    """(archive, outside): an archive with one ordinary run, and a folder beside it holding a
    credentials-like file, a secret run and a secret folder of notes."""
    archive, outside = tmp_path / "archive", tmp_path / "outside"
    write_run(archive / "plain", tags=["loss"], steps=20, seed=1, start=1.7e9)
    outside.mkdir()
    (outside / "passwd").write_text(f"root:x:0:0:{SECRET}:/root:/bin/bash\n")
    write_run(outside / "secret-run", tags=[f"{SECRET}/loss"], steps=20, seed=2, start=1.7e9)
    return archive, outside


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_file_links_out_of_the_archive_are_refused(place, tmp_path: Path):
    archive, outside = place
    run = archive / "plain"
    secret = outside / "passwd"
    links = {
        run / "NOTES.md": secret,  # the reported hole
        run / "env.json": secret,  # an environment file (also an artifact: still one line)
        run / "summary.txt": secret,  # an artifact
        run / "events.out.tfevents.1.host": outside / "secret-run" / next(p.name for p in (outside / "secret-run").iterdir()),
        run / "metrics.csv": secret,  # a tabular log file
    }
    for link, target in links.items():
        link.symlink_to(target)
    # a chain of links: archive -> archive -> outside
    (run / "hop2").symlink_to(secret)
    (run / "chain.txt").symlink_to(run / "hop2")
    out = tmp_path / "site"
    result = build_site(archive, out)
    assert result.runs == 1
    assert _leaks(out, SECRET, _digest(secret)) == []
    refused = _refusals(out)
    # one line per link, naming the link and where it really points
    paths = sorted(p["path"] for p in refused)
    assert paths == sorted(str(p) for p in [*links, run / "hop2", run / "chain.txt"]), refused
    for p in refused:
        assert str(Path(os.path.realpath(p["path"]))) in p["message"] and "outside the archive" in p["message"]
    # the run itself is intact: its own log file still gives its 20 points
    page = (out / "runs").glob("plain-*/index.html")
    assert len(list(page)) == 1


def test_folder_links_out_of_the_archive_are_refused(place, tmp_path: Path):
    archive, outside = place
    (archive / "linked-run").symlink_to(outside / "secret-run")  # a whole run folder
    (archive / "team").mkdir()
    (archive / "team" / "deep").symlink_to(outside)  # a folder above it
    (archive / "plain" / "docs").symlink_to(outside)  # a folder inside a run (artifacts)
    (archive / "chain").symlink_to(archive / "chain2")
    (archive / "chain2").symlink_to(outside / "secret-run")  # archive -> archive -> outside
    out = tmp_path / "site"
    result = build_site(archive, out)
    assert result.runs == 1  # only "plain"
    assert _leaks(out, SECRET) == []
    refused = sorted(p["path"] for p in _refusals(out))
    assert refused == sorted(str(archive / n) for n in ("chain", "chain2", "linked-run", "plain/docs", "team/deep")), refused


def test_links_inside_the_archive_are_followed(place, tmp_path: Path):
    archive, _ = place
    shared = archive / "shared"
    shared.mkdir()
    (shared / "NOTES.md").write_text("# shared notes\n\nnotes-inside-7731\n")
    (archive / "plain" / "NOTES.md").symlink_to(Path("..") / "shared" / "NOTES.md")  # relative link
    write_run(archive / "real", tags=["loss"], steps=5, seed=3, start=1.7e9)
    (archive / "alias").symlink_to(archive / "real")  # a run folder linked inside the archive
    (archive / "via").symlink_to(archive / "alias")  # and a chain of two
    out = tmp_path / "site"
    result = build_site(archive, out)
    assert _refusals(out) == []
    assert _leaks(out, "notes-inside-7731") != []
    assert result.runs == 2  # "plain" and "real" (its aliases are the same folder, visited once)


def test_a_configured_root_is_followed(place, tmp_path: Path):
    archive, outside = place
    (archive / "plain" / "NOTES.md").symlink_to(outside / "passwd")
    (archive / "linked-run").symlink_to(outside / "secret-run")
    cfg = tmp_path / "sitegen.toml"
    cfg.write_text('[archive]\nfollow_symlinks_into = ["outside"]\n')  # relative to the config file
    config = load_config(cfg)
    assert config.archive == ArchiveConfig((str(outside),))
    out = tmp_path / "site"
    result = build_site(archive, out, config=config)
    assert _refusals(out) == [] and result.runs == 2
    assert _leaks(out, SECRET) != []  # the notes and the run's tag are on the site
    # and another folder outside is still refused
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "x.md").write_text(SECRET + "-other")
    (archive / "plain" / "README.md").unlink(missing_ok=True)
    (archive / "plain" / "extra.txt").symlink_to(other / "x.md")
    build_site(archive, out, config=config)
    assert [p["path"] for p in _refusals(out)] == [str(archive / "plain" / "extra.txt")]
    assert _leaks(out, SECRET + "-other") == []


def test_mlflow_paths_out_of_the_archive(tmp_path: Path):
    archive, outside = tmp_path / "archive", tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(f"{SECRET}\n")
    (outside / "artifacts").mkdir()
    (outside / "artifacts" / "model.txt").write_text(SECRET)
    run = corpus.write_mlflow(archive)
    # meta.yaml's artifact_uri names a folder outside: it is never followed
    meta = (run / "meta.yaml").read_text().replace(f"file://{run}/artifacts", f"file://{outside}/artifacts")
    (run / "meta.yaml").write_text(meta)
    (run / "params" / "leak").symlink_to(outside / "passwd")
    (run / "tags" / "leak").symlink_to(outside / "passwd")
    (run / "metrics" / "leak").symlink_to(outside / "passwd")
    (run / "artifacts").symlink_to(outside / "artifacts")
    (outside / "meta.yaml").write_text((run.parent / "meta.yaml").read_text() + f"description: {SECRET}\n")
    (run.parent / "meta.yaml").unlink()
    (run.parent / "meta.yaml").symlink_to(outside / "meta.yaml")  # the experiment's meta.yaml
    other = corpus.write_mlflow(tmp_path / "elsewhere", run_id="f" * 32)
    (other / "metrics" / "loss").write_text(f"1700000000000 0.5 0\n")
    (other / "tags" / "mlflow.runName").write_text(SECRET)
    (run.parent / ("f" * 32)).symlink_to(other)  # a whole run folder linked in from outside
    out = tmp_path / "site"
    result = build_site(archive, out)
    assert result.runs == 1
    assert _leaks(out, SECRET, *map(_digest, [outside / "artifacts" / "model.txt", outside / "meta.yaml", outside / "passwd"])) == []
    refused = sorted(p["path"] for p in _refusals(out))
    want = [run / "params" / "leak", run / "tags" / "leak", run / "metrics" / "leak", run / "artifacts", run.parent / ("f" * 32),
            run.parent / "meta.yaml"]
    assert refused == sorted(map(str, want)), refused


@pytest.mark.parametrize("fmt", ["tfevents", "visualdl"])
def test_the_readers_refuse_a_log_file_outside(tmp_path: Path, fmt: str):
    archive, outside = tmp_path / "archive", tmp_path / "outside"
    real = corpus.write_tbx(outside) if fmt == "tfevents" else corpus.write_vdl(outside)
    (archive / "run").mkdir(parents=True)
    (archive / "run" / real.name).symlink_to(real)
    (archive / "run" / "README.md").write_text("a run")
    # the scan refuses it, and so does a reader handed the file directly (a read outside a build)
    assert read_run(outside).scalars.num_rows > 0
    with pytest.raises(FileNotFoundError):
        read_run(archive / "run")
    with pytest.raises(OutsideRoots) as exc:
        read_regular(archive / "run" / real.name, (str(archive.resolve()),))
    assert str(real) in str(exc.value)


def test_the_command_line_publishes_no_secret(place, tmp_path: Path):
    """The issue's report, end to end: exit 0, the secret on no page; ``--strict`` fails on it."""
    archive, outside = place
    (archive / "plain" / "NOTES.md").symlink_to(outside / "passwd")
    out = tmp_path / "site"
    got = run_sitegen("build", archive, "--out", out, "--cache", tmp_path / "cache")
    assert got.returncode == 0, got.stderr
    assert _leaks(out, SECRET) == []
    assert [p["path"] for p in _refusals(out)] == [str(archive / "plain" / "NOTES.md")]
    got = run_sitegen("build", archive, "--out", tmp_path / "site2", "--no-cache", "--strict")
    assert got.returncode == 1
    assert _leaks(tmp_path / "site2", SECRET) == []


def test_no_extra_roots_by_default():
    assert Config().archive.follow_symlinks_into == ()


def test_the_extra_roots_are_checked(tmp_path: Path):
    cfg = tmp_path / "sitegen.toml"
    cfg.write_text('[archive]\nfollow_symlinks_into = "/mnt"\n')
    with pytest.raises(ConfigError, match="archive.follow_symlinks_into: expected a list of strings"):
        load_config(cfg)
    cfg.write_text('[archive]\nfollow_symlinks_into = ["/mnt/a", "~/b", ""]\n')
    with pytest.raises(ConfigError, match="archive.follow_symlinks_into: an empty path"):
        load_config(cfg)
