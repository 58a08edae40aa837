"""``sitegen.toml`` read into typed dataclasses.

Like mkdocs, the loader collects *every* problem and raises once, and it warns about unknown
keys instead of failing (a newer config may meet an older sitegen).
"""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import dataclass, field, fields
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


@dataclass
class ExecutorConfig:
    kind: str = "local"  # "local" (this machine) or "dask" (a Dask cluster)
    scheduler: str = ""  # Dask scheduler address, e.g. "tcp://10.0.0.5:8786"; empty: a local cluster


@dataclass
class Config:
    title: str = "Training runs"
    language: str = "en"
    base_url: str = ""  # where the site is served (links in the feed, notifications); empty: relative links
    runs: RunsConfig = field(default_factory=RunsConfig)
    tags: TagsConfig = field(default_factory=TagsConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    charts: ChartsConfig = field(default_factory=ChartsConfig)
    formats: FormatsConfig = field(default_factory=FormatsConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)

    def tag_selected(self, tag: str) -> bool:
        if self.tags.include and not any(re.search(p, tag) for p in self.tags.include):
            return False
        return not any(re.search(p, tag) for p in self.tags.exclude)


def _convert(cls: type, data: dict[str, Any], where: str, errors: list[str]) -> Any:
    kwargs: dict[str, Any] = {}
    known = {f.name: f for f in fields(cls)}
    for key, value in data.items():
        f = known.get(key)
        if f is None:
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
    for key in ("max_image_bytes", "max_text_chars", "max_images_per_tag"):
        if getattr(cfg.limits, key) <= 0:
            errors.append(f"limits.{key}: must be positive")


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
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    errors: list[str] = []
    cfg = _convert(Config, data, "", errors)
    _check(cfg, errors)
    if errors:
        raise ConfigError(f"{path}: " + "; ".join(errors))
    return cfg
