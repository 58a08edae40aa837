"""The one vendored Vega script, made with vl-convert at build time.

``vl_convert.javascript_bundle()`` takes seconds and is byte-identical across calls, so the
cache keeps it per vl-convert version. Its minified top-level names would leak into the page's
global scope (a page function named ``L`` broke it), so it is wrapped in an IIFE; its
``window.vegaEmbed = ...`` exports still work.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Callable

from sitegen.resources import package_stamp

log = logging.getLogger(__name__)


def _make() -> bytes:
    import vl_convert  # here only: its large library would load in every build process

    log.info("making the Vega bundle with vl-convert %s (once)", getattr(vl_convert, "__version__", "?"))
    bundle = vl_convert.javascript_bundle()  # type: ignore[call-arg]  # its stub makes the optional snippet required
    return ("(function(){\n" + bundle + "\n})();\n").encode("utf-8")


def bundle(memo: Callable[[str, Callable[[], bytes]], bytes] = lambda name, make: make()) -> bytes:
    """The IIFE-wrapped Vega + Vega-Lite + vega-embed bundle, kept under a name that changes
    with the installed vl-convert (its package file's path, size, time and inode, read without
    importing it); ``memo`` keeps it between builds."""
    installed = hashlib.sha256(package_stamp("vl_convert").encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return memo(f"vega-bundle-{installed}.js", _make)
