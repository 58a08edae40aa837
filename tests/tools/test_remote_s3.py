"""Archives and decode caches on S3 (a moto server on 127.0.0.1): the same site as from disk,
one paginated listing, only changed objects downloaded, the cache reused from s3://."""
from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from tests.support import EXAMPLE
from tests.support.sites import assert_same_site, build_site


def _upload(fs, src: Path, dest: str) -> None:
    fs.put(str(src), dest, recursive=True)


def _lists(requests: list[dict]) -> list[dict]:
    return [r for r in requests if r["method"] == "GET" and parse_qs(urlparse(r["url"]).query).get("list-type") == ["2"]]


def _object_gets(requests: list[dict], prefix: str) -> list[str]:
    return [urlparse(r["url"]).path for r in requests
            if r["method"] == "GET" and not urlparse(r["url"]).query and urlparse(r["url"]).path.startswith(prefix)]


def test_is_url():
    from sitegen.tools.remote import is_url

    assert is_url("s3://bucket/logs") and is_url("gs://b/x") and is_url("file:///tmp/a")
    assert not is_url("logs/s3") and not is_url(Path("s3://bucket")) and not is_url("C:\\logs")


def test_build_from_s3_is_the_build_from_disk(s3, s3fs_client, reference_site, fresh_home, tmp_path):
    s3fs_client.mkdir("site-a")
    _upload(s3fs_client, EXAMPLE, "site-a/archive")
    s3.record()
    build_site("s3://site-a/archive", tmp_path / "site", cache="s3://site-a/cache")
    requests = s3.requests()
    assert_same_site(reference_site, tmp_path / "site", same_paths=False)
    # the archive prefix was listed once (one page: 40 objects), every log fetched once
    archive_lists = [r for r in _lists(requests) if "prefix=archive" in r["url"]]
    assert len(archive_lists) == 1, [r["url"] for r in archive_lists]
    n_logs = sum(1 for p in EXAMPLE.rglob("*") if p.is_file())
    assert len(_object_gets(requests, "/site-a/archive/")) == n_logs


def test_listing_is_one_paginated_sequence_and_mirror_is_incremental(s3, s3fs_client, tmp_path):
    from sitegen.tools.remote import sync_archive

    n = 1050  # more than one page (1,000 keys)
    s3fs_client.mkdir("many")
    s3fs_client.pipe({f"many/logs/p{i % 7}/run{i:04d}/events.out.tfevents.{i}.x": f"record {i}".encode() for i in range(n)})
    s3.record()
    tree, report = sync_archive("s3://many/logs", tmp_path / "mirror")
    requests = s3.requests()
    assert report.listed == n and len(report.downloaded) == n
    assert len(_lists(requests)) == 2, "expected ListObjectsV2 x2 (1,050 keys, 1,000 per page)"
    assert len(_object_gets(requests, "/many/logs/")) == n
    assert (tree / "p3" / "run0003" / "events.out.tfevents.3.x").read_bytes() == b"record 3"

    # nothing changed: one listing again, no download
    s3.record()
    tree, report = sync_archive("s3://many/logs", tmp_path / "mirror")
    requests = s3.requests()
    assert report.downloaded == [] and report.deleted == []
    assert len(_lists(requests)) == 2 and _object_gets(requests, "/many/logs/") == []

    # one object rewritten, one deleted, one added, one local file tampered with
    s3fs_client.pipe({"many/logs/p1/run0001/events.out.tfevents.1.x": b"record 1, longer now",
                      "many/logs/new/events.out.tfevents.9999.x": b"new"})
    s3fs_client.rm("many/logs/p2/run0002/events.out.tfevents.2.x")
    (tree / "p4" / "run0004" / "events.out.tfevents.4.x").write_bytes(b"local edit")
    (tree / "stray.txt").write_text("not in the bucket")
    s3.record()
    tree, report = sync_archive("s3://many/logs", tmp_path / "mirror")
    requests = s3.requests()
    assert sorted(report.downloaded) == ["new/events.out.tfevents.9999.x", "p1/run0001/events.out.tfevents.1.x",
                                         "p4/run0004/events.out.tfevents.4.x"]
    assert sorted(report.deleted) == ["p2/run0002/events.out.tfevents.2.x", "stray.txt"]
    assert len(_object_gets(requests, "/many/logs/")) == 3
    assert (tree / "p1" / "run0001" / "events.out.tfevents.1.x").read_bytes() == b"record 1, longer now"
    assert (tree / "p4" / "run0004" / "events.out.tfevents.4.x").read_bytes() == b"record 4"
    assert not (tree / "p2" / "run0002").exists()
    local = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
    remote = sorted(k[len("many/logs/"):] for k in s3fs_client.find("many/logs"))
    assert local == remote


