"""The example site, byte for byte: every page and asset of a build of ``examples/archive`` is
compared with the digests committed in ``tests/golden/example-site.txt``.

The manifest is compared without its input keys (``runs`` and ``site``): they hash sitegen's
own code, so that a new version never reuses an old build's pages. Everything a reader sees is
compared. After a deliberate change of the pages (or an upgrade of vl-convert, whose Vega bundle
is shipped), regenerate the list with ``SITEGEN_UPDATE_GOLDEN=1 pytest tests/test_golden_site.py``
and review the diff."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "example-site.txt"
SOURCE_DATE_EPOCH = "1700000000"


def site_digests(site: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file of a built site; the manifest without its
    input keys."""
    root = site.resolve()
    out = {}
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(root).as_posix()
        if rel == "manifest.json.gz":
            continue  # the twin of manifest.json, which is compared below
        data = p.read_bytes()
        if rel == "manifest.json":
            doc = json.loads(data)
            doc.pop("runs"), doc.pop("site")
            data = json.dumps(doc, sort_keys=True).encode()
        out[rel] = hashlib.sha256(data).hexdigest()
    return out


def test_example_site_is_byte_identical(tmp_path: Path) -> None:
    out = tmp_path / "site"
    env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH)
    subprocess.run([sys.executable, "-m", "sitegen", "build", "examples/archive", "--out", str(out), "--no-cache",
                    "--quiet"], cwd=ROOT, env=env, check=True)
    got = site_digests(out)
    text = "".join(f"{d} {rel}\n" for rel, d in got.items())
    if os.environ.get("SITEGEN_UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    want = dict(line.split(" ", 1)[::-1] for line in GOLDEN.read_text().splitlines())
    assert sorted(got) == sorted(want), "the site's files differ from the golden list"
    changed = [rel for rel in got if got[rel] != want[rel]]
    assert not changed, f"{len(changed)} files differ from the golden site: {changed[:10]}"
