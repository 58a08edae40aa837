"""The page templates' environment: jinja2 with autoescape and StrictUndefined, the filters that
format values, Markdown for notes and text, and how a page's data joins its HTML.

No inline script ever runs (a strict CSP blocks them): a run or comparison page carries its data
in a JSON data block (``<script type="application/json">``, never run), and the index its rows
in a classic ``index-data.js``, because over ``file://`` Chromium blocks fetch/XHR/ES modules.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import secrets
from typing import TYPE_CHECKING, Any

from sitegen import __version__
from sitegen.config import Config
from sitegen.pages.charts import json_text
from sitegen.pages.i18n import translator
from sitegen.resources import default_cache_dir, templates_dir

if TYPE_CHECKING:
    import jinja2
    from markdown_it import MarkdownIt


RESOURCE_PREFIXES = ("sys/", "system/", "gpu/", "memory/", "mem/", "cpu/", "resources/")


def js_data(name: str, obj: Any) -> bytes:
    """A classic script assigning ``obj`` to ``window.<name>``, safe against ``</script>`` and U+2028."""
    return f"window.{name}={json_text(obj)};\n".encode("utf-8")


def render_page(template: jinja2.Template, data_json: str, **context: Any) -> bytes:
    """The page's bytes, with ``data_json`` (:func:`json_text`) as its data block (``<script
    type="application/json" id="sitegen-page">``, read by ``core.js``): in the page itself, so a
    run page is one file and not two (creating files is a large part of a build's cost), and
    still readable over ``file://``; a strict CSP does not apply to data blocks, which are never
    run. The data is most of a page's bytes: it joins the rendered HTML only as UTF-8, so it is
    never copied into the template's output nor widened with it (the pages' text holds
    characters past Latin-1, which would widen every character of the data in memory)."""
    from markupsafe import Markup

    mark = f"sitegen-data-{secrets.token_hex(8)}"  # not guessable: no log string can forge it
    head, found, tail = template.render(**context, page_json=Markup(mark)).partition(mark)
    assert found and mark not in tail, "the page template must place page_json once"
    return b"".join((head.encode("utf-8"), data_json.encode("utf-8"), tail.encode("utf-8")))


def _safe_link(url: str) -> bool:
    """Markdown links may point to http(s) or stay relative; never javascript:, data:, file: ..."""
    u = url.strip().lower()
    if ":" not in u.split("/", 1)[0] and not u.startswith("//"):
        return True
    return u.startswith(("http://", "https://", "mailto:"))


def markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt  # lazy, like jinja2: a rebuild that changes nothing needs neither

    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.validateLink = _safe_link  # type: ignore[method-assign]  # markdown-it-py's documented hook
    md.core.ruler.push("align_classes", _align_classes)
    return md


def _align_classes(state: Any) -> None:
    """Table cell alignment as ``class="align-right"`` rather than a ``style`` attribute, which
    the site's strict CSP refuses (site.css styles the classes)."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open"):
            style = token.attrs.pop("style", None)
            if isinstance(style, str) and style.startswith("text-align:"):
                token.attrJoin("class", "align-" + style.split(":", 1)[1].strip())


class LazyMarkdown:
    """:func:`markdown`, made on its first ``render``: most runs have no notes or text, and
    each process would import markdown-it for nothing."""

    _md: MarkdownIt | None = None

    def render(self, text: str) -> str:
        if self._md is None:
            self._md = markdown()
        return self._md.render(text)


def fmt_time(ts: float | None) -> str:
    if ts is None or not math.isfinite(ts):
        return ""
    try:
        return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return ""


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return ""
    s = int(seconds)
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def fmt_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool) or isinstance(v, str):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+inf" if v > 0 else "-inf"
        return f"{v:.6g}"
    return str(v)


def sort_key(v: Any) -> str:
    """A value for the table's data-v attribute: numbers as numbers, the rest as text."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, (int, float)):
        return repr(float(v)) if math.isfinite(v) else ""
    return "" if v is None else str(v)


def _template_cache():
    """Compiled templates kept in the machine cache (like .pyc files): compiling them cost each
    build process ~0.4 s. Jinja checks each entry against the template's source."""
    import jinja2

    folder = default_cache_dir() / "templates"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(str(folder))


def _env(language: str = "en") -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        bytecode_cache=_template_cache(),
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(time=fmt_time, duration=fmt_duration, value=fmt_value, sortv=sort_key, size=fmt_size)
    env.globals["t"] = translator(language)
    env.tests["startswith"] = lambda value, prefix: str(value).startswith(prefix)
    return env


def fmt_size(n: int | None) -> str:
    if n is None:
        return ""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)


@functools.lru_cache(maxsize=4)
def page_context(language: str) -> tuple[jinja2.Environment, LazyMarkdown]:
    """One jinja environment and Markdown renderer per process and language."""
    return _env(language), LazyMarkdown()


def load_templates(language: str = "en") -> None:
    """Load the page templates now (their compiled code comes from the machine cache): a worker
    does it while it waits for its first run."""
    env = page_context(language)[0]
    for name in ("run.html", "compare.html", "index.html"):
        env.get_template(name)


def common_context(config: Config) -> dict:
    return {"title": config.title, "lang": config.language, "version": __version__}
