"""What's new, drawn: ``changes.json`` (the document every other form is made from),
``changes.md``, the Atom feed ``feed.xml`` (RFC 4287) and the index's "What's new" panel.

Every time in them comes from the logs (a run's last record) or ``SOURCE_DATE_EPOCH``, so the
same history gives the same bytes. The schema: ``docs/changes.md``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Callable, Iterator
from urllib.parse import urljoin

from sitegen.pages.environment import fmt_value, js_data

PANEL_ITEMS = 10  # items of each kind the index panel lists
KINDS = ("added", "grown", "finished", "removed", "best")  # as in sitegen.prepare.changes
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+|!~])")


def empty(doc: dict) -> bool:
    return not any(doc["changes"][k] for k in KINDS)


def pieces(doc: dict, default: Callable[[Any], Any] | None = None) -> Iterator[bytes]:
    """``changes.json``'s bytes: compact, one line (json's indenting encoder is pure Python and
    cost a tenth of a rebuild of 2,000 runs; ``changes.md`` is the file for people), in pieces
    for a writer that never holds it whole (every run's state: tens of megabytes at 100,000
    runs). Objects are written member by member and long lists :data:`LIST_PIECE` items at a
    time, each by json's C encoder: the bytes of one ``json.dumps``. ``default``: the JSON form
    of an object json does not know (the runs' states)."""
    for text in _piece_texts(doc, default):
        yield text.encode("utf-8")
    yield b"\n"


LIST_PIECE = 1000


def _dumps(value: Any, default: Callable[[Any], Any] | None) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False, separators=(",", ":"), default=default)


def _piece_texts(value: Any, default: Callable[[Any], Any] | None) -> Iterator[str]:
    if isinstance(value, dict) and all(type(k) is str for k in value):
        yield "{"
        for i, key in enumerate(sorted(value)):
            yield ("," if i else "") + _dumps(key, None) + ":"
            yield from _piece_texts(value[key], default)
        yield "}"
    elif isinstance(value, list) and len(value) > LIST_PIECE:
        for i in range(0, len(value), LIST_PIECE):
            text = _dumps(value[i : i + LIST_PIECE], default)
            yield ("[" if i == 0 else ",") + text[1:-1]
        yield "]"
    else:
        yield _dumps(value, default)


def run_link(slug: str) -> str:
    return f"runs/{slug}/index.html"


def group_link(slug: str) -> str:
    return f"compare/{slug}/index.html"


def _x(text: Any) -> str:
    """Text for XML: escaped, characters XML 1.0 forbids dropped (a log string may hold any)."""
    s = _XML_BAD.sub("", str(text))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def feed(doc: dict, *, title: str, base_url: str = "") -> bytes:
    """``feed.xml``: an Atom 1.0 feed of the document's entries; links relative to the feed (the
    site's root) unless ``base_url`` is configured."""

    def href(rel: str) -> str:
        return urljoin(base_url, rel) if base_url else rel

    entries = doc["feed"]
    updated = max((e["updated"] for e in entries), default=doc["updated"])
    feed_id = "tag:sitegen,2024:feed/" + hashlib.sha256((base_url or title).encode("utf-8", "surrogatepass")).hexdigest()[:32]
    lines = [
        '<?xml version="1.0" encoding="utf-8"?>',
        '<feed xmlns="http://www.w3.org/2005/Atom">',
        f"<title>{_x(title)}</title>",
        f"<id>{feed_id}</id>",
        f"<updated>{updated}</updated>",
        f'<link rel="self" type="application/atom+xml" href="{_x(href("feed.xml"))}"/>',
        f'<link rel="alternate" type="text/html" href="{_x(href("index.html"))}"/>',
        "<author><name>sitegen</name></author>",
        "<generator>sitegen</generator>",
    ]
    for e in entries:
        lines += [
            "<entry>",
            f"<id>{_x(e['id'])}</id>",
            f"<title>{_x(e['title'])}</title>",
            f"<updated>{_x(e['updated'])}</updated>",
            f'<link rel="alternate" type="text/html" href="{_x(href(e["link"]))}"/>',
            f'<category term="{_x(e["kind"])}"/>',
            f"<summary>{_x(e['summary'])}</summary>",
            "</entry>",
        ]
    lines.append("</feed>")
    return ("\n".join(lines) + "\n").encode("utf-8")