@pytest.mark.usefixtures("cache_every_file")  # (the example's log files are small)
def test_decode_cache_on_s3_is_reused_by_a_second_build(s3, s3fs_client, reference_site, fresh_home, tmp_path, monkeypatch):
    """Build 1 decodes everything and pushes the cache; build 2 starts from an empty machine
    (no mirror, no local cache: both wiped), pulls the cache and decodes nothing."""
    from sitegen.ingest import READERS

    s3fs_client.mkdir("site-b")
    _upload(s3fs_client, EXAMPLE, "site-b/archive")
    decoded: list[str] = []
    for reader in {id(r): r for r in READERS.values()}.values():
        if hasattr(reader, "decode_file"):
            def counting(path, *a, _real=reader.decode_file, **kw):
                decoded.append(str(path))
                return _real(path, *a, **kw)
            monkeypatch.setattr(reader, "decode_file", counting)

    build_site("s3://site-b/archive", tmp_path / "one", cache="s3://site-b/cache")
    n_logs = len(set(decoded))
    assert n_logs >= 10, "the first build should decode every event file"
    entries = {k: v["ETag"] for k, v in s3fs_client.find("site-b/cache", detail=True).items() if "/files/" in k}
    assert sum(k.endswith(".entry") for k in entries) == n_logs, "the cache was not pushed to s3://"
    assert not [k for k in s3fs_client.find("site-b/cache") if "/tables/" in k], "the run table was pushed (each machine's own)"

    shutil.rmtree(fresh_home)  # a fresh machine with the same paths
    decoded.clear()
    s3.record()
    build_site("s3://site-b/archive", tmp_path / "two", cache="s3://site-b/cache")
    requests = s3.requests()
    assert decoded == [], f"the second build decoded {len(decoded)} files"
    after = {k: v["ETag"] for k, v in s3fs_client.find("site-b/cache", detail=True).items() if "/files/" in k}
    assert after == entries, "cache entries changed on s3://"
    puts = [r["url"] for r in requests if r["method"] == "PUT" and "/site-b/cache/files/" in r["url"]]
    assert puts == [], f"{len(puts)} cache entries uploaded again"
    # (the input keys differ: a fresh mirror's files are other inodes, with another ctime)
    assert_same_site(tmp_path / "one", tmp_path / "two", same_paths=False)
    assert_same_site(reference_site, tmp_path / "two", same_paths=False)


def test_missing_archive_url_is_a_usage_error(s3, s3fs_client, tmp_path):
    from sitegen.errors import UsageError
    from sitegen.tools.remote import mirror_archive

    s3fs_client.mkdir("empty-bucket")
    for url in ("s3://empty-bucket/does-not-exist", "s3://no-such-bucket/logs"):
        with pytest.raises(UsageError, match="no such archive"):
            mirror_archive(url, tmp_path / "m")


def test_file_url_archive_and_cache_need_no_copy(tmp_path):
    from sitegen.tools.remote import localize

    loc = localize(f"file://{EXAMPLE}", f"file://{tmp_path / 'cache'}")
    assert loc.archive == EXAMPLE and loc.cache == tmp_path / "cache" and loc.push() is None
