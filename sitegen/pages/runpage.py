"""One run's page: charts grouped by prefix, hyperparameters, environment, provenance, notes,
key outputs (curves, images with a step slider, audio, text, histograms), artifacts and the
full-resolution scalar downloads (CSV and Parquet, written beside the page)."""

from __future__ import annotations

import hashlib
import logging
import math
import re
from typing import Any

import jinja2
import numpy as np
from markupsafe import Markup, escape

from sitegen.config import Config
from sitegen.errors import Problem, shown
from sitegen.model import HParamValue, RunDetails, SiteRun, is_config_tag
from sitegen.pages import charts, compare, downloads
from sitegen.pages.assets import Assets
from sitegen.pages.charts import json_text
from sitegen.pages.environment import (
    RESOURCE_PREFIXES,
    LazyMarkdown,
    common_context,
    fmt_value,
    js_data,
    page_context,
    render_page,
)

log = logging.getLogger(__name__)
RESOURCES = "\x00resources"  # group key of resource metrics; sorts and translates apart
SCALARS = "\x00scalars"
KEY = "\x00key"  # the key metrics' group, first on the page
# train/eval loss and accuracy (after the configured key metrics): split, then the quantity
KEY_TAG = re.compile(
    r"^(?:epoch[/_])?(?:(?P<train>train|training)|(?P<eval>eval|val|valid|validation|test|dev))?(?:[/_.])?(?:epoch[/_])?"
    r"(?:(?P<loss>loss)|acc|accuracy)$",
    re.I,
)


def key_rank(tag: str, configured: tuple[str, ...]) -> tuple[int, ...] | None:
    """Where ``tag`` goes among the run page's key metrics (None: not one): the configured
    ``[index] key_metrics`` in their order, then losses before accuracies, training before evaluation."""
    if tag in configured:
        return (0, configured.index(tag))
    m = KEY_TAG.match(tag)
    if m is None:
        return None
    return (1, 0 if m.group("loss") else 1, 1 if m.group("eval") else 0)


def value_only(tag: str, lines: list, hparam_metrics: list[str]) -> bool:
    """An ``hparam/*`` metric (or one the hparams plugin names) of one point per line: a value for
    the hyperparameter table, not a chart of one point."""
    return (tag.startswith("hparam/") or tag in hparam_metrics) and all(len(ln.series.step) <= 1 for ln in lines)


def _group(tag: str) -> str:
    if tag.startswith(RESOURCE_PREFIXES):
        return RESOURCES
    return tag.split("/", 1)[0] if "/" in tag else SCALARS


def _media(prefix: str, data: bytes, mime: str, files: dict[str, bytes]) -> str:
    ext = {
        "image/png": "png",
        "image/jpeg": "jpg",
        "image/gif": "gif",
        "image/webp": "webp",
        "audio/wav": "wav",
        "audio/ogg": "ogg",
        "audio/mpeg": "mp3",
    }.get(mime, "bin")
    name = f"media/{hashlib.sha256(data).hexdigest()[:20]}.{ext}"
    files[prefix + name] = data
    return name


def _thin(items: list, n: int) -> list:
    """Keep at most ``n`` items evenly spread, always the first and the last."""
    items = sorted(items, key=lambda t: t[0])
    if len(items) <= n:
        return items
    if n <= 1:
        return items[-1:]
    idx = sorted({round(i * (len(items) - 1) / (n - 1)) for i in range(n)})
    return [items[i] for i in idx]


def _stats_rows(lines: list, t) -> Markup:
    """One chart's statistics rows, a line each; written here rather than in the template
    (Jinja spent a millisecond a run on them)."""
    value = escape(t("stats.value"))
    out = []
    for ln in lines:
        s = ln.series.stats
        drawn = f' <span class="muted">({escape(t("stats.drawn", n=len(ln.series.step)))})</span>' if ln.series.thinned else ""
        at_min = "" if s.min_step is None else f' <span class="muted">@{s.min_step}</span>'
        at_max = "" if s.max_step is None else f' <span class="muted">@{s.max_step}</span>'
        warn = ' class="warn"' if s.nan or s.posinf or s.neginf else ""
        out.append(
            f"<tr><th>{escape(ln.label) if ln.label else value}</th><td>{s.count}{drawn}</td>\n"
            f'<td>{escape(fmt_value(s.last_value))} <span class="muted">@{s.last_step}</span></td>\n'
            f"<td>{escape(fmt_value(s.min_value))}{at_min}</td>\n"
            f"<td>{escape(fmt_value(s.max_value))}{at_max}</td>\n"
            f"<td{warn}>{s.nan} / {s.posinf + s.neginf}</td></tr>\n"
        )
    return Markup("".join(out))


