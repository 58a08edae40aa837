"""W&B run files for the tests: written by the real ``wandb`` package (offline mode, in a child
process: each run starts wandb's service), read back by a reference made of wandb's own
protobuf classes and ``json.loads`` over a plain per-chunk LevelDB walk.

Also a writer-side framer (``frame``) that lays records out as LevelDB's log writer does, so the
tests can place block ends (padding, a zero-length FIRST chunk) where they want.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

BLOCK = 32768
MAGIC = b":W&B\xe1\xbe\x00"
HOSTILE = '<img src=x onerror=alert(1)>/"loss"\n../'

SCRIPT = textwrap.dedent(
    """
    import math, sys, time, numpy as np, wandb
    root = sys.argv[1]
    run = wandb.init(mode="offline", dir=root, project="proj <b>", name="rich <script>x</script>", id="rich01",
                     notes="**notes** <img src=x>", tags=["a", "<b>"], config={"lr": 0.1, "opt": {"name": "adam", "betas": [0.9, 0.99]}, "drop": 1})
    for i in range(300):
        row = {"loss": 1.0 / (i + 1), "acc/top1": i * 0.01, "nested": {"x": i, "y": float("nan")}, "inf": float("inf"),
               "neg": -float("inf"), "big": 10 ** 30, %(hostile)r: i, "text": "not a number", "flag": True}
        if i in (5, 7):
            row["sample"] = wandb.Image(np.full((4, 5, 3), 30 * i, np.uint8))
        run.log(row)
    run.log({"loss": 0.5}, step=400)
    run.config.update({"extra": 3})
    run.summary["best"] = 0.25
    run.finish()
    time.sleep(1.1)
    run = wandb.init(mode="offline", dir=root, project="proj <b>", id="rich01", resume="allow")
    for i in range(3):
        run.log({"loss": 0.1 * i}, step=500 + i)
    run.finish()
    """
) % {"hostile": HOSTILE}


def write_runs(root: Path) -> Path:
    """Two wandb offline runs (one id: the second resumes the first) under ``root/wandb``."""
    env = {**os.environ, "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true", "WANDB_CONSOLE": "off"}
    subprocess.run([sys.executable, "-c", SCRIPT, str(root)], check=True, env=env, timeout=300, cwd=root)
    return root / "wandb"


def chunks(data: bytes):
    """(offset, type, payload) of each chunk, per the LevelDB log format, until damage."""
    off = len(MAGIC)
    while off + 7 <= len(data):
        left = BLOCK - off % BLOCK
        if left < 7:
            off += left
            continue
        crc, n, kind = struct.unpack_from("<IHB", data, off)
        if off + 7 + n > len(data) or n + 7 > left or zlib.crc32(data[off + 6 : off + 7 + n]) != crc:
            return
        yield off, kind, data[off + 7 : off + 7 + n]
        off += 7 + n


def records(data: bytes) -> list[bytes]:
    out, part = [], None
    for _, kind, payload in chunks(data):
        if kind == 1:
            out.append(payload)
        elif kind == 2:
            part = payload
        elif kind == 3 and part is not None:
            part += payload
        elif kind == 4 and part is not None:
            out.append(part + payload)
            part = None
    return out


def frame(payloads: list[bytes]) -> bytes:
    """The file a LevelDB log writer makes of ``payloads`` (the W&B header first)."""
    out = bytearray(MAGIC)
    for p in payloads:
        first = True
        while True:
            left = BLOCK - len(out) % BLOCK
            if left < 7:
                out += b"\0" * left
                left = BLOCK
            room = left - 7
            piece, p = p[:room], p[room:]
            kind = (1 if first else 4) if not p else (2 if first else 3)
            out += struct.pack("<IHB", zlib.crc32(bytes([kind]) + piece), len(piece), kind) + piece
            first = False
            if not p:
                break
    return bytes(out)


def filler(size: int, num: int = 999999) -> bytes:
    """A Record of exactly ``size`` bytes (>= 8) that carries nothing (only num and uuid)."""
    head = b"\x08" + _varint(num)
    body = size - len(head) - 2 - 1  # uuid tag (2 bytes) + its length
    if body >= 128:
        body -= 1 if body < 2**14 + 1 else 2
    return head + b"\x9a\x01" + _varint(body) + b"u" * body


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def reference(paths: list[Path]) -> dict:
    """What wandb's own classes read from the files of one run: rows (tag, step, wall, value)
    in file order, config, summary, run fields, exit code."""
    from wandb.proto import wandb_internal_pb2 as pb

    rows, config, summary, run, exit_code, images = [], {}, {}, {}, None, []

    def name(item) -> str:
        return ".".join(item.nested_key) if item.nested_key else item.key

    def leaves(obj, prefix, out):
        if isinstance(obj, dict):
            if "_type" not in obj:
                for k, v in obj.items():
                    leaves(v, f"{prefix}.{k}", out)
        elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
            out.append((prefix, float(obj)))

    def apply_config(rec):
        for it in rec.update:
            parts = list(it.nested_key) or [it.key]
            target = config
            for p in parts[:-1]:
                target = target.setdefault(p, {})
            target[parts[-1]] = json.loads(it.value_json)
        for it in rec.remove:
            parts = list(it.nested_key) or [it.key]
            target = config
            for p in parts[:-1]:
                target = target.get(p, {})
            target.pop(parts[-1], None)

    for path in paths:
        for payload in records(path.read_bytes()):
            r = pb.Record()
            r.ParseFromString(payload)
            kind = r.WhichOneof("record_type")
            if kind == "history":
                values = {name(it): json.loads(it.value_json) for it in r.history.item}
                step = values.get("_step", r.history.step.num)
                wall = values.get("_timestamp", float("nan"))
                typed = [k[: -len("._type")] for k in values if k.endswith("._type")]  # media as leaf items (0.2x)
                for key, v in values.items():
                    if isinstance(v, dict) and v.get("_type") == "image-file":  # media as one dict (0.16)
                        images.append((key, int(step), v["path"]))
                    if key in ("_step", "_timestamp", "_runtime") or key.startswith("_wandb"):
                        continue
                    if any(key.startswith(t + ".") for t in typed):
                        if key.endswith(".path") and values.get(key[: -len("path")] + "_type") == "image-file":
                            images.append((key[: -len(".path")], int(step), v))
                        continue
                    out = []
                    leaves(v, key, out)
                    rows += [(k, int(step), float(wall), x) for k, x in out]
            elif kind == "config":
                apply_config(r.config)
            elif kind == "summary":
                for it in r.summary.update:
                    summary[name(it)] = json.loads(it.value_json)
                for it in r.summary.remove:
                    summary.pop(name(it), None)
            elif kind == "run":
                apply_config(r.run.config)
                for f in ("run_id", "project", "display_name", "notes", "host", "entity"):  # a resumed run: the first
                    if getattr(r.run, f):
                        run.setdefault(f, getattr(r.run, f))
                if r.run.tags:
                    run.setdefault("tags", list(r.run.tags))
                if r.run.start_time.seconds:
                    run.setdefault("start_time", r.run.start_time.seconds + r.run.start_time.nanos / 1e9)
                if r.run.git.commit:
                    run.setdefault("commit", r.run.git.commit)
            elif kind == "exit":
                exit_code = r.exit.exit_code
    config.pop("_wandb", None)
    return {"rows": rows, "config": config, "summary": summary, "run": run, "exit": exit_code, "images": images}


def _field(num: int, payload: bytes | str | int) -> bytes:
    """One protobuf field: an int as a varint, bytes or str as length-delimited."""
    if isinstance(payload, int):
        return _varint(num << 3) + _varint(payload)
    data = payload.encode("utf-8") if isinstance(payload, str) else payload
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def _item(key: str | list[str], value_json: str) -> bytes:
    keys = _field(1, key) if isinstance(key, str) else b"".join(_field(2, k) for k in key)
    return keys + _field(16, value_json)


def hand_made(path: Path, strings: list[str]) -> None:
    """A small run file built field by field (no wandb needed) whose names, notes, tags, config
    and summary keys and values are ``strings`` (hostile ones, for the XSS test)."""
    s = (strings * 6)[:6]
    config = _field(1, _item(s[0], json.dumps(s[1])))
    run = b"".join(
        [_field(1, "hostile"), _field(3, s[1]), _field(4, config), _field(8, s[0]), _field(9, s[2]), _field(10, s[3]), _field(13, s[4])]
        + [_field(21, _field(1, s[1]) + _field(2, s[0]))]
    )
    records = [_field(1, 1) + _field(17, run), _field(1, 2) + _field(26, _field(1, s[3]) + _field(6, s[0]))]
    for step in range(3):
        items = [_item([s[0]], str(step)), _item(s[1], "2.5"), _item([s[3], s[4]], "NaN"), _item("_step", str(step))]
        records.append(_field(1, 3 + step) + _field(2, b"".join(_field(1, i) for i in items)))
    records.append(_field(1, 9) + _field(3, _field(1, _item(s[3], json.dumps(s[0])))))
    records.append(_field(1, 10) + _field(18, _field(1, 0)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(frame(records))
