"""A full disk under the site or the cache, on a real file system the test mounts (tmpfs), and a
file size limit (RLIMIT_FSIZE): the build exits 3 with one line naming the file, removes its
half-written build, leaves the live site whole and verifiable, and leaves a cache from which the
next build (with room) gives the same site as a clean build, byte for byte."""
from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from sitegen.publish import manifest
from sitegen.publish.live import builds_dir, list_builds
from tests.support import EXAMPLE
from tests.support.cli import run_sitegen
from tests.support.sites import site_files, without_news

SDE = {"SOURCE_DATE_EPOCH": "1700000000"}
PAGE = 4096


@contextmanager
def tmpfs(where: Path, size: str):
    """A tmpfs of ``size`` mounted on ``where`` for the test (we run as root), unmounted after."""
    where.mkdir(parents=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (the test needs root or CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def fill(fs: Path, free: int) -> None:
    """Leave exactly ``free`` bytes (whole pages) free on ``fs``, with one filler file."""
    filler = fs / "filler"
    filler.unlink(missing_ok=True)
    st = os.statvfs(fs)
    room = st.f_bavail * st.f_frsize - free
    if room > 0:
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.posix_fallocate(fd, 0, room)
        finally:
            os.close(fd)
    st = os.statvfs(fs)
    assert st.f_bavail * st.f_frsize == max(free, 0) or room <= 0


def used(fs: Path) -> int:
    st = os.statvfs(fs)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def build(out: Path, cache: Path, title: str, *, keep: int = 50, **kw) -> subprocess.CompletedProcess:
    """``sitegen build`` of the example archive with ``title`` (a new one: every page is written)."""
    config = CONFIGS / f"{title}.toml"
    config.write_text(f"title = {json.dumps(title)}\n")
    return run_sitegen("build", EXAMPLE, "--out", out, "--cache", cache, "--config", config, "--keep", str(keep), "--quiet", **kw)


def failed_line(r: subprocess.CompletedProcess, errno_text: str) -> str:
    """The one line a failed build printed (exit 3, no traceback)."""
    assert r.returncode == 3, (r.returncode, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert errno_text in lines[0] and "the live site is unchanged" in lines[0], lines[0]
    return lines[0]


def assert_untouched(out: Path, live: Path | None, builds: list[str]) -> None:
    """The live build is the one before, whole; nothing of the failed build is left."""
    if live is None:
        assert not out.exists() and not out.is_symlink()
    else:
        assert out.resolve() == live and manifest.verify(out) == []
    folder = builds_dir(out)
    left = sorted(p.name for p in folder.iterdir() if p.name not in (".lock",)) if folder.exists() else []
    assert left == builds, left


def no_temp_files(cache: Path) -> None:
    temps = [p for p in cache.rglob("*") if ".tmp" in p.name]
    assert temps == [], temps


def site_hashes(site: Path) -> dict:
    """Every file's SHA-256 but what a build says is new since its live build (a rebuild after a
    failed one and a first build differ only there) and the manifest that lists it."""
    files = without_news(site_files(site))
    return {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items() if not rel.startswith("manifest.json")}


CONFIGS = Path()


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict:
    """The site of a clean build (fresh cache, plenty of room), as {path: sha256}."""
    global CONFIGS
    CONFIGS = tmp_path_factory.mktemp("configs")
    base = tmp_path_factory.mktemp("clean")
    (base / "www").mkdir()
    r = build(base / "www" / "reports", base / "cache", "after", env=SDE)
    assert r.returncode == 0, r.stderr
    return site_hashes(base / "www" / "reports")


def test_a_full_site_disk_at_pages_and_at_the_manifest(tmp_path, clean):
    """The site's file system filled so that the build fails while writing its pages (0, 64 KiB,
    512 KiB free), and one page short of what the build needs: then the last write fails, the
    manifest's."""
    with tmpfs(tmp_path / "fs", "16m") as fs:
        out, cache = fs / "www" / "reports", tmp_path / "cache"
        out.parent.mkdir()
        assert build(out, cache, "first").returncode == 0
        # (a second build first: what it says is new since the first is what the next ones say)
        assert build(out, cache, "second").returncode == 0
        before = used(fs)
        r = build(out, cache, "t-00")  # the room a build of a new title takes: all its pages written
        assert r.returncode == 0, r.stderr
        need = used(fs) - before
        where = []
        for i, free in enumerate([0, 64 << 10, 512 << 10, need - PAGE, need - 2 * PAGE]):
            live, builds = out.resolve(), [b.name for b in list_builds(out)]
            fill(fs, free)
            line = failed_line(build(out, cache, f"t-{i + 1:02d}"), "No space left on device")
            where.append(line.split(": No space")[0].rsplit("/", 1)[-1])
            assert ".staging-" in line, line
            assert_untouched(out, live, builds)
        assert {"index.html", "index.html.gz"} & set(where[:3]), where
        assert {"manifest.json", "manifest.json.gz"} & set(where[3:]), where
        (fs / "filler").unlink()
        r = build(out, cache, "after", env=SDE)
        assert r.returncode == 0, r.stderr
        assert site_hashes(out) == clean
        no_temp_files(cache)


def test_a_full_cache_disk(tmp_path, clean):
    """The cache's file system full while a cold cache is filled: with no room (the first write,
    the Vega bundle, fails), with room for the blobs and half of what the build caches besides (a
    run's decoded logs or summary fails), and with room for all but the last 24 KiB (a comparison
    page's pieces). Each build fails naming the cache file, publishes nothing, and leaves only
    whole entries: with room, the next build equals a clean build."""
    with tmpfs(tmp_path / "fs", "8m") as fs:
        out, cache = tmp_path / "www" / "reports", fs / "cache"
        out.parent.mkdir()
        before = used(fs)
        assert build(tmp_path / "www" / "probe", fs / "probe", "first").returncode == 0
        total = used(fs) - before  # what a cold cache of the archive takes
        blobs = sum(-(-f.stat().st_size // PAGE) * PAGE for f in (fs / "probe" / "blobs").rglob("*") if f.is_file())
        subprocess.run(["rm", "-r", str(fs / "probe")], check=True)
        assert build(out, tmp_path / "other-cache", "first").returncode == 0
        live, builds = out.resolve(), [b.name for b in list_builds(out)]
        where = []
        for upto in [0, blobs + (total - blobs) // 2, total - (24 << 10)]:
            (fs / "filler").unlink(missing_ok=True)
            fill(fs, max(0, upto - (used(fs) - before)) // PAGE * PAGE)  # (room for the rest up to upto)
            line = failed_line(build(out, cache, "c"), "No space left on device")  # (one config: what an attempt kept serves the next)
            assert line.startswith(f"sitegen: error: {cache}/"), line
            where.append(line[len(f"sitegen: error: {cache}/") :].split("/")[0])
            assert_untouched(out, live, builds)
            no_temp_files(cache)
        assert where[0] == "blobs" and where[1] in ("files", "runs") and where[2] == "pages", where
        (fs / "filler").unlink()
        r = build(out, cache, "after", env=SDE)
        assert r.returncode == 0, r.stderr
        assert site_hashes(out) == clean


def _limit_file_size(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # (Python ignores SIGXFSZ: EFBIG)

    return apply


def test_a_file_size_limit(tmp_path, clean):
    """RLIMIT_FSIZE (as a quota-like limit would): writing past it fails with EFBIG. A first build
    publishes nothing; a rebuild keeps the live site; a build without the limit equals a clean one."""
    out, cache = tmp_path / "www" / "reports", tmp_path / "cache"
    out.parent.mkdir()
    failed_line(build(out, cache, "small", preexec_fn=_limit_file_size(64 << 10)), "File too large")
    assert_untouched(out, None, [])
    assert build(out, cache, "first").returncode == 0
    live, builds = out.resolve(), [b.name for b in list_builds(out)]
    failed_line(build(out, cache, "small-2", preexec_fn=_limit_file_size(8 << 10)), "File too large")
    assert_untouched(out, live, builds)
    no_temp_files(cache)
    r = build(out, cache, "after", env=SDE)
    assert r.returncode == 0, r.stderr
    assert site_hashes(out) == clean
