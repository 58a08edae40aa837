"""Hostile sizes: a run of thousands of tags, a text record of hundreds of megabytes, 100,000
images in one tag, a folder tree 300 levels deep. Each builds in a real child process with
bounded memory, its limits reported as problems, never a crash or a silently missing run.

(The full-size cases of the issue, 1,000,000 tags and a 2 GB text record, are measured by
``benchmarks/bench_hostile_sizes.py``: they take a minute and 2 GB of disk.)"""
from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT, corpus
from tests.support.cli import child_env
from tests.support.eventgen import scalar_event, text_event, version_event

#: runs ``sitegen build`` and prints its peak RSS (KiB): VmHWM, which starts afresh at exec
#: (getrusage's ru_maxrss would carry this test process's own peak over the exec)
PEAK = (
    "import re, sys; from sitegen.cli import main; rc = main(sys.argv[1:]); "
    "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)); sys.exit(rc)"
)


def build(archive: Path, site: Path, *args: str) -> tuple[dict, int]:
    """The build report and the peak RSS in MB of ``sitegen build`` in a child process."""
    cmd = [sys.executable, "-c", PEAK, "build", str(archive), "--out", str(site), "--cache", str(site.parent / "cache"), "--quiet", *args]
    got = subprocess.run(cmd, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=600)
    assert got.returncode == 0 and "Traceback" not in got.stderr, got.stderr
    return json.loads((site / "build-report.json").read_text()), int(got.stdout.split()[-1]) // 1024


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def image_event(tag: str, step: int, png: bytes) -> bytes:
    """An Event with Summary.Value{tag, image{height 4, width 4, colorspace 3, encoded_image_string}}."""
    image = b"\x08\x04\x10\x04\x18\x03" + corpus._ld(4, png)
    value = corpus._ld(1, tag.encode()) + corpus._ld(4, image)
    return corpus.tf_record(b"\x09" + struct.pack("<d", 1.7e9 + step) + b"\x10" + varint(step) + corpus._ld(5, corpus._ld(1, value)))


def run_page(site: Path, name: str) -> str:
    (page,) = [p for p in (site / "runs").glob("*/index.html") if p.parent.name.startswith(name)]
    return page.read_text()


def test_a_run_of_many_tags_charts_up_to_the_limit_and_says_so(tmp_path: Path):
    run = tmp_path / "logs" / "many"
    run.mkdir(parents=True)
    with open(run / "events.out.tfevents.1.h", "wb") as f:
        f.write(version_event(1.7e9))
        f.writelines(scalar_event(f"t/{i:05d}", 1, 1.7e9, float(i)) for i in range(3000))
        f.write(scalar_event("train/loss", 1, 1.7e9, 0.5))
    (tmp_path / "sitegen.toml").write_text('[limits]\nmax_tags_per_run = 100\n[index]\nkey_metrics = ["train/loss"]\n')
    report, _ = build(tmp_path / "logs", tmp_path / "site", "--config", str(tmp_path / "sitegen.toml"))
    (item,) = [i for i in report["items"] if i["kind"] == "too-many"]
    assert "3,001 tags; charts of 100" in item["message"] and item["path"].endswith("events.out.tfevents.1.h")
    page = run_page(tmp_path / "site", "many")
    assert "train/loss" in page  # a key metric is charted first, whatever its name's place
    assert "t/00098" in page and "t/00099" not in page  # then the others by name, up to the limit
    # the downloads keep every tag
    import pyarrow.parquet as pq

    table = pq.read_table(next((tmp_path / "site" / "runs").glob("many*/*.parquet")))
    assert len(set(table.column("tag").to_pylist())) == 3001


def test_a_text_record_of_hundreds_of_megabytes_is_cut_in_bounded_memory(tmp_path: Path):
    run = tmp_path / "logs" / "talk"
    run.mkdir(parents=True)
    size = 600 << 20  # over the size from which a log is mapped instead of read
    with open(run / "events.out.tfevents.1.h", "wb") as f:
        f.write(version_event(1.7e9) + text_event("notes/big", 0, 1.7e9, "é" * (size // 2)) + scalar_event("train/loss", 3, 1.7e9, 0.25))
    report, peak = build(tmp_path / "logs", tmp_path / "site")
    (item,) = [i for i in report["items"] if i["kind"] == "too-large"]
    assert f"text of {size:,} bytes; only the first 200000 characters kept" in item["message"]
    assert peak < 400, f"peak RSS {peak} MB for a {size >> 20} MB record"  # (reading it whole: over 600)
    page = run_page(tmp_path / "site", "talk")
    assert "é" * 1000 in page and "train/loss" in page  # the text's start shown, the record after it read


def test_100000_images_in_one_tag_show_the_limit(tmp_path: Path):
    run = tmp_path / "logs" / "pictures"
    run.mkdir(parents=True)
    png = corpus.small_png()
    with open(run / "events.out.tfevents.1.h", "wb") as f:
        f.write(version_event(1.7e9))
        f.writelines(image_event("samples", i, png) for i in range(100_000))
        f.write(scalar_event("train/loss", 1, 1.7e9, 0.5))
    _, peak = build(tmp_path / "logs", tmp_path / "site")
    page = run_page(tmp_path / "site", "pictures")
    assert "100000 images, 1000 shown (limits.max_images_per_tag)" in page  # the run page says so
    assert len(re.findall(r'\{"step":\d+,"src":', page)) == 1000 and "train/loss" in page  # the images shown
    assert peak < 1536


def test_a_tree_300_levels_deep_builds_and_a_path_too_long_is_named(tmp_path: Path):
    for name in ("l{:03d}", "a-folder-name-that-makes-the-path-too-long-{:03d}"):
        archive = tmp_path / name[:1] / "logs"
        os.makedirs(archive)
        cur = os.open(archive, os.O_RDONLY)
        try:
            for i in range(300):  # (relative to a folder descriptor: the whole path may be too long to name)
                os.mkdir(name.format(i), dir_fd=cur)
                nxt = os.open(name.format(i), os.O_RDONLY, dir_fd=cur)
                os.close(cur)
                cur = nxt
                if i in (0, 149, 299):
                    fd = os.open("events.out.tfevents.1.h", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=cur)
                    os.write(fd, version_event(1.7e9) + scalar_event(f"level/{i}", 1, 1.7e9, 0.5))
                    os.close(fd)
        finally:
            os.close(cur)
    report, _ = build(tmp_path / "l" / "logs", tmp_path / "site-l")
    assert report["problems"] == 0
    page = run_page(tmp_path / "site-l", "l000")  # the deeper runs are sub-runs of the first
    assert all(f"level/{i}" in page for i in (0, 149, 299))
    report, _ = build(tmp_path / "a" / "logs", tmp_path / "site-a")
    assert [i["kind"] for i in report["items"]] == ["unreadable"]
    assert "File name too long" in report["items"][0]["message"] and "a-folder-name" in report["items"][0]["path"]
    assert "level/0" in run_page(tmp_path / "site-a", "a-folder")  # what could be named is built
