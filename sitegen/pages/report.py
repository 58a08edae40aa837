"""``sitegen report``, written out: one self-contained Markdown or HTML summary of a run or a
model (:mod:`sitegen.prepare.report` gathers it) to attach to a pull request or a release."""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import urljoin

from markupsafe import escape

from sitegen.pages.changes import md_escape
from sitegen.pages.compare import group_slug
from sitegen.pages.environment import fmt_time, fmt_value, markdown


def _link(base: str, rel: str) -> str:
    return urljoin(base, rel) if base else rel


def _delta(value: Any, ref: Any) -> str:
    if not isinstance(value, float) or not isinstance(ref, float):
        return ""
    return f"{value - ref:+.4g}" + (f" ({(value - ref) / abs(ref):+.2%})" if ref else "")


def report_markdown(rep: dict, t: Callable[..., str], *, title: str, base_url: str = "") -> str:
    """The report as Markdown; links under ``base_url`` (else relative to the site's root)."""
    out: list[str] = []
    if rep["kind"] == "run":
        s = rep["run"]
        out += [f"# {t('report.run_title', run=md_escape(s.name))}", ""]
        out += [f"- {t('report.site')}: {md_escape(title)}", f"- {t('report.model')}: {md_escape(s.group or '-')}",
                f"- {t('col.start')}: {fmt_time(s.start_time)}", f"- {t('col.last_step')}: {s.last_step if s.last_step is not None else ''}",
                f"- {t('report.status')}: {md_escape(s.status or '-')}",
                f"- {t('report.commit')}: " + (f"`{s.commit}`" + "".join(f" {md_escape(x)}" for x in (s.commit_tag, s.commit_branch) if x)
                                                 if s.commit else "-"),
                f"- {t('report.links')}: [{t('report.run_page')}]({_link(base_url, f'runs/{s.slug}/index.html')})"
                + (f" · [{t('report.environment')}]({_link(base_url, f'runs/{s.slug}/index.html#environment')})"
                   f" · [{t('report.compare')}]({_link(base_url, f'compare/{group_slug(tuple(s.group.split(chr(47))))}/index.html')})"
                   f" · [{t('trends.link')}]({_link(base_url, f'trends/{group_slug(tuple(s.group.split(chr(47))))}/index.html')})"
                   if s.group else ""), ""]  # fmt: skip
        out += [f"## {t('report.metrics')}", "", f"| {t('report.metric')} | {t('report.last')} | {t('report.best_in_run')} | "
                f"{t('report.best_so_far', n=rep['earlier'])} | Δ | {t('report.median')} | Δ |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in rep["metrics"]:
            out.append(f"| {md_escape(r['metric'])} | {fmt_value(r['value'])} | {fmt_value(r['best_in_run'])} | {fmt_value(r['best_so_far'])} | "
                       f"{_delta(r['value'], r['best_so_far'])} | {fmt_value(r['median'])} | {_delta(r['value'], r['median'])} |")  # fmt: skip
        out.append("")
    else:
        g = rep["group"]
        out += [f"# {t('report.group_title', group=md_escape(g))}", "", f"- {t('report.site')}: {md_escape(title)}",
                f"- {t('report.runs', n=len(rep['runs']))}", f"- {t('report.links')}: [{t('report.compare')}]"
                f"({_link(base_url, f'compare/{group_slug(tuple(g.split(chr(47))))}/index.html')}) · "
                f"[{t('trends.link')}]({_link(base_url, f'trends/{group_slug(tuple(g.split(chr(47))))}/index.html')})", ""]  # fmt: skip
        out += [f"## {t('report.metrics')}", "", f"| {t('report.metric')} | {t('report.best_run')} | {t('report.latest_run')} | "
                f"{t('report.baseline')} | {t('report.change_points')} |", "|---|---|---|---|---|"]  # fmt: skip
        for r in rep["metrics"]:
            m, b, last = r["metric"], r["best"], r["latest"]
            band = f"{fmt_value(r['band'][1])} – {fmt_value(r['band'][2])}" if r["band"] else ""
            changes = ", ".join(md_escape(c.name) for c in r["changes"]) or "-"
            out.append(f"| {md_escape(m)} | {fmt_value(b.metrics[m])} ({md_escape(b.name)}) | {fmt_value(last.metrics[m])} ({md_escape(last.name)}) | "
                       f"{band} | {changes} |")  # fmt: skip
        out.append("")
    if rep["gates"]:
        out += [
            f"## {t('gates.title')}",
            "",
            f"| {t('gates.rule')} | {t('col.run')} | {t('gates.value')} | {t('gates.result')} |",
            "|---|---|---|---|",
        ]
        for r in rep["gates"]:
            out.append(f"| {md_escape(r['rule'])} | {md_escape(r['run'])} | {fmt_value(r.get('value'))} | {t('gates.' + r['status'])} |")
        out.append("")
    return "\n".join(out)


def report_html(md: str, *, title: str, language: str) -> str:
    """The Markdown as one self-contained HTML file (no script, no other file)."""
    body = markdown().render(md)
    style = "body{font:14px/1.5 system-ui,sans-serif;max-width:960px;margin:24px auto;padding:0 16px}table{border-collapse:collapse}td,th{border:1px solid #ccd;padding:3px 8px}"
    return (f'<!DOCTYPE html>\n<html lang="{escape(language)}">\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
            f"<style>{style}</style>\n</head>\n<body>\n{body}</body>\n</html>\n")  # fmt: skip
