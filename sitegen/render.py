"""Render the site into memory: ``{relative path: bytes}``. Only ``publish`` writes to disk.

Pages are jinja2 templates (autoescape, StrictUndefined). Page data never goes inline: each page
gets a classic ``data.js`` assigning one namespaced global, because over ``file://`` Chromium
blocks fetch/XHR/ES modules, and a strict CSP blocks inline scripts.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import jinja2
from markdown_it import MarkdownIt

from . import __version__, charts, vega
from .config import Config
from .errors import Problem
from .model import SiteRun
from .resources import templates_dir
from .store import Store

RESOURCE_PREFIXES = ("sys/", "system/", "gpu/", "memory/", "mem/", "cpu/", "resources/")


def js_data(name: str, obj: Any) -> bytes:
    """A classic script assigning ``obj`` to ``window.<name>``, safe against ``</script>`` and U+2028."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=False)
    for raw, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, esc)
    return f"window.{name}={text};\n".encode("utf-8")


def _safe_link(url: str) -> bool:
    """Markdown links may point to http(s) or stay relative; never javascript:, data:, file: ..."""
    u = url.strip().lower()
    if ":" not in u.split("/", 1)[0] and not u.startswith("//"):
        return True
    return u.startswith(("http://", "https://", "mailto:"))


def markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.validateLink = _safe_link
    return md


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


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(time=fmt_time, duration=fmt_duration, value=fmt_value, sortv=sort_key)
    return env


def _hashed(path: str, data: bytes) -> str:
    stem, dot, ext = path.rpartition(".")
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}.{ext}"


@dataclass
class Assets:
    files: dict[str, bytes]
    urls: dict[str, str]  # logical name -> path from the site root


def _assets(store: Store | None = None) -> Assets:
    static = templates_dir() / "static"
    files: dict[str, bytes] = {}
    urls: dict[str, str] = {}
    items = {
        "vega.js": vega.bundle(store),
        "specs.js": js_data("SITEGEN_SPECS", charts.templates()),
        "site.js": (static / "site.js").read_bytes(),
        "site.css": (static / "site.css").read_bytes(),
    }
    for name, data in items.items():
        path = "assets/" + _hashed(name, data)
        files[path] = data
        urls[name] = path
    return Assets(files, urls)


def key_metrics(runs: list[SiteRun], config: Config) -> list[str]:
    if config.index.key_metrics:
        return list(config.index.key_metrics)
    counts = Counter(t for r in runs for t in {ln.tag for ln in r.lines if not ln.tag.startswith(RESOURCE_PREFIXES)})
    return sorted(t for t, _ in counts.most_common(4))


def last_values(run: SiteRun) -> dict[str, float]:
    out: dict[str, float] = {}
    for ln in run.lines:
        if ln.label in ("", "hparams") and ln.tag not in out:
            out[ln.tag] = ln.series.stats.last_value
    return out


def render_site(runs: list[SiteRun], config: Config, problems: list[Problem], *, store: Store | None = None) -> dict[str, bytes]:
    env = _env()
    assets = _assets(store)
    files = dict(assets.files)
    metrics = key_metrics(runs, config)
    hparam_names = sorted({k for r in runs for k in r.data.hparams}, key=str)
    depth = max((len(r.parts) - 1 for r in runs), default=0)
    common = {"title": config.title, "lang": config.language, "version": __version__}
    rows = [
        {
            "run": r, "groups": list(r.parts[:-1]) + [""] * (depth - len(r.parts) + 1), "leaf": r.parts[-1],
            "metrics": last_values(r), "hparams": r.data.hparams,
        }
        for r in runs
    ]
    files["index.html"] = env.get_template("index.html").render(
        **common, root="", assets=assets.urls, rows=rows, depth=depth, metrics=metrics,
        hparam_names=hparam_names, problems=problems,
    ).encode("utf-8")
    md = markdown()
    for run in runs:
        files.update(_run_page(env, md, run, assets, common, problems))
    return files


def _group(tag: str) -> str:
    if tag.startswith(RESOURCE_PREFIXES):
        return "Resources"
    return tag.split("/", 1)[0] if "/" in tag else "Scalars"


