"""Render the site into memory: ``{relative path: bytes}``. Only ``publish`` writes to disk.

Pages are jinja2 templates (autoescape, StrictUndefined). No inline script ever runs (a strict
CSP blocks them): a run or comparison page carries its data in a JSON data block
(``<script type="application/json">``, never run, read by ``site.js``), and the index its
rows in a classic ``index-data.js``, because over ``file://`` Chromium blocks fetch/XHR/ES
modules.
"""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import math
import re
import secrets
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable


from sitegen import __version__
from sitegen.pages import charts, compare, vega
from sitegen.pages.charts import Plain, json_text
from sitegen.config import Config
from sitegen.errors import Problem
from sitegen.prepare.hparams import lower_is_better, text_value
from sitegen.pages.i18n import js_messages, translator
from sitegen.model import HParamValue, SiteRun
from sitegen.resources import templates_dir
from sitegen.pipeline.stamp import package_stamp
from sitegen.cache.store import Store

if TYPE_CHECKING:
    import jinja2
    from markupsafe import Markup
    from markdown_it import MarkdownIt

RESOURCE_PREFIXES = ("sys/", "system/", "gpu/", "memory/", "mem/", "cpu/", "resources/")


def js_data(name: str, obj: Any) -> bytes:
    """A classic script assigning ``obj`` to ``window.<name>``, safe against ``</script>`` and U+2028."""
    return f"window.{name}={json_text(obj)};\n".encode("utf-8")


def render_page(template: jinja2.Template, data_json: str, **context: Any) -> bytes:
    """The page's bytes, with ``data_json`` (:func:`json_text`) as its data block (``<script
    type="application/json" id="sitegen-page">``, read by ``site.js``): in the page itself, so a
    run page is one file and not two (creating files is a large part of a build's cost), and
    still readable over ``file://``; a strict CSP does not apply to data blocks, which are never
    run. The data is most of a page's bytes: it joins the rendered HTML only as UTF-8, so it is
    never copied into the template's output nor widened with it (the text of the pages holds
    characters past Latin-1, which made every character of a 1 MB comparison page take 2-4
    bytes in memory before it was encoded)."""
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
    md.validateLink = _safe_link
    return md


class LazyMarkdown:
    """:func:`markdown`, made on its first ``render``: most runs have no notes or text, and
    importing markdown-it costs each process ~40 ms."""

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

    from sitegen.cache.store import default_cache_dir

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
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _hashed(path: str, data: bytes) -> str:
    stem, dot, ext = path.rpartition(".")
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}.{ext}"


@dataclass(eq=False, repr=False)
class Assets:
    files: dict[str, bytes]
    urls: dict[str, str]  # logical name -> path from the site root


def _specs(language: str, store: Store | None) -> bytes:
    """The chart templates' script; built with altair only when the store has no copy for this
    version of the templates, the catalog and altair (importing altair costs ~0.5 s)."""
    h = hashlib.sha256((Path(__file__).parent / "specs.py").read_bytes())
    # which altair, without importing it (0.5 s) or asking importlib.metadata (20 ms)
    h.update(json.dumps(js_messages(language), sort_keys=True).encode() + package_stamp("altair").encode())
    make = lambda: js_data("SITEGEN_SPECS", charts.templates(language))  # noqa: E731
    return (store or Store(None)).blob(f"specs-{language}-{h.hexdigest()[:16]}.js", make)


def _assets(language: str = "en", store: Store | None = None) -> Assets:
    static = templates_dir() / "static"
    files: dict[str, bytes] = {}
    urls: dict[str, str] = {}
    items = {
        "vega.js": vega.bundle(store),
        "specs.js": _specs(language, store),
        "messages.js": js_data("SITEGEN_MSG", js_messages(language)),
        "site.js": (static / "site.js").read_bytes(),
        "site.css": (static / "site.css").read_bytes(),
    }
    for name, data in items.items():
        path = "assets/" + _hashed(name, data)
        files[path] = data
        urls[name] = path
    return Assets(files, urls)


KEY_WORDS = re.compile(r"acc|loss|error|perplexity|ppl|f1|bleu|rouge|auc|map|iou|score|reward|wer|cer", re.I)
EVAL_PREFIX = re.compile(r"^(eval|val|valid|validation|test|dev)[/_]", re.I)


