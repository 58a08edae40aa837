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
    return json.loads(found.group(1))