def _media(prefix: str, data: bytes, mime: str, files: dict[str, bytes]) -> str:
    ext = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp", "audio/wav": "wav",
           "audio/ogg": "ogg", "audio/mpeg": "mp3"}.get(mime, "bin")
    name = f"media/{hashlib.sha256(data).hexdigest()[:20]}.{ext}"
    files[prefix + name] = data
    return name


def _run_page(env: jinja2.Environment, md: MarkdownIt, run: SiteRun, assets: Assets, common: dict, problems: list[Problem]) -> dict[str, bytes]:
    prefix = f"runs/{run.slug}/"
    files: dict[str, bytes] = {}
    chart_data: list[dict[str, Any]] = []
    groups: dict[str, list[dict[str, Any]]] = {}
    by_tag: dict[str, list] = {}
    for ln in run.lines:
        by_tag.setdefault(ln.tag, []).append(ln)
    for tag, lines in by_tag.items():
        rows = charts.scalar_rows([(ln.label or tag, ln.series.step, ln.series.wall_time, ln.series.value) for ln in lines])
        chart_data.append({"kind": "scalar", "rows": rows})
        groups.setdefault(_group(tag), []).append({"tag": tag, "chart": len(chart_data) - 1, "lines": lines})
    ordered = sorted(groups.items(), key=lambda kv: (kv[0] == "Resources", kv[0]))
    data = [run.data, *run.sub_runs]
    hists: dict[str, list] = {}
    for d in data:
        for h in d.histograms:
            hists.setdefault(h.tag, []).append((h.step, h.left, h.right, h.count))
    hist_charts = []
    for tag in sorted(hists):
        chart_data.append({"kind": "histogram", "rows": charts.histogram_rows(_thin(hists[tag], 60))})
        hist_charts.append({"tag": tag, "chart": len(chart_data) - 1, "steps": len(hists[tag])})
    curves: dict[str, list] = {}
    for d in data:
        for c in d.curves:
            x, y = (c.columns["recall"], c.columns["precision"]) if c.kind == "pr" else (c.columns["fpr"], c.columns["tpr"])
            curves.setdefault(f"{c.kind}:{c.tag}", []).append((c.step, x, y))
    curve_charts = []
    for key in sorted(curves):
        chart_data.append({"kind": "curve", "rows": charts.curve_rows(_thin(curves[key], 10))})
        kind, tag = key.split(":", 1)
        curve_charts.append({"tag": tag, "kind": kind, "chart": len(chart_data) - 1})
    images: dict[str, list] = {}
    audio: dict[str, list] = {}
    texts: dict[str, list] = {}
    for d in data:
        for im in d.images:
            images.setdefault(im.tag, []).append({"step": im.step, "src": _media(prefix, im.data, im.mime, files), "w": im.width, "h": im.height})
        for au in d.audio:
            audio.setdefault(au.tag, []).append({"step": au.step, "src": _media(prefix, au.data, au.mime, files), "mime": au.mime})
        for tx in d.texts:
            texts.setdefault(tx.tag, []).append({"step": tx.step, "html": md.render(tx.text)})
    files[prefix + "data.js"] = js_data("SITEGEN_PAGE", {"charts": chart_data})
    run_problems = [p for p in problems if any(p.path == str(f.path) for d in data for f in d.files)]
    metric_values = {}
    for m in run.data.hparam_metrics:
        for ln in run.lines:
            if ln.tag == m:
                metric_values[m] = ln.series.stats.last_value
    page = env.get_template("run.html").render(
        **common, root="../../", assets=assets.urls, run=run, groups=ordered, hist_charts=hist_charts,
        curve_charts=curve_charts, images=sorted(images.items()), audio=sorted(audio.items()),
        texts=sorted(texts.items()), metric_values=metric_values, problems=run_problems,
        files=[(str(f.path.name), f.size) for d in data for f in d.files],
    )
    files[prefix + "index.html"] = page.encode("utf-8")
    return files


def _thin(items: list, n: int) -> list:
    """Keep at most ``n`` items evenly spread, always the first and the last."""
    items = sorted(items, key=lambda t: t[0])
    if len(items) <= n:
        return items
    idx = sorted({round(i * (len(items) - 1) / (n - 1)) for i in range(n)})
    return [items[i] for i in idx]
