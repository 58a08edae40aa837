"""The subset of YAML that MLflow's ``meta.yaml`` files use (``yaml.safe_dump`` of a flat map of
scalars): plain, single- and double-quoted and block scalars, folded across lines. Parsed here so
that reading a store needs neither mlflow nor PyYAML; a text it cannot read is an error with its
line, never an exception."""

from __future__ import annotations

import re

_ESCAPES = {
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "t": "\t",
    "\t": "\t",
    "n": "\n",
    "v": "\v",
    "f": "\f",
    "r": "\r",
    "e": "\x1b",
    " ": " ",
    '"': '"',
    "/": "/",
    "\\": "\\",
    "N": "\x85",
    "_": "\xa0",
    "L": "\u2028",
    "P": "\u2029",
}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_BREAKS = "\n\r\x85\u2028\u2029"
_NULLS = {"", "~", "null", "Null", "NULL"}
_LINE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")
_KEY = re.compile(r"([^\s#'\"\-?:,\[\]{}&*!|>%@`][^:]*?|-[^\s:][^:]*?):(?:[ \t]+|$)")


class YamlError(ValueError):
    pass


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset, content) of every line, without its line break."""
    out = []
    for m in _LINE.finditer(text):
        if m.start() == len(text) and not m.group(0):
            break
        out.append((m.start(), m.group(1)))
    return out


def _fold(raw: str, quote: str) -> str:
    """Value of a flow scalar's inner text (``quote`` is ``'``, ``"`` or ``""`` for plain)."""
    out: list[str] = []
    floor = 0  # out[:floor] is never trimmed (escaped characters, folded breaks)
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c in _BREAKS:
            # YAML 1.1 (PyYAML) line breaks: \n \r \x85 fold to a space (or, after empty
            # lines, to one "\n" each); \u2028 and \u2029 are kept as themselves
            while len(out) > floor and out[-1] in " \t":
                out.pop()
            first = "\n" if c in "\n\r\x85" else c
            breaks: list[str] = []
            i += 1
            while True:  # skip the next lines' indentation; collect empty lines' breaks
                while i < n and raw[i] in " \t":
                    i += 1
                if i < n and raw[i] in _BREAKS:
                    breaks.append("\n" if raw[i] in "\n\r\x85" else raw[i])
                    i += 1
                    continue
                break
            if first != "\n":
                out.append(first)
            elif not breaks:
                out.append(" ")
            out.extend(breaks)
            floor = len(out)
            continue
        if quote == "'" and c == "'" and i + 1 < n and raw[i + 1] == "'":
            out.append("'")
            floor = len(out)
            i += 2
            continue
        if quote == '"' and c == "\\":
            if i + 1 >= n:
                raise YamlError("backslash at the end of a double-quoted value")
            e = raw[i + 1]
            if e in _BREAKS:  # escaped line break: no space, next line's indentation dropped
                i += 2
                while i < n and raw[i] in " \t":
                    i += 1
                floor = len(out)
                continue
            if e in _HEX_ESCAPES:
                width = _HEX_ESCAPES[e]
                digits = raw[i + 2 : i + 2 + width]
                if len(digits) != width or not all(ch in "0123456789abcdefABCDEF" for ch in digits):
                    raise YamlError(f"bad \\{e} escape")
                out.append(chr(int(digits, 16)))
                i += 2 + width
            elif e in _ESCAPES:
                out.append(_ESCAPES[e])
                i += 2
            else:
                raise YamlError(f"unknown escape \\{e}")
            floor = len(out)
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _close_quote(s: str, quote: str) -> int:
    """Index of the closing quote in ``s`` (which starts after the opening one), or -1."""
    i = 0
    while i < len(s):
        c = s[i]
        if quote == '"' and c == "\\":
            i += 2
            continue
        if c == quote:
            if quote == "'" and i + 1 < len(s) and s[i + 1] == "'":
                i += 2
                continue
            return i
        i += 1
    return -1


def _strip_comment(s: str) -> str:
    m = re.search(r"(^|[ \t])#", s)
    return (s[: m.start()] if m else s).rstrip(" \t")


def _split_key(line: str) -> tuple[str | None, str]:
    """``(key, rest after "key: ")`` of a top-level mapping line, or ``(None, "")``."""
    if line[0] in "'\"":
        end = _close_quote(line[1:], line[0])
        if end < 0:
            return None, ""
        after = line[end + 2 :]
        m = re.match(r"[ \t]*:(?:[ \t]+|$)", after)
        if not m:
            return None, ""
        try:
            return _fold(line[1 : end + 1], line[0]), after[m.end() :]
        except YamlError:
            return None, ""
    m = _KEY.match(line)
    if not m:
        return None, ""
    return m.group(1).rstrip(), line[m.end() :]


