"""The HF Trainer, Lightning, Keras and dvclive readers on damaged copies of real-writer files.

Every truncation point of each file, then 300 single-bit flips and 300 overwrites of 1-64
random bytes (fixed seed): no exception escapes, damage is reported as problems naming the file,
and every record the damage did not touch is kept with its value (a CSV header is part of every
row: damage there may change them all).
"""

from __future__ import annotations

import itertools
import math
import random
import re
import shutil
import zlib
from collections import Counter
from pathlib import Path

import pytest

from sitegen.ingest import READERS
from sitegen.ingest.scan import scan

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "trackers"


def _key(row: tuple) -> tuple:
    tag, step, _, value = row
    return (tag, step, "nan" if math.isnan(value) else value)


def _rows(run) -> Counter:
    cols = [run.scalars.column(c).to_pylist() for c in ("tag", "step", "wall_time", "value")]
    return Counter(_key(r) for r in zip(*cols))


def _damages(data: bytes, seed: int):
    rng = random.Random(seed)
    for trial in range(600):
        buf = bytearray(data)
        lo = rng.randrange(len(data))
        if trial < 300:
            buf[lo] ^= 1 << rng.randrange(8)
            hi = lo + 1
        else:
            hi = min(len(data), lo + rng.randint(1, 64))
            buf[lo:hi] = bytes(rng.randrange(256) for _ in range(hi - lo))
        if buf != data:
            yield bytes(buf), lo, hi


class Case:
    """A run folder, the file in it to damage, and the byte span of each record in that file."""

    def __init__(self, tmp: Path, name: str, copy: Path, target: str, spans) -> None:
        self.root = tmp / name
        shutil.copytree(copy, self.root)
        self.path = self.root / target
        self.data = self.path.read_bytes()
        self.spans = spans(self.data)
        assert sum(self.read().values()) > 0

    def read(self) -> Counter:
        """The scalars of every run that reads the file (a Keras file may hold several)."""
        got: Counter = Counter()
        self.problems = []
        for source in scan(self.root):
            if self.path in source.files:
                run = READERS[source.format].read(source)
                for p in run.problems:
                    assert p.kind and p.message and isinstance(p.path, str)
                self.problems += run.problems
                got += _rows(run)
        return got

    def write(self, data: bytes) -> None:
        self.path.write_bytes(data)


def _json_rows(data: bytes) -> list[tuple[int, int]]:
    """The log rows of a trainer_state.json as written (indent 2: rows open at 4 spaces)."""
    text = data.decode()
    starts = [m.start() for m in re.finditer(r"^    \{$", text, re.M)]
    ends = [m.end() for m in re.finditer(r"^    \}", text, re.M)]
    return list(zip(starts, ends))


def _lines(data: bytes) -> list[tuple[int, int]]:
    """Data lines of a CSV/TSV file (the header excluded), each with its line end."""
    out, at = [], data.index(b"\n") + 1
    while at < len(data):
        nxt = data.index(b"\n", at) + 1
        out.append((at, nxt))
        at = nxt
    return out


CASES = {
    "hftrainer": (FIX / "hftrainer", "out/checkpoint-10/trainer_state.json", _json_rows),
    "lightning": (FIX / "lightning", "lightning_logs/version_0/metrics.csv", _lines),
    "keras": (FIX / "keras", "training.log", _lines),
    "dvclive": (FIX / "dvclive", "dvclive/plots/metrics/train/loss.tsv", _lines),
}


@pytest.fixture(params=sorted(CASES))
def case(request, tmp_path) -> Case:
    copy, target, spans = CASES[request.param]
    c = Case(tmp_path, request.param, copy, target, spans)
    if request.param == "hftrainer":  # the checkpoint alone, so that its damage is what is read
        shutil.rmtree(c.root / "out" / "checkpoint-20")
        (c.root / "out" / "trainer_state.json").unlink()
    return c


def _per_record(c: Case) -> list[Counter]:
    """The scalars of each record: the file cut after it, minus the file cut before it."""
    out, before = [], Counter()
    for _, end in c.spans:
        c.write(c.data[:end])
        now = c.read()
        out.append(now - before)
        before = now
    c.write(c.data)
    return out


def test_every_truncation_point_keeps_every_whole_record(case):
    records = _per_record(case)
    for k in range(len(case.data) + 1):
        case.write(case.data[:k])
        got = case.read()
        whole = sum((r for r, (_, end) in zip(records, case.spans) if end <= k), Counter())
        assert not (whole - got), f"cut at {k}: lost {whole - got}"
        assert all(p.path == str(case.path) for p in case.problems if p.kind == "truncated"), k


def test_bit_flips_and_overwrites_lose_only_what_they_hit(case):
    records = _per_record(case)
    for n, (buf, lo, hi) in enumerate(_damages(case.data, seed=zlib.crc32(case.path.name.encode()))):
        case.write(buf)
        got = case.read()
        if case.path.suffix != ".json" and lo <= case.spans[0][0]:
            hit_or_after = list(range(len(case.spans)))  # the header names every column of every row
        elif b'"' in buf[lo:hi] and case.path.suffix != ".json":
            # a quote opens a quoted CSV cell that may run to the end of the file: the records
            # before the damage are what must survive
            hit_or_after = [i for i, (s, e) in enumerate(case.spans) if e > lo]
        else:
            hit_or_after = [i for i, (s, e) in enumerate(case.spans) if s < hi + 1 and e > lo - 1]
        intact = sum((r for i, r in enumerate(records) if i not in hit_or_after), Counter())
        assert not (intact - got), f"damage {n} at {lo}-{hi}: lost {intact - got}"


@pytest.mark.parametrize("target", ["lightning_logs/version_0/hparams.yaml"])
def test_yaml_damage_never_raises(tmp_path, target):
    root = tmp_path / "pl"
    shutil.copytree(FIX / "lightning", root)
    path = root / target
    data = path.read_bytes()
    (source,) = scan(root)
    for k in range(len(data) + 1):
        path.write_bytes(data[:k])
        READERS["lightning"].read(source)
    for buf, _, _ in _damages(data, seed=5):
        path.write_bytes(buf)
        run = READERS["lightning"].read(source)
        assert all(isinstance(v, (float, str, bool)) for v in run.hparams.values())


def test_dvc_lock_and_summary_damage_never_raises(tmp_path):
    root = tmp_path / "dv"
    shutil.copytree(FIX / "dvclive", root)
    (source,) = scan(root)
    for target in ("dvc.lock", "dvclive/metrics.json", "dvclive/params.yaml"):
        path = root / target
        data = path.read_bytes()
        for k in range(0, len(data) + 1, 3):
            path.write_bytes(data[:k])
            run = READERS["dvclive"].read(source)
            assert run.scalars.num_rows == 12
        for buf, _, _ in itertools.islice(_damages(data, seed=9), 0, 600, 3):
            path.write_bytes(buf)
            assert READERS["dvclive"].read(source).scalars.num_rows == 12
        path.write_bytes(data)
