"""The one vendored Vega script, made with vl-convert at build time and cached on disk.

``vl_convert.javascript_bundle()`` takes seconds and is byte-identical across calls, so it is
cached per vl-convert version. Its minified top-level names would leak into the page's global
scope (a page function named ``L`` broke it), so it is wrapped in an IIFE; its
``window.vegaEmbed = ...`` exports still work.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import vl_convert

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sitegen"


def bundle(cache_dir: Path | None = None) -> bytes:
    """The IIFE-wrapped Vega + Vega-Lite + vega-embed bundle."""
    cache_dir = cache_dir or default_cache_dir()
    path = cache_dir / f"vega-bundle-{vl_convert.__version__}.js"
    try:
        return path.read_bytes()
    except OSError:
        pass
    log.info("making the Vega bundle with vl-convert %s (once)", vl_convert.__version__)
    js = vl_convert.javascript_bundle()
    data = ("(function(){\n" + js + "\n})();\n").encode("utf-8")
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot cache the Vega bundle in %s: %s", cache_dir, exc)
    return data
