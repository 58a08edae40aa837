"""A tolerant reader of the YAML that loggers write (``hparams.yaml``, ``params.yaml``, ``dvc.lock``).

Why our own: PyYAML is no runtime dependency, and a log's YAML must never construct objects.
It reads block maps and sequences (indentless ones too), plain, quoted and ``|``/``>`` block
scalars; flow collections (``[a, b]``, ``{a: 1}``) stay text. Tags are only read as text:
``!!python/tuple`` and other collection tags keep their content, ``!!python/name:x`` gives
``"x"``, ``!!python/object...:cls`` gives ``"cls"`` (its state is skipped). Anchors are dropped,
aliases stay as ``*name``. The first line it cannot read ends the document: what came before is
kept and :func:`load` says where it stopped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sitegen.errors import Problem
from sitegen.ingest.files import read_or_note
from sitegen.model import RunData, SourceFile

_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*)")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?")
_SPECIAL = {
    "~": None, "null": None, "Null": None, "NULL": None,
    "true": True, "True": True, "TRUE": True, "yes": True, "Yes": True, "on": True, "On": True,
    "false": False, "False": False, "FALSE": False, "no": False, "No": False, "off": False, "Off": False,
    ".inf": math.inf, "+.inf": math.inf, ".Inf": math.inf, ".INF": math.inf,
    "-.inf": -math.inf, "-.Inf": -math.inf, "-.INF": -math.inf,
    ".nan": math.nan, ".NaN": math.nan, ".NAN": math.nan,
}  # fmt: skip
_ESCAPES = {
    "n": "\n", "t": "\t", "\t": "\t", "r": "\r", "0": "\0", "a": "\a", "b": "\b", "f": "\f", "v": "\v", '"': '"', "\\": "\\",
    "/": "/", " ": " ", "e": "\x1b", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip


class _Stop(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class _Line:
    number: int  # 1-based line in the text
    indent: int
    text: str  # without the indentation


def _plain(text: str) -> Any:
    if text in _SPECIAL:
        return _SPECIAL[text]
    if _INT.fullmatch(text):
        return int(text.replace("_", ""))
    if _FLOAT.fullmatch(text) and any(c.isdigit() for c in text):
        return float(text.replace("_", ""))
    return text


def _uncomment(text: str) -> str:
    cut = text.find(" #")
    return (text[:cut] if cut >= 0 else text).rstrip(" \t")


def _quoted(text: str, number: int) -> tuple[str, str]:
    """(the value of the quoted scalar at the start of ``text``, the text after it)."""
    q = text[0]
    out: list[str] = []
    i = 1
    while i < len(text):
        c = text[i]
        if q == "'" and c == "'":
            if text[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), text[i + 1 :]
        if q == '"' and c == '"':
            return "".join(out), text[i + 1 :]
        if q == '"' and c == "\\" and i + 1 < len(text):
            e = text[i + 1]
            if e in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[e]
                try:
                    out.append(chr(int(text[i + 2 : i + 2 + width], 16)))
                except ValueError as exc:
                    raise _Stop(number, "bad escape in a quoted string") from exc
                i += 2 + width
                continue
            out.append(_ESCAPES.get(e, e))
            i += 2
            continue
        out.append(c)
        i += 1
    raise _Stop(number, "quoted string not closed")


def _split_key(text: str, number: int) -> tuple[str, str] | None:
    """``(key, rest)`` when ``text`` is a ``key: value`` line, else None."""
    if text[0] in "\"'":
        try:
            key, rest = _quoted(text, number)
        except _Stop:
            return None
        rest = rest.lstrip(" \t")
        if rest == ":" or rest.startswith((": ", ":\t")):
            return key, rest[1:].strip(" \t")
        return None
    if text[0] in "[{!&*|>%@`#" or text.startswith(("- ", "? ")) or text == "-":
        return None
    m = re.search(r":([ \t]|$)", text)
    if not m or " #" in text[: m.start()]:
        return None
    return text[: m.start()].rstrip(" \t"), text[m.end() :].strip(" \t")


class _Parser:
    def __init__(self, text: str) -> None:
        self.lines: list[_Line] = []
        self.raw = [line.rstrip("\r") for line in text.split("\n")]
        for n, raw in enumerate(self.raw, 1):
            body = raw.lstrip(" ")
            if not body.strip(" \t") or body.startswith("#") or body.rstrip(" \t") in ("---", "...") or body.startswith("%"):
                self.lines.append(_Line(n, -1, raw))  # blank: kept for block scalars
                continue
            if body.startswith("\t"):
                raise _Stop(n, "tab in indentation")
            self.lines.append(_Line(n, len(raw) - len(body), body.rstrip(" \t")))
        self.i = 0

    def _skip(self) -> None:
        while self.i < len(self.lines) and self.lines[self.i].indent < 0:
            self.i += 1

    def _peek(self) -> _Line | None:
        self._skip()
        return self.lines[self.i] if self.i < len(self.lines) else None

    def node(self, indent: int) -> Any:
        line = self._peek()
        if line is None or line.indent < indent:
            return None
        if line.text == "-" or line.text.startswith("- "):
            return self.sequence(line.indent)
        if _split_key(line.text, line.number) is not None:
            return self.mapping(line.indent)
        self.i += 1
        return self.scalar(line.text, line.indent - 1, line.number)

    def mapping(self, indent: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while (line := self._peek()) is not None and line.indent == indent:
            kv = _split_key(line.text, line.number)
            if kv is None:
                raise _Stop(line.number, "expected 'key: value'")
            key, rest = kv
            self.i += 1
            out[key] = self.value(rest, indent, line.number, seq_ok=True)
        if line is not None and line.indent > indent:
            raise _Stop(line.number, "unexpected indentation")
        return out

    def sequence(self, indent: int) -> list[Any]:
        out: list[Any] = []
        while (line := self._peek()) is not None and line.indent == indent and (line.text == "-" or line.text.startswith("- ")):
            rest = line.text[1:].lstrip(" ")
            if rest and (rest[0] == "-" and (rest == "-" or rest.startswith("- ")) or _split_key(rest, line.number)):
                # "- key: v" or "- - x": the item is a block starting inside this line
                line.indent += len(line.text) - len(rest)
                line.text = rest
                out.append(self.node(line.indent))
                continue
            self.i += 1
            out.append(self.value(rest, indent, line.number, seq_ok=False))
        if line is not None and line.indent > indent:
            raise _Stop(line.number, "unexpected indentation")
        return out

    def value(self, rest: str, indent: int, number: int, seq_ok: bool) -> Any:
        """The value after ``key:`` or ``-`` (``rest``), with what follows it more indented."""
        tag = ""
        while rest.startswith(("!", "&")):
            word, _, rest = rest.partition(" ")
            rest = rest.lstrip(" \t")
            if word.startswith("!"):
                tag = word
        rest = rest if rest[:1] in "\"'" else _uncomment(rest)
        if rest.startswith("#"):
            rest = ""
        if rest == "":
            nxt = self._peek()
            if nxt is not None and (
                nxt.indent > indent or seq_ok and nxt.indent == indent and (nxt.text == "-" or nxt.text.startswith("- "))
            ):
                return _tagged(tag, self.node(nxt.indent))
            return _tagged(tag, None if not tag else "")
        if rest[0] in "|>":
            return _tagged(tag, self.block(rest[0], indent, number))
        return _tagged(tag, self.scalar(rest, indent, number))

    def scalar(self, text: str, indent: int, number: int) -> Any:
        """A plain or quoted scalar starting at ``text``; more-indented lines continue it."""
        quoted = text[0] in "\"'"
        parts, end, j = [text], self.i, self.i
        while j < len(self.lines):
            line = self.lines[j]
            raw = self.raw[line.number - 1].strip(" \t")
            if line.indent < 0 and (not raw or not quoted):
                if raw:
                    break  # a comment ends a plain scalar
                parts.append("")
            elif line.indent >= 0 and line.indent <= indent:
                break
            else:
                parts.append(raw)
                end = j + 1
            j += 1
        parts = parts[: 1 + sum(1 for k in range(self.i, end))]
        self.i = max(self.i, end)
        joined = _fold(parts, text[0] == '"')
        if quoted:
            value, after = _quoted(joined, number)
            if after.strip() and not after.strip().startswith("#"):
                raise _Stop(number, "text after a quoted string")
            return value
        if joined[0] in "[{":
            return _flow(_uncomment(joined))
        if joined.startswith("*"):
            return joined
        return _plain(_uncomment(joined)) if len(parts) == 1 else _uncomment(joined)

    def block(self, style: str, indent: int, number: int) -> str:
        lines: list[str] = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.indent >= 0 and line.indent <= indent:
                break
            lines.append(self.raw[line.number - 1])
            self.i += 1
        while lines and not lines[-1].strip(" \t"):
            lines.pop()
        width = min((len(s) - len(s.lstrip(" ")) for s in lines if s.strip(" \t")), default=0)
        body = [s[width:] for s in lines]
        return ("\n".join(body) if style == "|" else " ".join(s for s in body if s)) + "\n"


def _fold(parts: list[str], double: bool) -> str:
    """A scalar's lines as one text: a line break is a space, each empty line a newline, and in a
    double-quoted scalar a break after an odd number of backslashes is nothing."""
    out = parts[0]
    breaks = 0
    for part in parts[1:]:
        if not part:
            breaks += 1
            continue
        if double and (len(out) - len(out.rstrip("\\"))) % 2 == 1:
            out = out[:-1] + ("\n" * breaks) + part.lstrip(" \t")
        else:
            out = out.rstrip(" \t") + ("\n" * breaks if breaks else " ") + part
        breaks = 0
    return out


def _flow(text: str) -> Any:
    """A flat flow collection of plain scalars (``[a, 1]``, ``{a: 1}``); anything else stays text."""
    inner = text[1:-1].strip()
    closed = text[-1:] == {"[": "]", "{": "}"}[text[0]]
    if not closed or any(c in inner for c in "[]{}\"'"):
        return text
    items = [s.strip() for s in inner.split(",")] if inner else []
    if items and not items[-1]:
        items.pop()
    if text[0] == "[":
        return [_plain(s) for s in items]
    pairs = [s.partition(":") for s in items]
    if any(not sep or not k.strip() for k, sep, _ in pairs):
        return text
    return {k.strip(): _plain(v.strip()) for k, _, v in pairs}


def _tagged(tag: str, value: Any) -> Any:
    if not tag.startswith("!!python/"):
        return value
    kind, _, name = tag[len("!!python/") :].partition(":")
    if kind in ("name", "module"):
        return name
    if kind.startswith("object"):
        return name or tag
    return value  # tuple, str, unicode, bytes, list, dict, int, float, bool, none, complex


def load(text: str) -> tuple[Any, tuple[int, str] | None]:
    """``(value, None)``, or ``(what was read before the damage, (line number, message))``."""
    try:
        p = _Parser(text)
        first = p._peek()
        if first is None:
            return None, None
        value = p.node(first.indent)
        rest = p._peek()
        if rest is not None:
            raise _Stop(rest.number, "unexpected text after the document")
        return value, None
    except _Stop as stop:
        return _partial(text, stop.line), (stop.line, str(stop))
    except RecursionError:
        return None, (1, "nested too deep")


def _partial(text: str, line: int) -> Any:
    """What the lines before the damaged one hold (None when they do not read either)."""
    if line <= 1:
        return None
    value, problem = load("\n".join(text.split("\n")[: line - 1]))
    return value if problem is None else None


def line_offset(data: bytes, line: int) -> int:
    """The byte offset where 1-based ``line`` starts."""
    at = 0
    for _ in range(line - 1):
        nxt = data.find(b"\n", at)
        if nxt < 0:
            return len(data)
        at = nxt + 1
    return at


def read_file(path: Path, run: RunData, roots: tuple[str, ...]) -> Any:
    """A YAML file of a run: its value (None when unreadable), the file and any damage noted on ``run``."""
    data = read_or_note(path, roots, run.problems)
    if data is None:
        return None
    value, damage = load(data.decode("utf-8", errors="replace"))
    decoded = len(data)
    if damage is not None:
        line, message = damage
        decoded = line_offset(data, line)
        run.problems.append(Problem(str(path), decoded, "bad-record", f"line {line}: {message}; the lines before it kept"))
    run.files.append(SourceFile(path, len(data), decoded))
    return value
