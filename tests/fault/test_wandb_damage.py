"""The W&B reader on damaged copies of a file the real writer made (the example run).

Truncation points (every byte of the first 1 KiB, then every 97th), 300 single-bit flips and
300 overwrites of 1-64 random bytes (fixed seed): no exception escapes, damage is one problem
naming the file, every record of a chunk before the damage is kept with its value, and nothing
is made up (every row read is a row of the intact file).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

from sitegen.ingest import wandb as reader
from sitegen.model import RunSource
from tests.support import wandbgen

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "archive" / "wandb"


def _rows(run) -> Counter:
    cols = [run.scalars.column(c).to_pylist() for c in ("tag", "step", "wall_time", "value")]
    return Counter((t, s, w, "nan" if math.isnan(v) else v) for t, s, w, v in zip(*cols))


def _ref(data: bytes, tmp: Path) -> Counter:
    p = tmp / "ref.wandb"
    p.write_bytes(data)
    rows = wandbgen.reference([p])["rows"]
    return Counter((t, s, w, "nan" if math.isnan(v) else v) for t, s, w, v in rows)


def test_every_damage_keeps_the_records_before_it(tmp_path: Path):
    original = next(EXAMPLE.glob("*/run-*.wandb")).read_bytes()
    starts = [o for o, _, _ in wandbgen.chunks(original)]
    folder = tmp_path / "offline-run-20240101_000000-x"
    folder.mkdir()
    path = folder / "run-x.wandb"
    source = RunSource("r", "wandb", folder, (path,))
    path.write_bytes(original)
    whole = _rows(reader.read(source))
    assert sum(whole.values()) > 100 and whole == _ref(original, tmp_path)

    ends = {o + 7 + len(p) for o, _, p in wandbgen.chunks(original)}

    def chunk_start(at: int) -> int:
        return max([s for s in starts if s <= at], default=0)

    cases = [(original[:cut], cut) for cut in [*range(0, 1024), *range(1024, len(original), 97)]]
    rng = random.Random(22)
    for trial in range(600):
        buf = bytearray(original)
        lo = rng.randrange(len(original))
        if trial < 300:
            buf[lo] ^= 1 << rng.randrange(8)
        else:
            hi = min(len(original), lo + rng.randint(1, 64))
            buf[lo:hi] = bytes(rng.randrange(256) for _ in range(hi - lo))
        cases.append((bytes(buf), lo))
    for data, at in cases:
        path.write_bytes(data)
        run = reader.read(source)
        got = _rows(run)
        assert not got - whole, at  # nothing made up
        kept = _ref(original[: chunk_start(at)], tmp_path)
        assert not kept - got, at  # every record of a chunk before the damage
        if data != original and len(data) == len(original) and got != whole:
            assert len(run.problems) == 1 and run.problems[0].path == str(path), (at, run.problems)
        if len(data) < len(original):  # cut between two chunks: a file between two writes
            clean = at in ends or at == len(wandbgen.MAGIC)
            assert [p.kind for p in run.problems] in ([[], ["truncated"]] if clean else [["truncated"]]), at