def parse_meta_yaml(text: str) -> tuple[dict[str, str | None], list[tuple[int, str]]]:
    """Parse the top-level ``key: value`` mapping of an MLflow ``meta.yaml``.

    Returns ``(mapping, errors)``: scalar values as strings (``null``/``~``/empty → ``None``,
    quoted ``'null'`` stays the string), nested blocks (``tags:`` followed by indented or ``-``
    lines) as ``None``, flow collections (``[]``, ``{}``) as their raw text; ``errors`` lists
    ``(character offset, message)`` for every line that could not be understood (skipped).
    """
    lines = _lines(text)
    result: dict[str, str | None] = {}
    errors: list[tuple[int, str]] = []
    i = 0

    def continuation(j: int) -> bool:
        return j < len(lines) and (lines[j][1][:1] in (" ", "\t") or lines[j][1].strip() == "")

    while i < len(lines):
        off, line = lines[i]
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or line in ("---", "...", "{}") or line.startswith("%"):
            i += 1
            continue
        if line[0] in " \t":
            errors.append((off, "unexpected indented line"))
            i += 1
            continue
        key, rest = _split_key(line)
        if key is None:
            errors.append((off, "not a 'key: value' line"))
            i += 1
            continue
        i += 1
        try:
            if rest == "" or rest.startswith("#"):
                # null, or a nested block (indented lines, or a "- " sequence at this indent)
                while i < len(lines) and (continuation(i) or lines[i][1] == "-" or lines[i][1].startswith("- ")):
                    i += 1
                result[key] = None
            elif rest[0] in "'\"":
                quote = rest[0]
                raw = rest[1:]
                end = _close_quote(raw, quote)
                while end < 0 and i < len(lines):
                    raw += "\n" + lines[i][1]
                    i += 1
                    end = _close_quote(raw, quote)
                if end < 0:
                    raise YamlError("unterminated quoted value")
                after = raw[end + 1 :].strip()
                if after and not after.startswith("#"):
                    raise YamlError("text after a quoted value")
                result[key] = _fold(raw[:end], quote)
            elif rest[0] in "[{":
                raw = rest
                while continuation(i) and lines[i][1].strip():
                    raw += " " + lines[i][1].strip()
                    i += 1
                result[key] = raw.strip()
            elif rest[0] in "|>":
                header = _strip_comment(rest)
                body: list[str] = []
                while continuation(i):
                    body.append(lines[i][1])
                    i += 1
                result[key] = _block_scalar(header, body)
            else:
                parts = [_strip_comment(rest)]
                commented = parts[0] != rest.rstrip(" \t")
                while not commented and continuation(i):
                    j = i
                    while j < len(lines) and not lines[j][1].strip():
                        j += 1
                    if j >= len(lines) or lines[j][1][:1] not in (" ", "\t"):
                        break  # trailing blank lines belong to nobody
                    if lines[j][1].strip().startswith("#"):
                        break
                    parts.extend("" for _ in range(j - i))
                    text_j = lines[j][1].strip()
                    cut = _strip_comment(text_j)
                    commented = cut != text_j
                    parts.append(cut)
                    i = j + 1
                value = _fold("\n".join(parts), "")
                result[key] = None if value in _NULLS else value
        except YamlError as exc:
            errors.append((off, f"key {key!r}: {exc}"))
            result.pop(key, None)
    return result, errors


def _block_scalar(header: str, body: list[str]) -> str:
    """``|`` / ``>`` block scalar (rare in meta.yaml): literal or folded, with chomping."""
    indents = [len(b) - len(b.lstrip(" ")) for b in body if b.strip()]
    ind = min(indents) if indents else 0
    rows = [b[ind:] if b.strip() else "" for b in body]
    trailing = 0
    while trailing < len(rows) and rows[len(rows) - 1 - trailing] == "":
        trailing += 1
    core = rows[: len(rows) - trailing]
    if header.startswith(">"):
        text, prev, blanks = "", None, 0
        for r in core:
            if r == "":
                blanks += 1
                continue
            if prev is None or blanks:
                text += "\n" * blanks + r
            elif r[0] in " \t" or prev[0] in " \t":
                text += "\n" + r
            else:
                text += " " + r
            prev, blanks = r, 0
    else:
        text = "\n".join(core)
    if "-" in header:
        return text
    if "+" in header:
        return text + "\n" * (trailing + (1 if core else 0))
    return text + "\n" if core else ""


def byte_offset(text: str, char_offset: int) -> int:
    return len(text[:char_offset].encode("utf-8"))