def key_metrics(runs: list[SiteRun], config: Config) -> list[str]:
    """The configured key metrics, else the 4 most common of the runs' own tags, preferring
    evaluation tags and tags that name a quality (loss, accuracy, ...)."""
    if config.index.key_metrics:
        return list(config.index.key_metrics)
    counts = Counter(t for r in runs for t in {ln.tag for ln in r.lines if ln.label in ("", "hparams") and not ln.tag.startswith(RESOURCE_PREFIXES)})
    ranked = sorted(counts, key=lambda t: (-counts[t], -bool(KEY_WORDS.search(t)) - bool(EVAL_PREFIX.search(t)), t))
    return sorted(ranked[:4])


def last_values(run: SiteRun) -> dict[str, float]:
    out: dict[str, float] = {}
    for ln in run.lines:
        if ln.label in ("", "hparams") and ln.tag not in out:
            out[ln.tag] = ln.series.stats.last_value
    return out


PAGE_ROWS = 200  # index rows per page (server-rendered first page; the script pages the rest)
MAX_INDEX_HPARAMS = 20


def assets(language: str = "en", store: Store | None = None) -> Assets:
    """The site's shared scripts and styles, with content-hashed names."""
    return _assets(language, store)


@functools.lru_cache(maxsize=4)
def _page_context(language: str) -> tuple[jinja2.Environment, LazyMarkdown]:
    """One jinja environment and Markdown renderer per process and language."""
    return _env(language), LazyMarkdown()


def load_templates(language: str = "en") -> None:
    """Load the page templates now (their compiled code comes from the machine cache): a worker
    does it while it waits for its first run."""
    env = _page_context(language)[0]
    for name in ("run.html", "compare.html", "index.html"):
        env.get_template(name)


def _common(config: Config) -> dict:
    return {"title": config.title, "lang": config.language, "version": __version__}


def run_files(run: SiteRun, hp: dict[str, HParamValue], config: Config, urls: dict[str, str],
              problems: list[Problem], nested_dirs: frozenset = frozenset()) -> dict[str, bytes]:
    """One run's page, data script, media and downloads (a pure function: runs in workers)."""
    from sitegen.pages.runpage import run_page

    env, md = _page_context(config.language)
    group_href = {"/".join(run.parts[:i]): f"compare/{compare.group_slug(tuple(run.parts[:i]))}/index.html"
                  for i in range(0, len(run.parts))}
    return run_page(env, md, run, hp, Assets({}, urls), _common(config), problems, config, group_href, nested_dirs)


def cross_files(runs: list[SiteRun], hps: list[dict[str, HParamValue]], config: Config, assets: Assets,
                problems: list[Problem], *, skip: frozenset = frozenset(), points: compare.Points | None = None,
                kept: compare.Kept | None = None, write: Callable[[str, bytes], None] | None = None) -> dict[str, bytes]:
    """The index and every comparison page, from the runs' summaries; groups whose slug is in
    ``skip`` are not drawn (their pages are reused from the previous build). ``points``: see
    :func:`sitegen.pages.compare.overlay_data`. ``write(rel, data)``: called for each file as soon as
    it is drawn (a large archive has hundreds of comparison pages of up to 2 MB: holding them
    all made memory grow with the archive); without it, the files are returned."""
    files: dict[str, bytes] = {}
    emit = write or files.__setitem__
    groups = compare.groups(runs)
    hp_of = {id(r): hp for r, hp in zip(runs, hps)}
    for g in groups:
        if g.slug not in skip:
            for rel, data in compare_files(g, [hp_of[id(r)] for r in g.runs], config, assets, points, kept).items():
                emit(rel, data)
    for rel, data in index_files(runs, hps, groups, config, assets, problems).items():
        emit(rel, data)
    return files


def compare_files(group: compare.Group, hps: list[dict[str, HParamValue]], config: Config, assets: Assets,
                  points: compare.Points | None = None, kept: compare.Kept | None = None) -> dict[str, bytes]:
    """One comparison page and its data (``hps``: of ``group.runs``; runs in workers; ``kept``:
    the pieces of the last build's page, see :func:`sitegen.pages.compare.overlay_data`)."""
    env, _ = _page_context(config.language)
    return _compare_page(env, group, hps, config, assets, _common(config), points, kept)


def index_files(runs: list[SiteRun], hps: list[dict[str, HParamValue]], groups: list[compare.Group], config: Config,
                assets: Assets, problems: list[Problem]) -> dict[str, bytes]:
    """The experiment browser (``index.html`` and ``index-data.js``)."""
    env, _ = _page_context(config.language)
    return _index(env, runs, hps, groups, config, assets, _common(config), problems)


