"""Where an output's builds live, which one is live, its manifest, and whether it is still whole
(every file there, with the size its manifest gives; or, cheaper, its folders as it left them);
and the one check of a path inside a site."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from sitegen.errors import Problem, SitegenError

#: keys of the manifest's ``runs`` map that name a page (its input key), not a run
PAGE_KEYS = ("compare/", "trends/")

MANIFEST = "manifest.json"
CHANGES = "changes.json"
BUILD_NAME = re.compile(r"^(\d{6})-[0-9a-z-]+$")


def builds_dir(out: Path) -> Path:
    """Where the builds behind ``out`` live: a hidden sibling, outside the served tree."""
    return out.parent / f".{out.name}.builds"


def lock_file(out: Path) -> Path:
    """The lock one build of ``out`` holds from start to end: beside the builds folder, hidden,
    never served (and never removed: removing a lock file others wait on would split them)."""
    return out.parent / f".{out.name}.lock"


def list_builds(out: Path) -> list[Path]:
    """The finished builds behind ``out``, oldest first."""
    folder = builds_dir(Path(out))
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if BUILD_NAME.match(p.name) and p.is_dir() and not p.is_symlink()]
    return sorted(found, key=lambda p: (build_number(p), p.name))


def build_number(build: Path) -> int:
    """The sequence number of a build folder (``000007-3f2a9c1b0d4e``: 7)."""
    m = BUILD_NAME.match(build.name)
    return int(m.group(1)) if m else 0


def live_build(out: Path) -> Path | None:
    """The build ``out`` points at, or None when ``out`` is not a symlink to a folder of its
    builds folder (a dangling one, whose builds were removed, is none)."""
    out = Path(out)
    if not out.is_symlink():
        return None
    target = (out.parent / os.readlink(out)).resolve()
    return target if target.parent == builds_dir(out).resolve() and target.is_dir() else None


def checked_relpath(rel: str) -> str:
    """``rel`` when it is a plain relative path (no absolute, empty, ``.`` or ``..`` part, no
    backslash or NUL), else :class:`SitegenError`: nothing is ever written outside the site."""
    # (string tests for "", "." and ".." parts, not a split: a rebuild checks thousands of paths)
    if (
        not rel
        or rel[0] == "/"
        or rel[-1] == "/"
        or "\\" in rel
        or "\x00" in rel
        or "//" in rel
        or rel in (".", "..")
        or rel.startswith(("./", "../"))
        or rel.endswith(("/.", "/.."))
        or "/./" in rel
        or "/../" in rel
    ):
        raise SitegenError(f"refusing to write outside the site folder: {rel!r}")
    return rel


@dataclass(eq=False, repr=False)
class Live:
    """The live build, whole: how many runs and files it has and the problems it reported."""

    folder: Path
    doc: dict
    runs: int
    files: int
    problems: list[Problem]


def whole(out: Path, site_key: str | None = None) -> Live | None:
    """The live build behind ``out`` when every file of its manifest is there with its size
    (and, given ``site_key``, when its manifest says it was made from those inputs)."""
    live = live_build(out)
    if live is None:
        return None
    try:
        doc = read_manifest(live)
        if site_key is not None and doc.get("site") != site_key:
            return None
        base = str(live) + "/"
        for rel, entry in doc["files"].items():
            if os.stat(base + checked_relpath(rel)).st_size != entry["size"]:
                return None
        runs = sum(1 for k in doc.get("runs", {}) if not k.startswith(PAGE_KEYS))
        files = len(doc["files"]) + sum((live / n).exists() for n in (MANIFEST, MANIFEST + ".gz"))
        return Live(live, doc, runs, files, reported(live))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, SitegenError):
        return None


def reported(build: Path) -> list[Problem]:
    """The problems a build reported (its ``build-report.json``). Raises OSError/ValueError/KeyError/TypeError."""
    items = json.loads((build / "build-report.json").read_text("utf-8"))["items"]
    return [Problem(i["path"], i["offset"], i["kind"], i["message"]) for i in items]


def folders(files: Iterable[str]) -> list[str]:
    """The folders of a build that hold ``files`` (paths relative to it), their parents and the
    build itself (""), sorted."""
    out = {""}
    for rel in files:
        head = rel.rpartition("/")[0]
        while head and head not in out:
            out.add(head)
            head = head.rpartition("/")[0]
    return sorted(out)


def seal(build: Path, names: list[str]) -> str | None:
    """What ``stat`` tells of a build's folders ``names``: a file added, removed or renamed in
    one changes its folder's mtime, so a build whose seal did not change still has every file
    it was written with (one stat a folder, not one a file). None: a folder is gone."""
    base = os.fspath(build) + "/"
    lines = []
    try:
        for rel in names:
            st = os.stat(base + checked_relpath(rel) if rel else base)
            lines.append(f"{rel}\0{st.st_ino} {st.st_mtime_ns} {st.st_ctime_ns}\n")
    except (OSError, SitegenError):
        return None
    return hashlib.sha256("".join(lines).encode("utf-8", "surrogatepass")).hexdigest()


def read_changes(out: Path) -> dict | None:
    """The live build's ``changes.json`` (what it knew of each run), or None: no live build, one
    made before sitegen wrote it, or not a JSON object."""
    live = live_build(out)
    if live is None:
        return None
    try:
        doc = json.loads((live / CHANGES).read_bytes())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def read_manifest(build: Path, *, last: bool = False) -> dict:
    """A build's manifest as parsed JSON, parsed once per process while the file stays the same
    (a rebuild asks it several questions: is the live build whole, which runs and files does
    it have). ``last``: the caller asks the last question, so the parsed manifest is not kept
    (at 100,000 runs it holds ~200 MB). Raises OSError/ValueError."""
    path = os.path.join(build, MANIFEST)
    st = os.stat(path)
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    doc = _LIVE.pop(key, None) if last else _LIVE.get(key)
    if doc is None:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
        if not last:
            _LIVE.clear()
            _LIVE[key] = doc
    return doc


_LIVE: dict[tuple, dict] = {}
