"""Interface strings from message catalogs (``templates/messages/<language>.json``).

Every string a page shows comes from a catalog, so English and Simplified Chinese stay
complete together (a test checks both hold every key and that every key used exists).
Messages may hold ``{name}`` placeholders filled with ``str.format``-style keywords; values
are escaped by jinja like any other, so a hostile run name in a placeholder stays text.
Keys starting with ``js.`` are also shipped to the page script (``window.SITEGEN_MSG``).
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any, Callable

from sitegen.resources import templates_dir

log = logging.getLogger(__name__)
LANGUAGES = ("en", "zh-CN")
DEFAULT = "en"


@functools.cache
def catalog(language: str) -> dict[str, str]:
    """The messages of ``language`` (unknown languages fall back to English)."""
    if language not in LANGUAGES:
        log.warning("no message catalog for %r; using English", language)
        language = DEFAULT
    path = templates_dir() / "messages" / f"{language}.json"
    return json.loads(path.read_text("utf-8"))


def translator(language: str) -> Callable[..., str]:
    """``t(key, **values)``: the message for ``key``, with ``{placeholders}`` filled in.

    A missing key raises KeyError: the catalog test makes that impossible in a release.
    """
    messages = catalog(language)

    def t(key: str, **values: Any) -> str:
        text = messages[key]
        return text.format(**values) if values else text

    return t


def js_messages(language: str) -> dict[str, str]:
    """The ``js.*`` messages, keyed without the prefix, for the page script."""
    return {k[3:]: v for k, v in sorted(catalog(language).items()) if k.startswith("js.")}
