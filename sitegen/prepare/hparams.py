"""Hyperparameters of a run.

Hyperparameters come from the reader (``RunData.hparams``: the hparams plugin, VisualDL or
MLflow params) and from a text summary holding a JSON or YAML config, a common habit:
``add_text("hyperparameters/config", json.dumps(config))`` (tensorboardX appends
``/text_summary`` to the tag). Nested keys are flattened with ``.``. YAML is read by a small
safe subset parser (block maps of ``key: value``, comments, scalars, inline lists kept as
text): no tags, anchors or object construction, so a hostile text can only fail to parse.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any

from sitegen.model import HParamValue, RunData, flat_hparams, is_config_tag

log = logging.getLogger(__name__)

_YAML_LINE = re.compile(r"^( *)([\w\-][^:#{}\[\],]*?|\"[^\"]*\"|'[^']*')\s*:(?:\s+(.*?))?\s*$")
_NUMBER = re.compile(r"^[-+]?(\d[\d_]*\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)$")


def _yaml_scalar(text: str) -> Any:
    if text == "" or text in ("~", "null", "Null", "NULL"):
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text in ("true", "True", "TRUE", "yes", "Yes"):
        return True
    if text in ("false", "False", "FALSE", "no", "No"):
        return False
    if _NUMBER.match(text):
        try:
            return int(text.replace("_", "")) if re.fullmatch(r"[-+]?[\d_]+", text) else float(text.replace("_", ""))
        except ValueError:
            return text
    if text in (".inf", "+.inf"):
        return math.inf
    if text == "-.inf":
        return -math.inf
    if text == ".nan":
        return math.nan
    return text


def parse_yaml_map(text: str) -> dict[str, Any] | None:
    """A block map of ``key: value`` lines (nested by indentation); None when it is not one."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    pending: tuple[int, dict[str, Any], str] | None = None
    keys = 0
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip() or line.strip() in ("---", "..."):
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            return None
        m = _YAML_LINE.match(line)
        if not m:
            return None
        indent, key, value = len(m.group(1)), m.group(2).strip().strip("\"'"), m.group(3)
        if pending is not None:
            p_indent, p_parent, p_key = pending
            pending = None
            if indent > p_indent:
                child: dict[str, Any] = {}
                p_parent[p_key] = child
                stack.append((p_indent, child))
            else:
                p_parent[p_key] = None
        while len(stack) > 1 and indent <= stack[-1][0]:
            stack.pop()
        parent = stack[-1][1]
        if value is None or value == "":
            pending = (indent, parent, key)
        else:
            parent[key] = _yaml_scalar(value)
        keys += 1
    if pending is not None:
        pending[1][pending[2]] = None
    return root if keys else None


def parse_config(text: str) -> dict[str, HParamValue] | None:
    """Flattened config from a JSON object or a YAML-subset map; None when the text is neither."""
    s = text.strip()
    if s.startswith("```"):  # a fenced block, as some loggers write for Markdown display
        s = re.sub(r"^```[a-zA-Z]*\n?|\n?```$", "", s).strip()
    if s.startswith("{"):
        try:
            obj = json.loads(s)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return flat_hparams(obj)
    obj = parse_yaml_map(s)
    return flat_hparams(obj) if obj else None


def run_hparams(datas: list[RunData]) -> dict[str, HParamValue]:
    """A run's hyperparameters: config texts (newest step per tag), then reader hparams on top."""
    out: dict[str, HParamValue] = {}
    for d in datas:
        newest: dict[str, tuple[int, str]] = {}
        for tx in d.texts:
            if is_config_tag(tx.tag) and (tx.tag not in newest or tx.step >= newest[tx.tag][0]):
                newest[tx.tag] = (tx.step, tx.text)
        for tag in sorted(newest):
            parsed = parse_config(newest[tag][1])
            if parsed:
                out.update(parsed)
    for d in datas:
        out.update(d.hparams)
    return out
