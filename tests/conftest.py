"""Shared fixtures: the built example site and a real headless Chromium."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from testpaths import CHROMIUM, CHROMIUM_ARGS, EXAMPLE, ROOT  # noqa: F401  (re-exported)


@pytest.fixture(scope="session")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sitegen.pipeline.build import BuildOptions, build
    from sitegen.config import Config

    out = tmp_path_factory.mktemp("example") / "site"
    build(EXAMPLE, out, BuildOptions(config=Config(title="Example runs")))
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
