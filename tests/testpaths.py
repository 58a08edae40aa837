"""Paths and browser settings shared by the tests (a plain module: ``conftest`` names collide
between folders, so tests import these from here)."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "archive"
CHROMIUM = os.environ.get("SITEGEN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]


def page_payload(html: Path) -> dict:
    """The data block of a run or comparison page (``<script type="application/json"
    id="sitegen-page">``), parsed as the page script parses it."""
    import json
    import re

    text = Path(html).read_text("utf-8")
    found = re.search(r'<script type="application/json" id="sitegen-page">(.*?)</script>', text, re.S)
    assert found, f"{html}: no page data block"
    data = json.loads(found.group(1))
    if data.get("kind") == "compare":  # each tag's parts from the page's piece scripts, as site.js takes them
        pieces = {}
        for name in data["pieces"]:
            script = (Path(html).parent / name).read_text("utf-8")
            head = f"window.SITEGEN_PIECES[{json.dumps(name)}]="
            assert head in script and script.endswith(";\n"), f"{html}: piece {name} is not a piece script"
            pieces[name] = json.loads(script[script.index(head) + len(head):-2])
        for tg in data["tags"]:
            tg["parts"] = []
            for k, pos in tg["from"]:
                tag, part = pieces[data["pieces"][k]][pos]
                assert tag == tg["tag"], f"{html}: piece {data['pieces'][k]} has {tag!r} where {tg['tag']!r} was expected"
                tg["parts"].append(part)
    return data