def _index(env, runs, hps, groups, config, assets, common, problems) -> dict[str, bytes]:
    """The experiment browser: a server-rendered first page and ``index-data.js`` for the rest."""
    metrics = key_metrics(runs, config)
    depth = max((len(r.parts) - 1 for r in runs), default=0)
    varying = [k for k in sorted({k for h in hps for k in h}, key=str)
               if len({text_value(h.get(k)) if k in h else None for h in hps}) > 1][:MAX_INDEX_HPARAMS]
    tag_ids: dict[str, int] = {}
    key_ids: dict[str, int] = {}
    lasts = [last_values(r) for r in runs]
    best = []
    for m in metrics:
        vals = [(v, i) for i, lv in enumerate(lasts) if isinstance(v := lv.get(m), float) and math.isfinite(v)]
        best.append((min(vals) if lower_is_better(m) else max(vals))[1] if len(vals) > 1 else -1)
    data_rows = Plain()  # (no binary column in them: json_text need not look inside)
    for i, (r, hp, lv) in enumerate(zip(runs, hps, lasts)):
        dur = (r.end_time - r.start_time) if r.start_time is not None and r.end_time is not None else None
        tags = sorted({ln.tag for ln in r.lines}, key=str)
        data_rows.append([
            r.slug, list(r.parts[:-1]) + [""] * (depth - len(r.parts) + 1), r.title if r.title != r.name else r.parts[-1],
            _num(r.start_time), fmt_time(r.start_time), _num(dur), fmt_duration(dur), r.last_step,
            [_num(lv.get(m)) for m in metrics],
            [tag_ids.setdefault(t, len(tag_ids)) for t in tags],
            {str(key_ids.setdefault(k, len(key_ids))): _hp(v) for k, v in sorted(hp.items())},
        ])
    data = {
        "depth": depth, "metrics": metrics, "lower": [lower_is_better(m) for m in metrics], "best": best,
        "hcols": [key_ids.get(k, -1) for k in varying], "tags": list(tag_ids), "hkeys": list(key_ids),
        "groups": {g.name: f"compare/{g.slug}/index.html" for g in groups if g.key}, "pageRows": PAGE_ROWS, "runs": data_rows,
    }
    rows = [
        {"run": r, "groups": list(r.parts[:-1]) + [""] * (depth - len(r.parts) + 1), "leaf": r.parts[-1],
         "metrics": lv, "hparams": hp, "best": [m for m, b in zip(metrics, best) if b == i]}
        for i, (r, hp, lv) in enumerate(zip(runs, hps, lasts)) if i < PAGE_ROWS
    ]
    page = env.get_template("index.html").render(
        **common, root="", assets=assets.urls, rows=rows, total=len(runs), depth=depth, metrics=metrics,
        row_html=_index_rows(rows, metrics, varying, data["groups"], env.globals["t"]),
        hparam_names=varying, problems=problems, groups=[g for g in groups], group_links=data["groups"], page_rows=PAGE_ROWS,
    )
    return {"index.html": page.encode("utf-8"), "index-data.js": js_data("SITEGEN_INDEX", data)}


def _index_rows(rows: list[dict], metrics: list[str], hparam_names: list[str], group_links: dict[str, str],
                t: Callable) -> Markup:
    """The index table's server-rendered rows (written here rather than in the template: Jinja
    spent 40 ms a build on 200 of them)."""
    from markupsafe import Markup, escape

    best_title = escape(t("index.best_run"))
    out = []
    for row in rows:
        r = row["run"]
        cells = ["<tr>\n"]
        for k, g in enumerate(row["groups"]):
            href = group_links.get("/".join(r.parts[: k + 1])) if g else None
            cells.append(f'<td><a href="{escape(href)}">{escape(g)}</a></td>' if href else f"<td>{escape(g)}</td>")
        dur = (r.end_time - r.start_time) if r.start_time is not None and r.end_time is not None else None
        cells.append(f'<td><a href="runs/{escape(r.slug)}/index.html">{escape(r.title if r.title != r.name else row["leaf"])}</a></td>\n'
                     f"<td>{escape(fmt_time(r.start_time))}</td>\n<td>{escape(fmt_duration(dur))}</td>\n"
                     f"<td>{escape(r.last_step if r.last_step is not None else '')}</td>\n")
        for m in metrics:
            value = escape(fmt_value(row["metrics"].get(m)))
            if m in row["best"]:
                cells.append(f'<td class="num best" title="{best_title}">{value} ★</td>')
            else:
                cells.append(f'<td class="num">{value}</td>')
        cells.extend(f"<td>{escape(fmt_value(row['hparams'].get(h)))}</td>" for h in hparam_names)
        cells.append("</tr>\n")
        out.append("".join(cells))
    return Markup("".join(out))


