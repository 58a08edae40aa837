"""The one vendored Vega script, made with vl-convert at build time.

``vl_convert.javascript_bundle()`` takes seconds and is byte-identical across calls, so the
store keeps it per vl-convert version. Its minified top-level names would leak into the page's
global scope (a page function named ``L`` broke it), so it is wrapped in an IIFE; its
``window.vegaEmbed = ...`` exports still work.
"""
from __future__ import annotations

import logging

import vl_convert

from .store import Store

log = logging.getLogger(__name__)


def _make() -> bytes:
    log.info("making the Vega bundle with vl-convert %s (once)", vl_convert.__version__)
    return ("(function(){\n" + vl_convert.javascript_bundle() + "\n})();\n").encode("utf-8")


def bundle(store: Store | None = None) -> bytes:
    """The IIFE-wrapped Vega + Vega-Lite + vega-embed bundle."""
    store = store or Store(None)
    return store.blob(f"vega-bundle-{vl_convert.__version__}.js", _make)
