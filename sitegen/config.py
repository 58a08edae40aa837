"""``sitegen.toml`` read into typed dataclasses.

Like mkdocs, the loader collects *every* problem and raises once, and it warns about unknown
keys instead of failing (a newer config may meet an older sitegen).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from sitegen.errors import ConfigError

log = logging.getLogger(__name__)
LANGUAGES = ("en", "zh-CN")


@dataclass
class RunsConfig:
    include: tuple[str, ...] = ()  # globs on run names; empty = all
    exclude: tuple[str, ...] = ()


@dataclass
class TagsConfig:
    include: tuple[str, ...] = ()  # regexes (re.search) on tags; empty = all
    exclude: tuple[str, ...] = ()


@dataclass
class IndexConfig:
    key_metrics: tuple[str, ...] = ()  # tags shown as index columns; empty = the first few common tags


@dataclass
class CompareConfig:
    summarise_above: int = 1000  # a comparison page of more runs shows each group as a median and a band


@dataclass
class ChartsConfig:
    points_per_chart: int = 2000


@dataclass
class FormatsConfig:
    metric_files: tuple[str, ...] = ("*.csv", "*.jsonl")


@dataclass
class LimitsConfig:
    max_image_bytes: int = 8 * 1024 * 1024
    max_text_chars: int = 200_000
    max_images_per_tag: int = 1000
    max_tags_per_run: int = 5000  # charts per run (key metrics first, then by name); downloads keep all


@dataclass
class ExecutorConfig:
    kind: str = "local"  # "local" (this machine) or "dask" (a Dask cluster)
    scheduler: str = ""  # Dask scheduler address, e.g. "tcp://10.0.0.5:8786"; empty: a local cluster


@dataclass
class ArchiveConfig:
    #: folders outside the archive that its symlinks may lead into (relative: to the config
    #: file's folder); everything else a symlink leads to is refused
    follow_symlinks_into: tuple[str, ...] = ()


@dataclass
class GatesConfig:
    """``[gates]``: rules checked on the runs a build brought (see :func:`parse_rule`)."""

    rules: tuple[str, ...] = ()
    baseline: str = "best"  # what ``baseline`` in a rule means: best, median(N) or run(NAME)
    missing: str = "fail"  # a selected new run without the metric: "fail" or "skip"
    _lines: tuple[int, ...] = ()  # each rule's line in sitegen.toml (set when it is read)

    def parsed(self) -> list[GateRule]:
        """The rules, parsed (:func:`load_config` has checked them)."""
        lines = self._lines or (0,) * len(self.rules)
        return [replace(parse_rule(text), line=n) for text, n in zip(self.rules, lines)]


@dataclass
class NotifyConfig:
    """``[notify]``: where ``sitegen notify`` posts (the command line's flags win)."""

    webhook: str = ""  # better given through the environment: SITEGEN_WEBHOOK
    kind: str = "generic"  # slack, feishu, dingtalk, wecom or generic
    secret_env: str = "SITEGEN_WEBHOOK_SECRET"  # the environment variable holding the signing secret


@dataclass
class Config:
    title: str = "Training runs"
    language: str = "en"
    base_url: str = ""  # where the site is served (links in the feed, notifications); empty: relative links
    runs: RunsConfig = field(default_factory=RunsConfig)
    tags: TagsConfig = field(default_factory=TagsConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    charts: ChartsConfig = field(default_factory=ChartsConfig)
    compare: CompareConfig = field(default_factory=CompareConfig)
    formats: FormatsConfig = field(default_factory=FormatsConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    archive: ArchiveConfig = field(default_factory=ArchiveConfig)
    gates: GatesConfig = field(default_factory=GatesConfig)
    notify: NotifyConfig = field(default_factory=NotifyConfig)

    def tag_selected(self, tag: str) -> bool:
        if self.tags.include and not any(re.search(p, tag) for p in self.tags.include):
            return False
        return not any(re.search(p, tag) for p in self.tags.exclude)


@dataclass(frozen=True)
class GateRule:
    """One parsed ``[gates]`` rule: ``SELECTOR: METRIC OP VALUE`` (see :func:`parse_rule`)."""

    text: str
    selector: str  # "/"-separated globs matched against a run's model, or its whole name
    metric: str
    op: str  # >=, <=, >, <
    number: float | None = None  # VALUE is a number...
    base: str | None = None  # ...or "baseline", "best", "median" or "run"
    n: int = 0  # median(N)
    run: str = ""  # run(NAME)
    arith: str = ""  # "*", "+", "-" (or "" for the baseline itself)
    k: float = 0.0
    line: int = 0  # in sitegen.toml (0: unknown)


GATE_OPS = (">=", "<=", ">", "<")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RULE = re.compile(r"^\s*(?P<sel>[^:]*?)\s*:\s*(?P<metric>[^\s<>=]+)\s*(?P<op>>=|<=|=>|=<|==|!=|=|>|<)?\s*(?P<rhs>.*?)\s*$", re.S)
_BASE = re.compile(r"^(?P<base>baseline|best|median\(\s*(?P<n>[^)]*)\)|run\((?P<run>.*)\))(?:\s*(?P<arith>[*+-])\s*(?P<k>.+))?$")


def parse_base(text: str) -> GateRule:
    """A baseline alone (``[gates] baseline``): ``best``, ``median(N)`` or ``run(NAME)``."""
    try:
        rule = parse_rule(f"*: x >= {text}")
    except ValueError as exc:
        if "median(N)" in str(exc) and text.startswith("median"):
            raise
        rule = None
    if rule is None or rule.base in (None, "baseline") or rule.arith:
        raise ValueError(f"expected best, median(N) or run(NAME), got {text!r}")
    return rule


def parse_rule(text: str) -> GateRule:
    """``SELECTOR: METRIC OP VALUE`` where VALUE is a number or ``BASE [* + -] NUMBER`` and BASE
    is ``baseline``, ``best``, ``median(N)`` or ``run(NAME)``. Raises ValueError saying what is wrong."""
    m = _RULE.match(text)
    if m is None or ":" not in text:
        raise ValueError("expected 'SELECTOR: METRIC OP VALUE', e.g. 'vision/*: eval/acc >= 0.9'")
    sel, metric, op, rhs = m.group("sel"), m.group("metric"), m.group("op"), m.group("rhs")
    if not sel:
        raise ValueError("no selector before ':' (use '*/*' for every model)")
    if "//" in sel or sel.startswith("/") or sel.endswith("/"):
        raise ValueError(f"selector {sel!r} has an empty part")
    if op is None:
        raise ValueError(f"no comparison after the metric {metric!r}: expected one of {', '.join(GATE_OPS)}")
    if op not in GATE_OPS:
        raise ValueError(f"unknown comparison {op!r}: expected one of {', '.join(GATE_OPS)}")
    if not rhs:
        raise ValueError(f"nothing to compare with after {op!r}")
    if re.fullmatch(_NUMBER, rhs):
        return GateRule(text, sel, metric, op, number=float(rhs))
    b = _BASE.match(rhs)
    if b is None:
        raise ValueError(
            f"bad value {rhs!r}: expected a number, baseline, best, median(N) or run(NAME), optionally followed by * + or - and a number"
        )
    base, k, n = b.group("base"), b.group("k"), 0
    if base.startswith("median"):
        if not (b.group("n") or "").strip().isdigit() or int(b.group("n")) < 1:
            raise ValueError(f"median(N) needs a whole number N of at least 1, got {b.group('n')!r}")
        base, n = "median", int(b.group("n"))
    elif base.startswith("run("):
        if not b.group("run").strip():
            raise ValueError("run(NAME) needs a run's name")
        base = "run"
    if k is not None and not re.fullmatch(_NUMBER, k.strip()):
        raise ValueError(f"bad number {k.strip()!r} after {b.group('arith')!r}")
    return GateRule(
        text, sel, metric, op, base=base, n=n, run=(b.group("run") or "").strip(), arith=b.group("arith") or "", k=float(k) if k else 0.0
    )


def _convert(cls: type, data: dict[str, Any], where: str, errors: list[str]) -> Any:
    kwargs: dict[str, Any] = {}
    known = {f.name: f for f in fields(cls)}
    for key, value in data.items():
        f = known.get(key)
        if f is None or key.startswith("_"):
            log.warning("config: unknown key %s%s (ignored)", where, key)
            continue
        default = getattr(cls(), key)
        name = f"{where}{key}"
        if hasattr(default, "__dataclass_fields__"):
            if isinstance(value, dict):
                kwargs[key] = _convert(type(default), value, f"{name}.", errors)
            else:
                errors.append(f"{name}: expected a table")
        elif isinstance(default, tuple):
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                kwargs[key] = tuple(value)
            else:
                errors.append(f"{name}: expected a list of strings")
        elif isinstance(default, bool) or not isinstance(value, type(default)) or isinstance(value, bool) != isinstance(default, bool):
            errors.append(f"{name}: expected {type(default).__name__}, got {type(value).__name__}")
        else:
            kwargs[key] = value
    return cls(**kwargs)


def _check(cfg: Config, errors: list[str]) -> None:
    if cfg.language not in LANGUAGES:
        errors.append(f"language: must be one of {', '.join(LANGUAGES)}, got {cfg.language!r}")
    if cfg.base_url and not re.match(r"^https?://[^/\s]+/(\S*/)?$", cfg.base_url):
        errors.append(f"base_url: must be an http(s) URL ending in /, got {cfg.base_url!r}")
    if cfg.charts.points_per_chart < 10:
        errors.append("charts.points_per_chart: must be at least 10")
    if cfg.compare.summarise_above < 0:
        errors.append("compare.summarise_above: must be 0 or more")
    for key in ("include", "exclude"):
        for pattern in getattr(cfg.tags, key):
            try:
                re.compile(pattern)
            except re.error as exc:
                errors.append(f"tags.{key}: bad regex {pattern!r}: {exc}")
    if cfg.executor.kind not in ("local", "dask"):
        errors.append(f'executor.kind: must be "local" or "dask", got {cfg.executor.kind!r}')
    if cfg.executor.scheduler and cfg.executor.kind != "dask":
        errors.append('executor.scheduler: needs kind = "dask"')
    _check_gates(cfg, errors)
    if cfg.notify.kind not in NOTIFY_KINDS:
        errors.append(f"notify.kind: must be one of {', '.join(NOTIFY_KINDS)}, got {cfg.notify.kind!r}")
    for key in ("max_image_bytes", "max_text_chars", "max_images_per_tag", "max_tags_per_run"):
        if getattr(cfg.limits, key) <= 0:
            errors.append(f"limits.{key}: must be positive")
    if any(not p.strip() for p in cfg.archive.follow_symlinks_into):
        errors.append("archive.follow_symlinks_into: an empty path")


NOTIFY_KINDS = ("slack", "feishu", "dingtalk", "wecom", "generic")


def _check_gates(cfg: Config, errors: list[str]) -> None:
    g = cfg.gates
    lines = g._lines or (0,) * len(g.rules)
    for i, (text, line) in enumerate(zip(g.rules, lines)):
        try:
            parse_rule(text)
        except ValueError as exc:
            where = f"line {line}, " if line else ""
            errors.append(f"gates.rules[{i}] ({where}{text!r}): {exc}")
    try:
        parse_base(g.baseline)
    except ValueError as exc:
        errors.append(f"gates.baseline: {exc}")
    if g.missing not in ("fail", "skip"):
        errors.append(f'gates.missing: must be "fail" or "skip", got {g.missing!r}')


def _line_of(text: str, rule: str, after: int) -> int:
    """The line of sitegen.toml holding ``rule`` (as a TOML string), the first one from line
    ``after`` on; 0 when it cannot be found (a rule written with escapes)."""
    lines = text.splitlines()
    for quoted in (json.dumps(rule, ensure_ascii=False), f"'{rule}'"):
        for n in range(max(after, 1), len(lines) + 1):
            if quoted in lines[n - 1]:
                return n
    return 0


CONFIG_NAME = "sitegen.toml"


def find_config(archive: Path | str | None, cwd: Path | None = None) -> Path | None:
    """The config a build uses when ``--config`` is not given: ``sitegen.toml`` at the
    archive's root, else in the current folder (``cwd``), else none (the defaults)."""
    places = [Path(archive)] if isinstance(archive, Path) else []
    places.append(Path.cwd() if cwd is None else cwd)
    for folder in places:
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def load_config(path: str | Path | None) -> Config:
    """Read a config file (``None``: the defaults). Raises ConfigError listing every problem."""
    if path is None:
        return Config()
    if sys.version_info >= (3, 11):  # (here: a build without a config file never needs it)
        import tomllib
    else:  # pragma: no cover - exercised on older Pythons only
        import tomli as tomllib
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    errors: list[str] = []
    cfg = _convert(Config, data, "", errors)
    lines, at = [], 1
    for rule in cfg.gates.rules:
        n = _line_of(text, rule, at)
        lines.append(n)
        at = n or at
    cfg.gates._lines = tuple(lines)
    _check(cfg, errors)
    if errors:
        raise ConfigError(f"{path}: " + "; ".join(errors))
    extra = tuple(str((path.parent / os.path.expanduser(p)).absolute()) for p in cfg.archive.follow_symlinks_into)
    cfg.archive = ArchiveConfig(extra)
    return cfg
