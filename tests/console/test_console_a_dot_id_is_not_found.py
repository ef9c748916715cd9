"""An address whose id is "." or ".." is a broken link, said as such.

Review r1 (round 73) F2: the pages fetched ``/v1/sessions/${encodeURIComponent(id)}``, which
leaves a dot as it is, and a URL resolves "." and ".." as steps of its path. ``#/sessions/.``
read the list of sessions as if it were one and showed a JavaScript TypeError; ``#/chat/.``
said the server "could not be reached"; ``#/workflows/..`` read ``/v1/`` ("No such route.").
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Request, expect

from tests.console.browser import aptix_serve
from tests.console.conftest import PageFactory

BROKEN = 'This link is broken: "." and ".." are no ids, so the address names no page.'
LINKS = [
    "#/sessions/.",
    "#/sessions/..",
    "#/sessions/%2E",
    "#/workflows/.",
    "#/workflows/%2e%2E",
    "#/chat/.",
    "#/chat/..",
    "#/authoring/..",
]
#: What a fetch of a dot id resolves to: never the page's own resource.
RESOLVED = {"/v1/", "/v1/sessions", "/v1/sessions/", "/v1/workflows", "/v1/workflows/"}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {"APTIX_API_KEYS": "key-a=acme:ann:admin"}
    with aptix_serve(tmp_path_factory.mktemp("console-dot-id"), **env) as served:
        yield served


def _says_broken(page: Page, requests: list[Request]) -> None:
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    expect(page.locator("main")).to_contain_text(BROKEN)
    expect(page.get_by_text("could not be reached")).to_have_count(0)
    expect(page.get_by_text("Cannot read properties")).to_have_count(0)
    expect(page.locator("nav a[aria-current]")).to_have_count(0)
    expect(page).to_have_title("Not found · Aptix console")
    assert [r.url for r in requests if urlsplit(r.url).path in RESOLVED] == []


@pytest.mark.parametrize("link", LINKS)
def test_a_tab_opened_on_a_dot_id_says_the_link_is_broken(
    url: str, open_page: PageFactory, link: str
) -> None:
    page = open_page(key="key-a")
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    page.goto(f"{url}/console/{link}")
    _says_broken(page, requests)


def test_moving_to_a_dot_id_says_the_link_is_broken_and_a_real_page_loads_after(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    for link in LINKS:
        # From a page that loads (what is checked below is not left over from the last link).
        page.goto(f"{url}/console/#/modes")
        expect(page.get_by_role("heading", level=1)).to_have_text("Modes")
        page.evaluate(f"location.hash = {link!r}")
        _says_broken(page, requests)
        expect(page.locator("main")).to_be_focused()
    page.get_by_role("link", name="Workflows").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Workflows")
