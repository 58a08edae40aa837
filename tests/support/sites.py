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
        out["index-data.js"] = re.sub(rb',"fresh":\[[0-9,]*\]', b"", out["index-data.js"])
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
    assert ma["files"] == mb["files"], "manifest 'files' differ"
    assert ma.get("sources") == mb.get("sources"), "manifest 'sources' differ"
    assert sorted(fa) == sorted(fb), f"different file sets: {sorted(set(fa) ^ set(fb))[:10]}"
    differ = [rel for rel in fa if rel not in skip and fa[rel] != fb[rel]]
    assert not differ, f"{len(differ)} files differ, e.g. {differ[:5]}"
    if not same_paths:
        for m in (ma, mb):
            m.pop("runs", None), m.pop("site", None)
        assert ma == mb, "manifests differ beyond their input keys"
    assert len(fa) > 10
