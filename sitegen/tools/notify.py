"""``sitegen notify``: post a build's change summary to a team chat webhook (Slack, Feishu/Lark,
DingTalk, WeCom, or any endpoint taking JSON), with the standard library's HTTP client only.

The caller hands a :class:`Message` (this module reads no site). Each kind has its payload
shape and size limit; DingTalk's and Feishu's optional signatures are made here. A 5xx answer or
a timeout is retried with backoff, a 4xx is not; the secret and the webhook's token never
appear in a message (:func:`redact`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Callable

from sitegen.errors import SitegenError

log = logging.getLogger(__name__)

KINDS = ("slack", "feishu", "dingtalk", "wecom", "generic")
#: the most each kind takes of the message text: characters for Slack, UTF-8 bytes for the others
#: (Slack cuts text past 40,000 characters; Feishu takes a body of 20 KB, DingTalk 20,000 bytes of
#: markdown, WeCom 4,096 bytes of markdown; a generic endpoint gets at most 64 KB)
LIMITS = {"slack": 40_000, "feishu": 18_000, "dingtalk": 20_000, "wecom": 4_096, "generic": 65_536}


class NotifyError(SitegenError):
    """The message was not delivered (one line, with the webhook redacted)."""


@dataclass
class Message:
    """What to say: a title, lines of text each with an optional link, and the page to open."""

    title: str
    items: list[tuple[str, str]] = field(default_factory=list)  # (text, absolute URL or "")
    link: str = ""  # the site's index or comparison page
    data: dict = field(default_factory=dict)  # for the generic kind: the counts and gate results


def redact(url: str) -> str:
    """The webhook without its secrets: scheme, host and first path part kept, the rest of the
    path and every query value masked (tokens live there)."""
    try:
        u = urllib.parse.urlsplit(url)
    except ValueError:
        return "<webhook>"
    parts = [p for p in u.path.split("/") if p]
    path = "/" + parts[0] + ("/***" if len(parts) > 1 else "") if parts else ""
    query = "&".join(f"{k}=***" for k, _ in urllib.parse.parse_qsl(u.query, keep_blank_values=True))
    host = u.hostname or ""
    return f"{u.scheme}://{host}{':' + str(u.port) if u.port else ''}{path}{'?' + query if query else ''}"


def _fit(lines: list[str], limit: int, *, chars: bool = False, more: str = "… {n} more") -> str:
    """The lines joined, cut at a line to fit ``limit`` (characters or UTF-8 bytes), saying how
    many were left out."""

    def size(s: str) -> int:
        return len(s) if chars else len(s.encode("utf-8"))

    text = "\n".join(lines)
    if size(text) <= limit:
        return text
    for keep in range(len(lines) - 1, -1, -1):
        tail = more.format(n=len(lines) - keep)
        text = "\n".join([*lines[:keep], tail])
        if size(text) <= limit:
            return text
    cut = lines[0]
    while size(cut) > limit and cut:
        cut = cut[:-1]
    return cut


def _sign_dingtalk(secret: str, now_ms: int) -> tuple[str, str]:
    """DingTalk: HMAC-SHA256 of ``timestamp\\nsecret`` keyed by the secret, base64."""
    digest = hmac.new(secret.encode(), f"{now_ms}\n{secret}".encode(), hashlib.sha256).digest()
    return str(now_ms), base64.b64encode(digest).decode()


def _sign_feishu(secret: str, now_s: int) -> tuple[str, str]:
    """Feishu/Lark: HMAC-SHA256 of nothing keyed by ``timestamp\\nsecret``, base64."""
    digest = hmac.new(f"{now_s}\n{secret}".encode(), b"", hashlib.sha256).digest()
    return str(now_s), base64.b64encode(digest).decode()


def payload(kind: str, msg: Message, *, secret: str = "", now: float | None = None) -> tuple[bytes, str]:
    """The JSON body for ``kind`` and the query to add to the URL (DingTalk's signature)."""
    now = time.time() if now is None else now
    limit = LIMITS[kind]
    query = ""
    if kind == "slack":
        esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")  # noqa: E731
        lines = [f"*{esc(msg.title)}*"] + [f"• <{u}|{esc(t)}>" if u else f"• {esc(t)}" for t, u in msg.items]
        if msg.link:
            lines.append(f"<{msg.link}|{esc('Open the site')}>")
        body: dict = {"text": _fit(lines, limit, chars=True)}
    elif kind == "feishu":
        lines = [msg.title] + [f"- {t} {u}".rstrip() for t, u in msg.items] + ([msg.link] if msg.link else [])
        body = {"msg_type": "text", "content": {"text": _fit(lines, limit)}}
        if secret:
            body["timestamp"], body["sign"] = _sign_feishu(secret, int(now))
    elif kind in ("dingtalk", "wecom"):
        lines = [f"### {_md(msg.title)}"] + [f"- [{_md(t)}]({u})" if u else f"- {_md(t)}" for t, u in msg.items]
        if msg.link:
            lines.append(f"[{_md('Open the site')}]({msg.link})")
        text = _fit(lines, limit)
        if kind == "dingtalk":
            body = {"msgtype": "markdown", "markdown": {"title": msg.title[:64], "text": text}}
            if secret:
                ts, sign = _sign_dingtalk(secret, int(now * 1000))
                query = urllib.parse.urlencode({"timestamp": ts, "sign": sign})
        else:
            body = {"msgtype": "markdown", "markdown": {"content": text}}
    elif kind == "generic":
        body = {"title": msg.title, "text": _fit([t for t, _ in msg.items], limit), "link": msg.link,
                "items": [{"text": t, "url": u} for t, u in msg.items], **msg.data}  # fmt: skip
    else:
        raise NotifyError(f"unknown webhook kind {kind!r}: expected one of {', '.join(KINDS)}")
    return json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8"), query


def _md(text: str) -> str:
    """Text for DingTalk/WeCom markdown: no link or emphasis can form from a run's name."""
    return "".join("\\" + c if c in "\\`*_[]()<>#|" else c for c in text.replace("\n", " "))


def _refused(body: bytes, kind: str) -> str | None:
    """The error a 200 answer may carry (DingTalk, WeCom: ``errcode``; Feishu: ``code``)."""
    if kind not in ("feishu", "dingtalk", "wecom"):
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    code = doc.get("errcode", doc.get("code", doc.get("StatusCode", 0)))
    return None if code in (0, None) else f"{code} {doc.get('errmsg') or doc.get('msg') or doc.get('StatusMessage') or ''}".strip()


def send(
    url: str,
    msg: Message,
    *,
    kind: str = "generic",
    secret: str = "",
    timeout: float = 10.0,
    retries: int = 3,
    backoff: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    now: float | None = None,
) -> int:
    """Post ``msg``; the number of attempts it took. Raises :class:`NotifyError` when it was
    not delivered: at once on a 4xx or a refusal in the answer, after ``retries`` more tries
    (waiting ``backoff``, then twice as long each time) on a 5xx, a timeout or no connection."""
    if not url.startswith(("http://", "https://")):
        raise NotifyError(f"webhook must be an http(s) URL, got {redact(url)}")
    body, query = payload(kind, msg, secret=secret, now=now)
    target = url + (("&" if "?" in url else "?") + query if query else "")
    where = redact(url)
    problem = ""
    for attempt in range(1, retries + 2):
        req = urllib.request.Request(target, data=body, method="POST", headers={"Content-Type": "application/json; charset=utf-8"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                answer = resp.read(65536)
            refused = _refused(answer, kind)
            if refused:
                raise NotifyError(f"{where}: the {kind} webhook refused the message: {refused[:200]}")
            log.info("notified %s (%s) in %d attempt(s)", where, kind, attempt)
            return attempt
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                raise NotifyError(f"{where}: HTTP {exc.code} {exc.reason} (not retried)") from None
            problem = f"HTTP {exc.code} {exc.reason}"
        except (TimeoutError, socket.timeout):
            problem = f"no answer within {timeout:g} s"
        except urllib.error.URLError as exc:
            reason = exc.reason
            problem = (
                f"no answer within {timeout:g} s"
                if isinstance(reason, (TimeoutError, socket.timeout))
                else f"cannot connect: {getattr(reason, 'strerror', None) or reason}"
            )
        except OSError as exc:
            problem = f"cannot connect: {exc.strerror or exc}"
        if attempt <= retries:
            log.warning("%s: %s; trying again (%d of %d)", where, problem, attempt, retries)
            sleep(backoff * 2 ** (attempt - 1))
    raise NotifyError(f"{where}: not delivered after {retries + 1} attempts: {problem}")
