"""One browser per module; a fresh page per test that fails on any JavaScript error.

A failing test leaves a screenshot of its page in the pytest temporary directory (the path is
printed in the failure).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.console.browser import VIEWPORT, chromium_path

#: How long an ``expect`` waits for the page before it fails. Playwright's 5 s default is a
#: timing bound a busy CI machine can exceed (Swagger UI alone parses 1.5 MB of script); a
#: passing test never waits for it, it only makes a failure slower to report.
WAIT_MS = 60_000
expect.set_options(timeout=WAIT_MS)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable)
        yield launched
        launched.close()


PageFactory = Callable[..., Page]


@pytest.fixture
def open_page(
    browser: Browser, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PageFactory]:
    """Open pages (``open_page(key=..., viewport=...)``); each fails the test on a JS error."""
    pages: list[tuple[Page, list[str]]] = []

    def opener(key: str | None = None, viewport: dict[str, int] | None = None) -> Page:
        context = browser.new_context(
            viewport=viewport or VIEWPORT, locale="en-US", timezone_id="UTC"
        )
        if key is not None:
            context.add_init_script(f"sessionStorage.setItem('aptix.apiKey', {key!r});")
        context.set_default_timeout(WAIT_MS)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        pages.append((page, errors))
        return page

    yield opener
    shots: Path | None = None
    if request.node.stash.get(_FAILED, False):
        shots = tmp_path_factory.mktemp("console-failure")
    for index, (page, errors) in enumerate(pages):
        if shots is not None and not page.is_closed():
            path = shots / f"{request.node.name}-{index}.png"
            page.screenshot(path=path, full_page=True)
            print(f"screenshot: {path}")
        page.context.close()
        assert not errors, f"JavaScript errors in the page: {errors}"
