"""An address with a malformed %-escape is a broken link, said as such.

Review r1 (round 72) F3: the router's decodeURIComponent threw an uncaught URIError. A tab
opened on such a link said "The server could not be reached: URI malformed"; moving to one kept
the page shown under the new address, and threw.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.console.browser import aptix_serve
from tests.console.conftest import PageFactory

BROKEN = "This link is broken: the address holds a malformed %-escape, so it names no page."


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {"APTIX_API_KEYS": "key-a=acme:ann:admin"}
    with aptix_serve(tmp_path_factory.mktemp("console-malformed-link"), **env) as served:
        yield served


def _says_broken(page: Page) -> None:
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    expect(page.locator("main")).to_contain_text(BROKEN)
    expect(page.get_by_text("could not be reached")).to_have_count(0)
    expect(page.locator("nav a[aria-current]")).to_have_count(0)
    expect(page).to_have_title("Not found · Aptix console")


def test_a_tab_opened_on_a_malformed_escape_says_the_link_is_broken(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/sessions/%E0%A4%A")  # half of a UTF-8 character
    _says_broken(page)
    page.get_by_role("link", name="Sessions").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Sessions")


def test_moving_to_a_malformed_escape_says_the_link_is_broken(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/modes")
    expect(page.get_by_role("heading", level=1)).to_have_text("Modes")
    page.evaluate("location.hash = '#/workflows/%'")
    _says_broken(page)
    expect(page.locator("main")).to_be_focused()