def _num(v: Any) -> Any:
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v if math.isfinite(v) else None


def _hp(v: HParamValue) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else text_value(v)
    return v


def _compare_page(env, group, hps, config, assets, common, points=None, kept=None) -> dict[str, bytes]:
    prefix = f"compare/{group.slug}/"
    labels = compare.labels(group)
    first = max(0, len(group.runs) - compare.MAX_TABLE_ROWS)  # the table lists the newest runs
    table_runs = group.runs[first:]
    ghps = hps[first:]
    metrics = key_metrics(group.runs, config)
    table, hcharts, configs = compare.hparam_section(table_runs, labels[first:], ghps, metrics)
    rest = {"labels": labels[first:], "charts": hcharts, "configs": configs}
    rest_json = json_text(rest)
    # the curves get what the table, charts and configs leave of the page's data budget
    overlay = compare.overlay_data(group, labels, budget=compare.BUDGET - len(rest_json), points=points, kept=kept,
                                   prefix=prefix)
    # the page's data, {"kind": "compare", **overlay, **rest}, from the two halves (``rest`` is
    # encoded once: for 500 runs that is a third of the data)
    data_json = '{"kind":"compare",' + overlay.text + "," + rest_json[1:]
    crumbs = [("/".join(group.key[: i + 1]), f"../{compare.group_slug(group.key[: i + 1])}/index.html") for i in range(len(group.key) - 1)]
    t = env.globals["t"]
    page = render_page(
        env.get_template("compare.html"), data_json,
        **common, root="../../", assets=assets.urls, group=group, labels=labels[first:], overlay=overlay, table=table,
        table_runs=table_runs, hcharts=hcharts, crumbs=crumbs, metrics=metrics,
        run_items=_run_items(overlay), table_body=_table_body(table, table_runs, labels[first:], "../../", t),
    )
    return {prefix + "index.html": page, **{prefix + name: data for name, data in overlay.files.items()}}


# The two loops of a comparison page with hundreds of runs, written here rather than in the
# template: Jinja spent 0.13 s on them for a 500-run page, a third of redrawing it.

def _run_items(overlay: compare.Overlay) -> Markup:
    """The run picker's items (``<li>`` per drawn run; the newest ``on`` are checked)."""
    from markupsafe import Markup, escape

    n, on = len(overlay.runs), overlay.on
    return Markup("".join(
        f'<li><label><input type="checkbox" class="run-toggle" data-r="{i}"{" checked" if i >= n - on else ""}> '
        f'{escape(label)}</label> <a href="{escape(href)}">↗</a></li>'
        for i, (label, href) in enumerate(overlay.runs)))


def _table_body(table, table_runs: list[SiteRun], labels: list[str], root: str, t: Callable) -> Markup:
    """The hyperparameter table's rows."""
    from markupsafe import Markup, escape

    pick, best_title = escape(t("compare.pick_for_diff")), escape(t("compare.best"))
    out = []
    for i, (row, run, label) in enumerate(zip(table.rows, table_runs, labels)):
        label = escape(label)
        cells = []
        for c, v in zip(table.columns, row):
            best = c.best is not None and v == c.best
            cls = ("num" if c.numeric else "") + (" best" if best else "")
            if type(v) is float and math.isfinite(v):  # most cells: sort_key and fmt_value, inlined
                key, text = repr(v), f"{v:.6g}"
            elif type(v) is float:  # NaN, inf: their texts need no escaping either
                key, text = sort_key(v), fmt_value(v)
            else:
                key, text = escape(sort_key(v)), escape(fmt_value(v))
            cells.append(f'<td data-v="{key}" class="{cls}"' + (f' title="{best_title}"' if best else "")
                         + f">{text}" + (" ★" if best else "") + "</td>")
        out.append(f'<tr><td><input type="checkbox" class="diff-pick" data-r="{i}" aria-label="{pick}"></td>\n'
                   f'<td data-v="{label}"><a href="{escape(root)}runs/{escape(run.slug)}/index.html">{label}</a></td>\n'
                   + "".join(cells) + "</tr>\n")
    return Markup("".join(out)[:-1])  # the template puts the last line break
