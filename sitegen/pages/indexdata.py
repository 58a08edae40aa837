"""The index's data in pieces: a small head (``index-data.js``: columns, the group tree with
counts, the shard list) and the rows in content-named shards (``index/<digest>.js``) that the
page script loads only when a view needs them, so the first screen never waits for the archive.

Shard boundaries are content-defined (a cut after a run whose slug hashes to 0 modulo
:data:`SHARD_RUNS`, and at a project's start once a shard is big enough): adding, removing or
changing a run changes the shard that holds it, rarely its neighbour, never the rest, so a
rebuild rewrites only those (the others are linked from the live build by their digest). A shard
is a classic script calling ``SITEGEN_INDEX_SHARD(name, data)``: it loads over ``file://`` and
under ``script-src 'self'``; nothing is fetched."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from sitegen.model import HParamValue, SiteRun, text_value
from sitegen.pages.charts import Plain, json_text
from sitegen.pages.environment import fmt_duration, fmt_time, js_data

#: the average number of runs of a shard (about 100 KB of script for small runs)
SHARD_RUNS = 512
#: a shard is cut before a new project once it holds this share of SHARD_RUNS
PROJECT_CUT = 4
#: and always at this many times SHARD_RUNS (a long run of slugs that never hash to a cut)
MAX_SHARD = 4

SHARD_DIR = "index/"
CALLBACK = "SITEGEN_INDEX_SHARD"


@dataclass
class IndexRow:
    """What the index shows of one run (its best marks: one of ``"p"``, ``"m"``, ``"-"`` per key metric)."""

    run: SiteRun
    hparams: dict[str, HParamValue]
    metrics: list[Any]
    best: str


@dataclass(eq=False, repr=False)
class Reuse:
    """The live build's shards, for a rebuild to draw only the shards whose rows changed. A
    shard's rows follow from its runs' input keys (``keys``, by slug), their best marks, the key
    metrics, and the code and config (``salt``); ``linked(key)`` links the live build's shard made
    from that key into this build and gives its name (None: there is none, draw it). ``made``:
    this build's shards by key, for the next build."""

    keys: dict[str, str]
    salt: str
    linked: Callable[[str], str | None]
    made: dict[str, str] = field(default_factory=dict)

    def key(self, rows: list[IndexRow], metrics: list[str]) -> str | None:
        """What the shard of ``rows`` is made from, hashed; None when a run has no key."""
        keys = [self.keys.get(row.run.slug) for row in rows]
        if None in keys:
            return None
        doc = [self.salt, metrics, [[row.run.slug, k, row.best] for row, k in zip(rows, keys)]]
        return hashlib.sha256(json.dumps(doc).encode("utf-8", "surrogatepass")).hexdigest()


SHARD_NAME = re.compile(r"^[0-9a-f]{20}$")


def _cut_after(slug: str, every: int) -> bool:
    return int.from_bytes(hashlib.blake2b(slug.encode("utf-8"), digest_size=8).digest(), "big") % every == 0


def boundaries(runs: list[SiteRun]) -> list[int]:
    """Where each shard starts, in ``runs`` order: content-defined, so that a change moves no
    cut but the ones beside it (see the module docstring)."""
    every = max(1, SHARD_RUNS)
    starts = [0] if runs else []
    for i in range(1, len(runs)):
        size, prev = i - starts[-1], runs[i - 1]
        new_project = runs[i].parts[:1] != prev.parts[:1]
        if _cut_after(prev.slug, every) or size >= every * MAX_SHARD or (new_project and size * PROJECT_CUT >= every):
            starts.append(i)
    return starts


def _num(v: Any) -> Any:
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v if math.isfinite(v) else None


def _hp(v: HParamValue) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else text_value(v)
    return v


def shard(rows: list[IndexRow]) -> tuple[str, bytes]:
    """One shard: its name (a digest of its content) and its script. Tags and hyperparameter
    names are numbered within the shard, so no other shard's content reaches into it."""
    tags = sorted({ln.tag for row in rows for ln in row.run.lines})
    keys = sorted({k for row in rows for k in row.hparams})
    tag_id = {t: i for i, t in enumerate(tags)}
    key_id = {k: i for i, k in enumerate(keys)}
    out = Plain()  # (no binary value in them: json_text need not look inside)
    for row in rows:
        r = row.run
        dur = (r.end_time - r.start_time) if r.start_time is not None and r.end_time is not None else None
        item = [
            r.slug,
            list(r.parts[:-1]),
            r.title if r.title != r.name else r.parts[-1],
            _num(r.start_time),
            fmt_time(r.start_time),
            _num(dur),
            fmt_duration(dur),
            r.last_step,
            [_num(v) for v in row.metrics],
            sorted({tag_id[ln.tag] for ln in r.lines}),
            {str(key_id[k]): _hp(v) for k, v in sorted(row.hparams.items())},
        ]
        if row.best.strip("-"):
            item.append(row.best)
        out.append(item)
    payload = json_text({"tags": Plain(tags), "hkeys": Plain(keys), "rows": out})
    name = hashlib.sha256(payload.encode("utf-8")).hexdigest()[:20]
    return name, f'{CALLBACK}("{name}",{payload});\n'.encode("utf-8")


def index_data(rows: list[IndexRow], head: dict[str, Any], reuse: Reuse | None = None) -> Iterator[tuple[str, bytes]]:
    """Every shard drawn (by path, as it is made: one at a time in memory), then
    ``index-data.js`` (``head`` plus the shard list and the group tree: each group's run count
    and the shards holding its runs). With ``reuse``, a shard whose rows did not change is
    linked from the live build instead (not yielded)."""
    runs = [row.run for row in rows]
    starts = boundaries(runs)
    shards = []
    tree: dict[str, list[Any]] = {}
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(rows)
        key = None if reuse is None else reuse.key(rows[start:end], head["metrics"])
        name = None if key is None or reuse is None else reuse.linked(key)
        if name is None:
            name, data = shard(rows[start:end])
            yield SHARD_DIR + name + ".js", data
        if key is not None and reuse is not None:  # (a key comes only with reuse)
            reuse.made[key] = name
        shards.append([name, end - start])
        for r in runs[start:end]:
            for n in range(1, len(r.parts)):
                entry = tree.setdefault("/".join(r.parts[:n]), [0, []])
                entry[0] += 1
                if not entry[1] or entry[1][-1] != k:
                    entry[1].append(k)
    doc = {**head, "total": len(rows), "shards": Plain(shards), "tree": dict(sorted(tree.items()))}
    yield "index-data.js", js_data("SITEGEN_INDEX", doc)
