"""Fixtures shared by the test folders: built example sites (in-process and through the real
command line), a session decode cache, and a real headless Chromium."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import CHROMIUM, CHROMIUM_ARGS, EXAMPLE
from tests.support.cli import run_sitegen


@pytest.fixture(scope="session")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sitegen.config import Config
    from sitegen.pipeline.build import BuildOptions, build

    out = tmp_path_factory.mktemp("example") / "site"
    build(EXAMPLE, out, BuildOptions(config=Config(title="Example runs")))
    return out


@pytest.fixture(scope="session")
def reference_site(tmp_path_factory) -> Path:
    """The example archive built on this machine the ordinary way (the default executor), with
    the configuration of :mod:`tests.support.sites` (the sites compared with it use it too)."""
    from tests.support.sites import build_site

    base = tmp_path_factory.mktemp("reference")
    build_site(EXAMPLE, base / "site", cache=base / "cache")
    return base / "site"


@pytest.fixture
def cache_every_file(monkeypatch) -> None:
    """Log files of any size kept in the decode cache, in this process (by default a small one
    is decoded again instead): for tests of the cache's own workings on small test files."""
    from sitegen.cache.store import Store

    monkeypatch.setattr(Store, "MIN_CACHED_BYTES", 0)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """A decode cache shared by the command-line builds of the example archive."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, cache_dir) -> Path:
    """The example archive published by the command line to <tmp>/www/reports (a symlink), as
    nginx would serve it."""
    www = tmp_path_factory.mktemp("www")
    out = www / "reports"
    r = run_sitegen("build", EXAMPLE, "--out", out, "--cache", cache_dir)
    assert r.returncode == 0, r.stderr
    assert out.is_symlink()
    return out


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium driven by Playwright; the test fails (not skips) when it is missing."""
    assert shutil.which(CHROMIUM) or Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: install Debian's chromium (.ci/run does)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class PageLog:
    """Console messages, page errors and every request a page made."""

    def __init__(self, page) -> None:
        self.messages: list[str] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("console", lambda m: (self.errors if m.type == "error" else self.messages).append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: self.requests.append(r.url))


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.log = PageLog(pg)
    yield pg
    context.close()
