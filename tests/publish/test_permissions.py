"""Published files are readable by the web server's user whatever the build's umask, and nothing
is writable by others: built by the real command line under umask 077."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from sitegen.publish.live import builds_dir
from tests.support import EXAMPLE
from tests.support.cli import run_sitegen


def _strict_umask() -> None:
    os.umask(0o077)


def _build(out: Path, cache: Path, title: str):
    config = out.parent.parent / f"{title}.toml"
    config.write_text(f"title = {json.dumps(title)}\n")
    r = run_sitegen("build", EXAMPLE, "--out", out, "--cache", cache, "--config", config, "--quiet", preexec_fn=_strict_umask)
    assert r.returncode == 0, r.stderr
    return out.resolve()


def _modes(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            found[p.relative_to(root).as_posix()] = stat.S_IMODE(p.lstat().st_mode)
    return found


def _assert_public(root: Path) -> int:
    modes = _modes(root)
    for rel, mode in modes.items():
        is_dir = (root / rel).is_dir()
        assert mode & 0o002 == 0, f"{rel} is writable by others ({mode:o})"
        assert mode & (0o005 if is_dir else 0o004) == (0o005 if is_dir else 0o004), f"{rel} is not readable by others ({mode:o})"
    return len(modes)


def test_a_build_under_umask_077_is_readable_by_all_and_writable_by_none(tmp_path):
    out, cache = tmp_path / "www" / "site" / "reports", tmp_path / "cache"
    (tmp_path / "www").mkdir()
    live = _build(out, cache, "first")
    assert _assert_public(live) > 100
    for folder in (builds_dir(out), out.parent):  # made by the build: nginx must pass through them
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755, folder
    # a build linked from a live build whose files an older sitegen left private (mode 600)
    for p in live.rglob("*"):
        if p.is_file():
            p.chmod(0o600)
    again = _build(out, cache, "second")
    assert again != live
    assert _assert_public(again) > 100
    linked = [p for p in again.rglob("*") if p.is_file() and p.stat().st_nlink > 1]
    assert len(linked) > 10  # (the assets and media were linked, not written again)
