"""The Usage page and a failed start-up load again (review s2 F1, round 69).

The Usage page that fails to load (the database down) keeps its heading with a Retry, and its
link in the navigation loads it again, as every other page does; a key that is not an admin's
is told so, with no Retry (trying again changes nothing). When the console's start-up check
fails, the navigation link of the address shown loads that page again too.

The API's failures are made by intercepting the browser's requests (``page.route``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, Request, Route, expect

from aptix.api.errors import DATABASE_UNAVAILABLE
from aptix.settings import AptixSettings
from tests.console.browser import in_process
from tests.console.conftest import PageFactory

OUTAGE = {"error": {"code": "database_unavailable", "message": DATABASE_UNAVAILABLE}}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = AptixSettings(
        data_dir=tmp_path_factory.mktemp("console-load-again"),
        load_plugins=False,
        semantic_matching=False,
        api_keys="key-a=acme:ann:admin,key-c=acme:cy",
        llm_model=None,
    )
    with in_process(settings) as served:
        yield served


def _outage(route: Route) -> None:
    route.fulfill(status=503, headers={"Retry-After": "5"}, json=OUTAGE)


def _counted(page: Page, path: str) -> list[Request]:
    """The page's requests to ``path`` (query left out), as they are made."""
    requests: list[Request] = []
    page.on(
        "request",
        lambda request: (
            requests.append(request) if request.url.split("?")[0].endswith(path) else None
        ),
    )
    return requests


def _usage_failed(page: Page, url: str) -> None:
    page.route("**/v1/usage*", _outage)
    page.goto(f"{url}/console/#/usage")
    expect(page.get_by_role("heading", level=1)).to_have_text("Usage")
    expect(page.get_by_role("alert")).to_contain_text(DATABASE_UNAVAILABLE)
    page.unroute("**/v1/usage*")


def _usage_shown(page: Page) -> None:
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.get_by_role("heading", level=1)).to_have_text("Usage")
    expect(page.get_by_role("table", name="Model tokens per API key")).to_be_visible()


def test_the_usage_page_that_failed_to_load_offers_a_retry_that_loads_it(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    _usage_failed(page, url)
    page.get_by_role("button", name="Retry").click()
    _usage_shown(page)
    expect(page.locator("#main")).to_be_focused()


def test_the_navigation_link_of_the_usage_page_that_failed_loads_it_again(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    requests = _counted(page, "/v1/usage")
    _usage_failed(page, url)
    assert len(requests) == 1
    page.get_by_role("navigation").get_by_role("link", name="Usage").click()
    _usage_shown(page)
    assert len(requests) == 2


def test_a_key_that_is_not_an_admins_is_told_so_without_a_retry(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-c")
    page.goto(f"{url}/console/#/usage")
    expect(page.get_by_role("heading", level=1)).to_have_text("Usage")
    expect(page.get_by_role("alert")).to_contain_text("admins only")
    expect(page.get_by_role("button", name="Retry")).to_have_count(0)


def test_after_a_failed_start_the_navigation_link_of_the_page_shown_loads_it(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    requests = _counted(page, "/v1/modes")
    # The start-up check is GET /v1/modes: the console cannot start, whatever the address.
    page.route("**/v1/modes*", _outage)
    page.goto(f"{url}/console/#/modes")
    expect(page.get_by_role("heading", level=1)).to_have_text("Aptix console")
    expect(page.get_by_role("alert")).to_contain_text(DATABASE_UNAVAILABLE)
    assert len(requests) == 1
    page.unroute("**/v1/modes*")
    page.get_by_role("navigation").get_by_role("link", name="Modes").click()
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.get_by_role("heading", level=1)).to_have_text("Modes")
    expect(page.locator("article.mode").first).to_be_visible()
    expect(page.locator("#main")).to_be_focused()
