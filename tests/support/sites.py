"""Building sites for tests and comparing them: every file byte for byte, or which files a
rebuild wrote anew (by inode)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from sitegen.config import Config

#: the configuration of the reference site and of every build compared with it
CONFIG = Config(title="Scale runs")


def build_site(archive: Path | str, out: Path, *, cache: Path | str | None = None, executor=None, config: Config = CONFIG,
               **options):
    """``build(archive, out, BuildOptions(config=config, cache=cache, executor=executor, ...))``."""
    from sitegen.pipeline.build import BuildOptions, build

    return build(archive, out, BuildOptions(config=config, cache=cache, executor=executor, **options))


def site_files(site: Path) -> dict[str, bytes]:
    """``{path: bytes}`` of every file of the build ``site`` points at."""
    root = Path(site).resolve()
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


#: what a build says about its changes since the live build (a rebuild and a fresh build differ there)
NEWS_FILES = {"changes.json", "changes.json.gz", "changes.md", "feed.xml", "index.html.gz", "index-data.js.gz"}


def without_news(files: dict[str, bytes]) -> dict[str, bytes]:
    """``files`` without what's new since the live build: the changes and the feed dropped, the
    index's panel, badges and list of new runs cut out (the rest of the index stays compared)."""
    out = {rel: data for rel, data in files.items() if rel not in NEWS_FILES}
    if "index.html" in out:
        html = re.sub(rb'<section class="whats-new".*?</section>\n', b"", out["index.html"], flags=re.S)
        out["index.html"] = re.sub(rb' class="fresh" data-badge="[^"]*" title="[^"]*"', b"", html)
    if "index-data.js" in out:
        out["index-data.js"] = re.sub(rb',"fresh":(\[[^\]]*\]|"all")', b"", out["index-data.js"])
    return out


def inodes(site: Path) -> dict[str, int]:
    """``{path: inode}`` of every file of the build ``site`` points at: a file a rebuild linked
    from the live build keeps its inode."""
    root = Path(site).resolve()
    return {p.relative_to(root).as_posix(): p.stat().st_ino for p in root.rglob("*") if p.is_file()}


def assert_same_site(a: Path, b: Path, *, same_paths: bool = True, news: bool = True) -> None:
    """Every file byte for byte. ``same_paths=False`` (archives at different local paths, e.g.
    disk vs an S3 mirror): the manifest's ``runs`` (input keys of the incremental build, made
    of absolute paths and mtimes) and ``site`` (the key of them all) may differ; its ``files`` and
    ``sources`` may not. ``news=False`` (a rebuild against a fresh build): what each says is new
    since its live build is left out (:func:`without_news`), and so is the manifest's digest of it."""
    fa, fb = site_files(a), site_files(b)
    ma, mb = json.loads(fa["manifest.json"]), json.loads(fb["manifest.json"])
    skip = set() if same_paths else {"manifest.json", "manifest.json.gz"}
    if not news:
        told = NEWS_FILES | {"index.html", "index-data.js", "manifest.json", "manifest.json.gz"}
        for m in (ma, mb):
            m["files"] = {rel: e for rel, e in m["files"].items() if rel not in told}
        fa, fb = without_news(fa), without_news(fb)
        skip = {"manifest.json", "manifest.json.gz"}
    odd = sorted(rel for rel in set(ma["files"]) | set(mb["files"]) if ma["files"].get(rel) != mb["files"].get(rel))
    assert not odd, f"manifest 'files' differ: {len(odd)}, e.g. {odd[:8]}"
    assert ma.get("sources") == mb.get("sources"), "manifest 'sources' differ"
    assert sorted(fa) == sorted(fb), f"different file sets: {sorted(set(fa) ^ set(fb))[:10]}"
    differ = [rel for rel in fa if rel not in skip and fa[rel] != fb[rel]]
    assert not differ, f"{len(differ)} files differ, e.g. {differ[:5]}"
    if not same_paths:
        for m in (ma, mb):
            m.pop("runs", None), m.pop("site", None)
        assert ma == mb, "manifests differ beyond their input keys"
    assert len(fa) > 10


def index_head(site: Path) -> dict:
    """``index-data.js``: the index's head (columns, group tree, shard list)."""
    text = (Path(site) / "index-data.js").read_text("utf-8")
    assert text.startswith("window.SITEGEN_INDEX=") and text.endswith(";\n")
    return json.loads(text[len("window.SITEGEN_INDEX="):-2])


def index_shard(site: Path, name: str) -> dict:
    """The shard ``name`` of the index (``index/<name>.js``), checked to be a classic script naming itself."""
    text = (Path(site) / "index" / f"{name}.js").read_text("utf-8")
    prefix = f'SITEGEN_INDEX_SHARD("{name}",'
    assert text.startswith(prefix) and text.endswith(");\n") and "<" not in text, text[:80]
    return json.loads(text[len(prefix):-3])


def index_data(site: Path) -> dict:
    """The index's data put back together as one document: the head, every run's row (in the
    shards' layout, tags and hyperparameter names numbered across the archive in ``tags`` and
    ``hkeys``, ``hcols`` as those numbers), and ``best``, ``fresh``, ``running`` by row number."""
    head = index_head(site)
    runs, tags, hkeys = [], {}, {}
    for name, count in head["shards"]:
        shard = index_shard(site, name)
        assert len(shard["rows"]) == count
        for r in shard["rows"]:
            row = list(r[:11]) + [r[11] if len(r) > 11 else "-" * len(head["metrics"])]
            row[9] = [tags.setdefault(shard["tags"][t], len(tags)) for t in r[9]]
            row[10] = {str(hkeys.setdefault(shard["hkeys"][int(k)], len(hkeys))): v for k, v in r[10].items()}
            row[1] = r[1] + [""] * (head["depth"] - len(r[1]))
            runs.append(row)
    slugs = [r[0] for r in runs]
    return {
        **head,
        "runs": runs,
        "tags": list(tags),
        "hkeys": list(hkeys),
        "hcols": [[hkeys[k] for k in col if k in hkeys] for col in head["hcols"]],
        "best": [{str(i): r[11][m] for i, r in enumerate(runs) if r[11][m] != "-"} for m in range(len(head["metrics"]))],
        "fresh": list(range(len(runs))) if head["fresh"] == "all" else [slugs.index(s) for s in head["fresh"]],
        "running": [slugs.index(s) for s in head["running"]],
    }


def index_text(site: Path) -> str:
    """The text of the index's head and of every shard, one after the other."""
    site = Path(site).resolve()
    return "".join(p.read_text("utf-8") for p in [site / "index-data.js", *sorted((site / "index").glob("*.js"))])
