#!/usr/bin/env python3
"""Hostile sizes at full size (issue 25, item 5): time and peak memory of ``sitegen build``.

Cases (each archive generated once under ``--work``, each build in a fresh child process whose
peak RSS is its ``VmHWM``):

- ``tags``: one run of 1,000,000 scalar tags, one point each;
- ``text``: one run whose single text record is 2 GB (then a scalar after it);
- ``images``: one run of 100,000 images in one tag;
- ``tree``: runs at levels 1, 150 and 300 of a folder tree 300 levels deep;
- ``names``: ``--names`` runs (default 10,000; the issue names 100,000) whose names differ
  only in letter case or in Unicode normalisation (NFC against NFD).

The tests under ``tests/fault/test_hostile_sizes.py`` run smaller versions of the first four;
this script is for the sizes the issue names, which take minutes and ~2.5 GB of disk.

Usage: python benchmarks/bench_hostile_sizes.py [--work DIR] [--names 10000] [case ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fault.test_hostile_sizes import PEAK, image_event  # noqa: E402
from tests.support import corpus  # noqa: E402
from tests.support.eventgen import scalar_event, text_event, version_event, write_run  # noqa: E402

LIMIT_MB = 1536  # the bound on memory


def make_tags(archive: Path) -> None:
    run = archive / "many"
    run.mkdir(parents=True)
    with open(run / "events.out.tfevents.1.h", "wb") as f:
        f.write(version_event(1.7e9))
        for start in range(0, 1_000_000, 10_000):
            f.write(b"".join(scalar_event(f"t/{i:07d}", 1, 1.7e9, float(i)) for i in range(start, start + 10_000)))


def make_text(archive: Path) -> None:
    run = archive / "talk"
    run.mkdir(parents=True)
    with open(run / "events.out.tfevents.1.h", "wb") as f:
        f.write(version_event(1.7e9) + text_event("notes/big", 0, 1.7e9, "é" * (1 << 30)) + scalar_event("train/loss", 3, 1.7e9, 0.25))


def make_images(archive: Path) -> None:
    run = archive / "pictures"
    run.mkdir(parents=True)
    png = corpus.small_png()
    with open(run / "events.out.tfevents.1.h", "wb") as f:
        f.write(version_event(1.7e9))
        f.writelines(image_event("samples", i, png) for i in range(100_000))


def make_tree(archive: Path) -> None:
    archive.mkdir(parents=True)
    cur = os.open(archive, os.O_RDONLY)
    try:
        for i in range(300):  # relative to a folder descriptor: the whole path may be too long to name
            os.mkdir(f"l{i:03d}", dir_fd=cur)
            nxt = os.open(f"l{i:03d}", os.O_RDONLY, dir_fd=cur)
            os.close(cur)
            cur = nxt
            if i in (0, 149, 299):
                fd = os.open("events.out.tfevents.1.h", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=cur)
                os.write(fd, version_event(1.7e9) + scalar_event(f"level/{i}", 1, 1.7e9, 0.5))
                os.close(fd)
    finally:
        os.close(cur)


def alike_names(n: int) -> list[str]:
    """``n`` names: half differ only in the case of their letters, the other half are the same
    names in another Unicode normalisation (NFD: the "é" as "e" and a combining accent)."""
    half = n - n // 2
    base = "café-run-abcdefghijklmnopq"[: 9 + max(1, half.bit_length())]
    letters = [i for i, c in enumerate(base) if c.isalpha()]
    out = []
    for k in range(half):
        chars = list(base)
        for bit, at in enumerate(letters):
            if k >> bit & 1:
                chars[at] = chars[at].upper()
        out.append(unicodedata.normalize("NFC", "".join(chars)))
    return out + [unicodedata.normalize("NFD", s) for s in out[: n // 2]]


def make_names(archive: Path, n: int) -> None:
    names = alike_names(n)
    assert len({os.fsencode(s) for s in names}) == len(names)
    for i, name in enumerate(names):
        write_run(archive / name, tags=["loss"], steps=5, seed=i, start=1.7e9)


def build(archive: Path, site: Path, cache: Path) -> tuple[float, int, dict]:
    """Seconds, peak RSS (MB) and the build report of a cold ``sitegen build`` in a child
    process. Of the cache only the bundled Vega JavaScript is kept (made once by vl-convert,
    whose JavaScript engine would add ~200 MB to every case's peak)."""
    for sub in ("files", "runs", "pages", "stamps"):
        shutil.rmtree(cache / sub, ignore_errors=True)
    cmd = [sys.executable, "-c", PEAK, "build", str(archive), "--out", str(site), "--cache", str(cache), "--quiet"]
    t = time.perf_counter()
    got = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if got.returncode not in (0, 1) or "Traceback" in got.stderr:
        raise SystemExit(f"build of {archive} failed ({got.returncode}): {got.stderr[-2000:]}")
    return seconds, int(got.stdout.split()[-1]) // 1024, json.loads((site / "build-report.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / ".cache" / "hostile")
    ap.add_argument("--names", type=int, default=10_000)
    ap.add_argument("cases", nargs="*", default=["tags", "text", "images", "tree", "names"])
    args = ap.parse_args()
    makers = {"tags": make_tags, "text": make_text, "images": make_images, "tree": make_tree,
              "names": lambda a: make_names(a, args.names)}  # fmt: skip
    rows = []
    for case in args.cases:
        folder = args.work / (case if case != "names" else f"names-{args.names}")
        archive = folder / "logs"
        if not archive.exists():
            t = time.perf_counter()
            partial = folder / "logs.partial"  # (renamed when whole: an interrupted run makes it again)
            shutil.rmtree(partial, ignore_errors=True)
            makers[case](partial)
            partial.rename(archive)
            print(f"{case}: generated in {time.perf_counter() - t:.1f} s", flush=True)
        site = folder / "site"
        seconds, peak, report = build(archive, site, args.work / "cache")
        pages = len(list(site.resolve().joinpath("runs").glob("*/index.html")))
        kinds = ", ".join(f"{k} {v}" for k, v in report["kinds"].items()) or "none"
        verdict = "ok" if peak <= LIMIT_MB else "OVER"
        rows.append(f"| {case} | {seconds:.1f} s | {peak} MB ({verdict}) | {pages} | {kinds} |")
        print(rows[-1], flush=True)
    print("\n| case | build | peak RSS (≤ 1,536 MB) | run pages | problems |\n|---|---:|---:|---:|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
