"""The built example site is self-contained: links resolve inside it, nothing points elsewhere,
no inline script or style, and two builds are byte-identical."""
from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.support import EXAMPLE


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[str] = []
        self.inline_scripts = 0
        self.data_blocks = 0
        self.handlers: list[str] = []
        self.styles: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("href", "src"):
            if a.get(key) is not None:
                self.refs.append(a[key])
        for key in a:
            if key.startswith("on"):
                self.handlers.append(f"{tag} {key}")
        if "style" in a:
            self.styles.append(tag)
        if tag == "script":
            # a JSON data block is never run (nor held to script-src by a CSP): not code
            self._in_script = "src" not in a and a.get("type") != "application/json"
            if a.get("type") == "application/json":
                self.data_blocks += 1
        if tag == "style":
            self.styles.append("<style>")

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline_scripts += 1

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_every_link_resolves_inside_the_site(example_site: Path):
    pages = _pages(example_site)
    assert len(pages) >= 11  # index + one page per example run
    checked = 0
    for page in pages:
        parser = _Refs()
        parser.feed(page.read_text("utf-8"))
        for ref in parser.refs:
            parts = urlsplit(ref)
            if not parts.path and parts.fragment:
                continue  # in-page anchor
            assert not parts.scheme and not parts.netloc, f"{page}: link to another host or scheme: {ref}"
            assert not ref.startswith("/"), f"{page}: absolute link breaks under a sub-path: {ref}"
            target = (page.parent / unquote(parts.path)).resolve()
            assert target.is_relative_to(example_site.resolve()), f"{page}: {ref} leaves the site"
            assert target.is_file(), f"{page}: {ref} does not exist"
            checked += 1
    assert checked > 50


def test_no_other_host_and_no_inline_code(example_site: Path):
    # what a browser would load: attributes and CSS urls (a log's text may show a URL, e.g. a
    # run's git remote, as text; the browser tests check that no request leaves the site)
    host = rb"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/"
    url = re.compile(rb"(?:\b(?:src|href|action|srcset|poster|data)\s*=\s*[\"']?\s*|url\(\s*[\"']?|@import\s+[\"']?)" + host, re.I)
    for path in sorted(example_site.rglob("*")):
        if not path.is_file() or path.suffix not in (".html", ".css"):
            continue
        data = path.read_bytes()
        assert not url.search(data), f"{path} references another host: {url.search(data).group(0)!r}"
    assert url.search(b'<img src="https://example.com/x.png">') and url.search(b"a{background:url(//cdn.example.org/a)}")
    for page in _pages(example_site):
        parser = _Refs()
        parser.feed(page.read_text("utf-8"))
        assert parser.inline_scripts == 0, f"{page}: inline script"
        data_page = page.parent.parent.name in ("runs", "compare", "trends")  # run, comparison and trend pages carry their data
        assert parser.data_blocks == (1 if data_page else 0), f"{page}: {parser.data_blocks} data blocks"
        assert not parser.handlers, f"{page}: event handler attributes {parser.handlers}"
        assert not parser.styles, f"{page}: inline style {parser.styles}"


def test_vega_bundle_is_vendored_wrapped_and_precompressed(example_site: Path):
    bundles = list((example_site / "assets").glob("vega-*.js"))
    assert len(bundles) == 1
    data = bundles[0].read_bytes()
    assert data.startswith(b"(function(){") and data.rstrip().endswith(b"})();")
    assert b"window.vegaEmbed" in data
    digest = hashlib.sha256(data).hexdigest()[:12]
    assert bundles[0].name == f"vega-{digest}.js"
    import gzip

    assert gzip.decompress(bundles[0].with_name(bundles[0].name + ".gz").read_bytes()) == data



def test_a_kept_vega_bundle_is_used_without_importing_vl_convert(tmp_path: Path):
    """Importing vl-convert (an 80 MB library) cost every build process 80 ms: once the bundle
    is kept, it is read back by a name that follows the installed vl-convert, not imported."""
    import os
    import subprocess
    import sys

    code = ("import sys\nfrom pathlib import Path\nfrom sitegen.pages.assets import assets\nfrom sitegen.cache.store import Store\n"
            "data = assets('en', Store(Path(sys.argv[1])).blob).files\n"
            "print('vl_convert' in sys.modules, sorted(n for n in data if n.startswith('assets/vega-')))\n")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "home-cache")}  # not the machine's cache
    runs = [subprocess.run([sys.executable, "-c", code, str(tmp_path / "cache")], capture_output=True, text=True,
                           env=env, timeout=300) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    (made, first), (kept, second) = [r.stdout.split(" ", 1) for r in runs]
    assert (made, kept) == ("True", "False")  # made once (with vl-convert), then only read
    assert first == second and "vega-" in first  # the same bundle, byte for byte (its name is its hash)

def test_two_builds_are_byte_identical(example_site: Path, tmp_path: Path):
    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build

    again = tmp_path / "again"
    build(EXAMPLE, again, BuildOptions(config=Config(title="Example runs")))

    def tree(root: Path) -> dict[str, str]:
        return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}

    first, second = tree(example_site), tree(again)
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []


def test_page_data_equals_plain_json_with_hostile_strings():
    """Base64 columns are copied past the JSON encoder; everything else is encoded and escaped
    exactly as ``json.dumps`` plus the script-safe escapes would (strings from logs included,
    even ones shaped like the placeholders)."""
    import json

    import numpy as np

    from sitegen.pages.charts import json_text, numbers

    hostile = ['"0', '0"', "</script><script>alert(1)</script>", "\u2028\u2029", "&amp;<!--", "'\"\\", "数据"]
    obj = {"tags": [{"tag": h, "x": numbers(np.arange(7) * 3), "y": numbers(np.array([0.5, np.nan, -np.inf, 1e300]))}
                    for h in hostile],
           "labels": hostile, "nested": [[numbers(np.array([1, 5, 2]))], (hostile[0], numbers(np.array([2.5])))]}
    plain = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    for raw, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        plain = plain.replace(raw, esc)
    text = json_text(obj)
    assert text == plain
    assert "<" not in text and json.loads(text) == json.loads(json.dumps(obj))