def run_page(
    env: jinja2.Environment,
    md: LazyMarkdown,
    run: SiteRun,
    details: RunDetails,
    hparams: dict[str, HParamValue],
    assets: Assets,
    common: dict,
    problems: list[Problem],
    config: Config,
    group_href: dict[str, str],
) -> dict[str, bytes]:
    """One run's page and its files (``details``: :func:`sitegen.prepare.envinfo.details`)."""
    prefix = f"runs/{run.slug}/"
    files: dict[str, bytes] = {}
    chart_data: list[dict[str, Any]] = []
    data = [run.data, *run.sub_runs]
    groups = _scalar_charts(run, env.globals["t"], chart_data, config.index.key_metrics)
    hist_charts = _histogram_charts(data, chart_data)
    curve_charts = _curve_charts(data, chart_data)
    image_list, extra = _images(run, data, config.limits.max_images_per_tag, prefix, files)
    audio: dict[str, list] = {}
    texts: dict[str, list] = {}
    for d in data:
        for au in d.audio:
            audio.setdefault(au.tag, []).append({"step": au.step, "src": _media(prefix, au.data, au.mime, files), "mime": au.mime})
        for tx in d.texts:
            texts.setdefault(tx.tag, []).append({"step": tx.step, "html": md.render(tx.text)})
    chart_page = {
        "charts": chart_data,
        "w0": run.start_time if run.start_time is not None and math.isfinite(run.start_time) else 0.0,
        "images": [[{"step": im["step"], "src": im["src"], "w": im["w"], "h": im["h"]} for im in items] for _, items in image_list],
    }
    paths = {shown(str(f.path)) for d in data for f in d.files}  # (as problems name them)
    metric_values = {}
    for ln in run.lines:
        if ln.tag in run.data.hparam_metrics or ln.tag.startswith("hparam/"):
            metric_values[ln.tag] = ln.series.stats.last_value
    compares = [("/".join(run.parts[: i + 1]), group_href.get("/".join(run.parts[: i + 1]))) for i in range(len(run.parts) - 1)]
    compares = [(name, href) for name, href in compares if href] + [("", group_href.get(""))]
    notes = details.notes
    files[prefix + "index.html"] = render_page(
        env.get_template("run.html"),
        json_text(chart_page),
        **common,
        root="../../",
        assets=assets.urls,
        run=run,
        groups=groups,
        hist_charts=hist_charts,
        curve_charts=curve_charts,
        images=image_list,
        audio=sorted(audio.items()),
        texts=sorted((k, v) for k, v in texts.items()),
        metric_values=metric_values,
        problems=[p for p in problems if p.path in paths] + extra,
        files=[(shown(f.path.name), f.size) for d in data for f in d.files],
        hparams=hparams,
        config_tags=sorted({t for t in texts if is_config_tag(t)}),
        env_info=details.environment,
        notes_html=md.render(notes) if notes else None,
        artifacts=details.artifacts,
        downloads=_downloads(details, prefix, files),
        compares=compares,
        RESOURCES=RESOURCES,
        SCALARS=SCALARS,
        KEY=KEY,
    )
    return files


def _scalar_charts(
    run: SiteRun, t: Any, chart_data: list[dict[str, Any]], configured: tuple[str, ...] = ()
) -> list[tuple[str, list[dict[str, Any]]]]:
    """One chart per tag (its run's and sub-runs' lines), grouped by prefix: the key metrics
    first (:func:`key_rank`), resources last; one-point ``hparam/*`` metrics are left to the table."""
    groups: dict[str, list[dict[str, Any]]] = {}
    by_tag: dict[str, list] = {}
    for ln in run.lines:
        by_tag.setdefault(ln.tag, []).append(ln)
    ranks = {tag: key_rank(tag, configured) for tag in by_tag}
    start = run.start_time if run.start_time is not None and math.isfinite(run.start_time) else 0.0
    for tag in sorted(by_tag, key=lambda tag: (ranks[tag] is None, ranks[tag] or (), tag)):
        lines = by_tag[tag]
        if value_only(tag, lines, run.data.hparam_metrics):
            continue
        rows = charts.scalar_rows([(ln.label or tag, ln.series.step, ln.series.value) for ln in lines])
        # seconds since the run's start (the toolbar's time axes) and each line's colour key,
        # the one its run (and sub-run) has on every page (charts.js)
        rows["t"] = charts.numbers(np.concatenate([ln.series.wall_time - start for ln in lines]), exact=False)
        keys = [run.slug if ln.label in ("", "hparams") else f"{run.slug} · {ln.label}" for ln in lines]
        chart_data.append({"kind": "scalar", "rows": rows, "ks": keys})
        group = KEY if ranks[tag] is not None else _group(tag)
        groups.setdefault(group, []).append(
            {"tag": tag, "chart": len(chart_data) - 1, "rows": _stats_rows(lines, t), "alt": _alt(tag, lines, t)}
        )
    return sorted(groups.items(), key=lambda kv: (kv[0] != KEY, kv[0] == RESOURCES, kv[0] == SCALARS, kv[0]))