def md_escape(text: Any) -> str:
    """A log string as literal Markdown text (no link, emphasis or HTML can form)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text).replace("\n", " ").replace("\r", " "))


def markdown(doc: dict, t: Callable[..., str], *, base_url: str = "") -> str:
    """``changes.md`` (and the GitHub step summary): the changes and the gates, in the site's language."""

    def link(name: str, rel: str) -> str:
        return f"[{md_escape(name)}]({urljoin(base_url, rel) if base_url else rel})"

    def was(c: dict) -> str:
        return "" if c["previous_run"] is None else f"; {t('changes.was', value=fmt_value(c['previous_value']))}"

    ch = doc["changes"]
    out = [f"# {t('changes.title')}", ""]
    if empty(doc):
        out += [t("changes.none"), ""]
    sections: list[tuple[str, list[str]]] = [
        ("added", [link(c["name"], run_link(c["slug"])) + f" — {t('changes.step', step=c['last_step'])}" for c in ch["added"]]),
        ("grown", [link(c["name"], run_link(c["slug"])) + f" — {c['previous_last_step']} → {c['last_step']}" for c in ch["grown"]]),
        ("finished", [link(c["name"], run_link(c["slug"])) + f" — {md_escape(c['status'])}" for c in ch["finished"]]),
        ("removed", [md_escape(c["name"]) for c in ch["removed"]]),
        ("best", [f"{link(c['group'], group_link(c['group_slug']))} `{md_escape(c['metric'])}` = {fmt_value(c['value'])} "
                  f"({md_escape(c['run'])}{was(c)})" for c in ch["best"]]),
    ]  # fmt: skip
    for kind, items in sections:
        if items:
            out += [f"## {t('changes.' + kind)} ({len(items)})", "", *(f"- {i}" for i in items), ""]
    gates = doc.get("gates")
    if gates and gates.get("results"):
        out += [f"## {t('gates.title')}", "", f"| {t('gates.rule')} | {t('col.run')} | {t('gates.value')} | {t('gates.result')} |",
                "|---|---|---|---|"]  # fmt: skip
        for r in gates["results"]:
            out.append(f"| {md_escape(r['rule'])} | {md_escape(r['run'])} | {fmt_value(r.get('value'))} | {t('gates.' + r['status'])} |")
        out.append("")
    return "\n".join(out)


def panel(doc: dict | None) -> dict | None:
    """What the index's "What's new" panel shows: each kind's first items and how many more."""
    if doc is None:
        return None
    ch = doc["changes"]
    gates = doc.get("gates") or {}
    return {
        "empty": empty(doc),
        "kinds": [(k, ch[k][:PANEL_ITEMS], max(0, len(ch[k]) - PANEL_ITEMS)) for k in KINDS if ch[k]],
        "failed": failures(doc)[:PANEL_ITEMS],
        "gates": gates.get("counts"),
    }


def gates_script(doc: dict) -> bytes:
    """``gates.js``: each evaluated run's gate results (rule, status, detail) for its page."""
    by_run: dict[str, list] = {}
    for r in (doc.get("gates") or {}).get("results", []):
        by_run.setdefault(r["slug"], []).append([r["rule"], r["status"], r["detail"]])
    return js_data("SITEGEN_GATES", dict(sorted(by_run.items())))


def failures(doc: dict) -> list[dict]:
    """The gate results that fail the gate (a missing metric too, unless ``missing = "skip"``)."""
    gates = doc.get("gates") or {}
    bad = ("fail", "missing") if gates.get("missing") == "fail" else ("fail",)
    return [r for r in gates.get("results", []) if r["status"] in bad]


def notice(doc: dict, t: Callable[..., str], *, title: str, base_url: str = "") -> tuple[str, list[tuple[str, str]], str]:
    """A chat message of the changes: its title, its lines (text, absolute link or ""), and the
    site's link. Links need ``base_url`` (a chat is not inside the site); without it there are none."""

    def url(rel: str) -> str:
        return urljoin(base_url, rel) if base_url else ""

    ch, counts = doc["changes"], doc["counts"]
    head = t(
        "notify.title", title=title, added=counts["added"], grown=counts["grown"], finished=counts["finished"], removed=counts["removed"]
    )
    bad = failures(doc)
    if bad:
        head += " · " + t("notify.gates_failed", n=len(bad))
    items = [(t("notify.gate", run=r["run"], rule=r["rule"], detail=r["detail"]), url(run_link(r["slug"]))) for r in bad]
    for kind in ("added", "grown", "finished"):
        items += [(t("notify." + kind, run=c["name"], step=c["last_step"]), url(run_link(c["slug"]))) for c in ch[kind]]
    items += [(t("notify.best", group=c["group"], metric=c["metric"], value=fmt_value(c["value"]), run=c["run"]), url(group_link(c["group_slug"])))
              for c in ch["best"] if c["level"] == "model"]  # fmt: skip
    models = sorted({(c["group"], c["group_slug"]) for k in ("added", "grown", "finished") for c in ch[k] if c["group"]})
    items += [(t("notify.compare", group=g), url(group_link(s))) for g, s in models]
    items += [(t("notify.removed", run=c["name"]), "") for c in ch["removed"]]
    return head, items, url("index.html")
