"""The site's shared assets: the Vega bundle, the chart templates, the messages, the page scripts
(a shared core and one script per page kind) and the style sheet, each under a name that holds a
hash of its content (cached for a year)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sitegen.pages import charts, vega
from sitegen.pages.environment import js_data
from sitegen.pages.i18n import js_messages
from sitegen.resources import package_stamp, templates_dir

#: ``memo(name, make)``: the bytes ``make()`` returns, kept between builds under ``name``
Memo = Callable[[str, Callable[[], bytes]], bytes]

#: the browser code in ``templates/static``: ``core.js`` (``window.SITEGEN``, loaded by every
#: page), ``charts.js`` (the line charts of run and comparison pages, the run colours, the view
#: in the address's hash) and the script of each page kind, loaded after it; ``theme.js`` (light
#: or dark), in <head>
PAGE_SCRIPTS = ("core.js", "charts.js", "index.js", "run.js", "compare.js", "hparams.js", "trends.js", "theme.js")


def _hashed(path: str, data: bytes) -> str:
    stem, dot, ext = path.rpartition(".")
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}.{ext}"


@dataclass(eq=False, repr=False)
class Assets:
    files: dict[str, bytes]
    urls: dict[str, str]  # logical name -> path from the site root


def _specs(language: str, memo: Memo) -> bytes:
    """The chart templates' script; built with altair only when the store has no copy for this
    version of the templates, the catalog and altair (importing altair is slow)."""
    h = hashlib.sha256((Path(__file__).parent / "specs.py").read_bytes())
    # which altair, without importing it or asking importlib.metadata
    h.update(json.dumps(js_messages(language), sort_keys=True).encode() + package_stamp("altair").encode())
    make = lambda: js_data("SITEGEN_SPECS", charts.templates(language))  # noqa: E731
    return memo(f"specs-{language}-{h.hexdigest()[:16]}.js", make)


def assets(language: str = "en", memo: Memo = lambda name, make: make()) -> Assets:
    """The site's shared scripts and styles, with content-hashed names; ``memo(name, make)``
    keeps what takes seconds to make (the Vega bundle, the chart templates) between builds."""
    static = templates_dir() / "static"
    files: dict[str, bytes] = {}
    urls: dict[str, str] = {}
    items = {
        "vega.js": vega.bundle(memo),
        "specs.js": _specs(language, memo),
        "messages.js": js_data("SITEGEN_MSG", js_messages(language)),
        **{name: (static / name).read_bytes() for name in PAGE_SCRIPTS},
        "site.css": (static / "site.css").read_bytes(),
    }
    for name, data in items.items():
        path = "assets/" + _hashed(name, data)
        files[path] = data
        urls[name] = path
    return Assets(files, urls)