def _alt(tag: str, lines: list, t: Any) -> str:
    """A chart's text alternative: its title and each line's last, min and max values."""
    parts = []
    for ln in lines:
        s = ln.series.stats
        text = t("chart.alt_line", last=fmt_value(s.last_value), min=fmt_value(s.min_value), max=fmt_value(s.max_value))
        parts.append(f"{ln.label}: {text}" if ln.label else text)
    return f"{tag}. " + "; ".join(parts)


def _histogram_charts(data: list, chart_data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    hists: dict[str, list] = {}
    for d in data:
        for h in d.histograms:
            hists.setdefault(h.tag, []).append((h.step, h.left, h.right, h.count))
    out = []
    for tag in sorted(hists):
        chart_data.append({"kind": "histogram", "rows": charts.histogram_rows(_thin(hists[tag], 60))})
        out.append({"tag": tag, "chart": len(chart_data) - 1, "steps": len(hists[tag])})
    return out


def _curve_charts(data: list, chart_data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    curves: dict[str, list] = {}
    for d in data:
        for c in d.curves:
            x, y = (c.columns["recall"], c.columns["precision"]) if c.kind == "pr" else (c.columns["fpr"], c.columns["tpr"])
            curves.setdefault(f"{c.kind}:{c.tag}", []).append((c.step, x, y))
    out = []
    for key in sorted(curves):
        chart_data.append({"kind": "curve", "rows": charts.curve_rows(_thin(curves[key], 10))})
        kind, tag = key.split(":", 1)
        out.append({"tag": tag, "kind": kind, "chart": len(chart_data) - 1})
    return out


def _images(run: SiteRun, data: list, limit: int, prefix: str, files: dict[str, bytes]) -> tuple[list, list[Problem]]:
    """Each tag's images by step (at most ``limit``, evenly spread, first and last kept: the
    page says so in a problem line), their files added to ``files``."""
    images: dict[str, list] = {}
    by_tag: dict[str, list] = {}
    for d in data:
        for im in d.images:
            by_tag.setdefault(im.tag, []).append((im.step, im, d))
    extra: list[Problem] = []
    for tag, items in by_tag.items():
        if len(items) > limit:
            where = items[0][2].files[0].path if items[0][2].files else run.name
            extra.append(
                Problem(str(where), None, "too-many", f"tag {tag!r}: {len(items)} images, {limit} shown (limits.max_images_per_tag)")
            )
            items = _thin(items, limit)
        for _, im, _ in items:
            images.setdefault(tag, []).append(
                {"step": im.step, "src": _media(prefix, im.data, im.mime, files), "w": im.width, "h": im.height}
            )
    image_list = sorted(images.items())
    for _, entries in image_list:
        entries.sort(key=lambda im: im["step"])
    return image_list, extra


def _downloads(details: RunDetails, prefix: str, files: dict[str, bytes]) -> list[tuple[str, int]]:
    """Every scalar record of the run and its sub-runs, no thinning: a Parquet file, and the
    columns the page script writes the CSV from on demand (``scalars.js``)."""
    table = details.scalars
    if not table.num_rows:
        return []
    files[prefix + "scalars.js"] = js_data("SITEGEN_SCALARS", downloads.csv_columns(table))
    # named after the run: over file:// a browser ignores the link's download name
    name = prefix.rstrip("/").rsplit("/", 1)[-1] + ".parquet"
    files[prefix + name] = blob = downloads.to_parquet(table)
    return [("scalars.csv", table.num_rows), (name, len(blob))]


def run_files(
    run: SiteRun, details: RunDetails, hp: dict[str, HParamValue], config: Config, urls: dict[str, str], problems: list[Problem]
) -> dict[str, bytes]:
    """One run's page, media and downloads (a pure function: runs in workers)."""
    env, md = page_context(config.language)
    group_href = {
        "/".join(run.parts[:i]): f"compare/{compare.group_slug(tuple(run.parts[:i]))}/index.html" for i in range(0, len(run.parts))
    }
    return run_page(env, md, run, details, hp, Assets({}, urls), common_context(config), problems, config, group_href)
