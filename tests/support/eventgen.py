"""Write small TensorBoard event files fast (no TensorFlow, no tensorboardX): TFRecord framing
with masked CRC32C around minimal ``Event`` protobuf bytes holding scalar summaries.

Used where a test needs many runs (the page tests' many-runs site, the executor tests, the
incremental-build counts) and by ``benchmarks/bench_index.py``.
"""
from __future__ import annotations

import math
import random
import struct
from pathlib import Path

from sitegen.ingest.protowire import encode_varint
from sitegen.ingest.tfevents.tfrecord import frame


def _bytes_field(num: int, data: bytes) -> bytes:
    return encode_varint(num << 3 | 2) + encode_varint(len(data)) + data


def version_event(wall: float) -> bytes:
    return frame(b"\x09" + struct.pack("<d", wall) + _bytes_field(3, b"brain.Event:2"))


def scalar_event(tag: str, step: int, wall: float, value: float) -> bytes:
    v = _bytes_field(1, tag.encode("utf-8")) + b"\x15" + struct.pack("<f", value)
    summary = _bytes_field(1, v)
    return frame(b"\x09" + struct.pack("<d", wall) + b"\x10" + encode_varint(step) + _bytes_field(5, summary))


def text_event(tag: str, step: int, wall: float, text: str) -> bytes:
    """A text summary the way tensorboardX writes one (plugin "text", string tensor)."""
    plugin = _bytes_field(1, _bytes_field(1, b"text"))  # SummaryMetadata.plugin_data.plugin_name
    tensor = b"\x08\x07" + _bytes_field(8, text.encode("utf-8"))  # dtype DT_STRING, string_val
    v = _bytes_field(1, tag.encode("utf-8")) + _bytes_field(9, plugin) + _bytes_field(8, tensor)
    return frame(b"\x09" + struct.pack("<d", wall) + b"\x10" + encode_varint(step) + _bytes_field(5, _bytes_field(1, v)))


def write_run(directory: Path, *, tags: list[str], steps: int, seed: int, start: float, config: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(seed)
    out = [version_event(start)]
    if config is not None:
        out.append(text_event("hyperparameters/config/text_summary", 0, start, config))
    rates = [rnd.uniform(0.002, 0.02) for _ in tags]
    for step in range(steps):
        wall = start + step * 0.5
        for k, tag in enumerate(tags):
            base = math.exp(-rates[k] * step)
            value = (1 - base if "acc" in tag else 2 * base) + rnd.gauss(0, 0.02)
            out.append(scalar_event(tag, step, wall, value))
    path = directory / f"events.out.tfevents.{int(start)}.gen"
    path.write_bytes(b"".join(out))
    return path


def write_grid(root: Path, *, projects: int, models: int, runs: int, steps: int) -> Path:
    """``root/proj{p}/model{m}/run{r}``: every run a loss and an accuracy curve of ``steps``."""
    for p in range(projects):
        for m in range(models):
            for r in range(runs):
                write_run(root / f"proj{p}" / f"model{m}" / f"run{r}", tags=["train/loss", "val/acc"], steps=steps,
                          seed=p * 100 + m * 10 + r, start=1.7e9 + r)
    return root


def write_archive(root: Path, runs: int, *, tags: list[str] | None = None, steps: int = 50, projects: int = 4, models: int = 5) -> Path:
    """``runs`` runs spread over ``projects`` x ``models`` groups, each with a JSON config text."""
    import json

    tags = tags or ["train/loss", "eval/accuracy"]
    for i in range(runs):
        p, m = i % projects, (i // projects) % models
        config = json.dumps({"lr": 10 ** -(2 + i % 3), "batch_size": 32 * (1 + i % 4), "seed": i, "model": {"depth": 8 + m, "width": 256}})
        write_run(root / f"project{p}" / f"model{m}" / f"run{i:05d}", tags=tags, steps=steps, seed=i, start=1.7e9 + i * 1000.0, config=config)
    return root
