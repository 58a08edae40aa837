"""Helpers shared by the test folders, imported as ``from tests.support import ...`` (pytest's
``pythonpath = ["."]`` makes the repository root importable; Dask and pool workers are spawned
with the same import path, so they import these modules too).

This module stays light (paths, browser settings, the page-data reader); the heavier helpers
are modules of their own: :mod:`~tests.support.eventgen` and :mod:`~tests.support.corpus`
(log writers), :mod:`~tests.support.sites` (building and comparing sites),
:mod:`~tests.support.executors` (executors that inject slow, flaky or broken work),
:mod:`~tests.support.cli` (the real command line), :mod:`~tests.support.moto` (an S3 server).
"""
from __future__ import annotations

import importlib
import json
import os
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "archive"
CHROMIUM = os.environ.get("SITEGEN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]


def need(module: str) -> ModuleType:
    """Import an optional test dependency; FAIL (never skip) when it is missing."""
    import pytest

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(f"{module} is missing ({exc}): pip install -e '.[test]'")


def page_payload(html: Path) -> dict:
    """The data block of a run or comparison page (``<script type="application/json"
    id="sitegen-page">``), parsed as the page script parses it."""
    text = Path(html).read_text("utf-8")
    found = re.search(r'<script type="application/json" id="sitegen-page">(.*?)</script>', text, re.S)
    assert found, f"{html}: no page data block"
    data = json.loads(found.group(1))
    if data.get("kind") == "compare" and "summary" not in data:  # each tag's parts from the page's piece scripts, as the page script takes them
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


def brush_axis(page, axis: str, f0: float, f1: float) -> None:
    """Drag along an axis of a comparison page's parallel coordinates, from ``f0`` to ``f1`` of
    its height (the browser tests and scripts/screenshots.py brush the same way)."""
    hit = page.locator(f"#pc-chart .pc-hit[data-axis='{axis}']")
    hit.scroll_into_view_if_needed()
    box = hit.bounding_box()
    x = box["x"] + box["width"] / 2
    page.mouse.move(x, box["y"] + box["height"] * f0)
    page.mouse.down()
    page.mouse.move(x, box["y"] + box["height"] * f1, steps=8)
    page.mouse.up()
