"""The console of a server with no API keys and no model: it opens at once, chat says why it
cannot run, the rest works; /docs renders from the server alone."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Request, expect

from aptix.settings import AptixSettings
from tests.console.browser import in_process
from tests.console.conftest import PageFactory


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = AptixSettings(
        data_dir=tmp_path_factory.mktemp("console-local"),
        load_plugins=False,
        semantic_matching=False,
        api_keys=None,
        llm_model=None,
    )
    with in_process(settings) as served:
        yield served


def test_without_keys_the_console_opens_and_chat_says_no_model_is_configured(
    url: str, open_page: PageFactory
) -> None:
    page = open_page()
    page.goto(f"{url}/console/")
    expect(page.get_by_role("heading", name="Chat")).to_be_visible()
    expect(page.get_by_label("API key")).to_be_hidden()
    expect(page.get_by_role("status").filter(has_text="No model is configured")).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    page.get_by_role("link", name="Modes").click()
    expect(page.get_by_role("heading", name="Modes")).to_be_visible()
    expect(page.get_by_role("article").first).to_contain_text("Tools offered")
    page.get_by_role("link", name="Sessions").click()
    expect(page.get_by_text("No sessions yet.")).to_be_visible()


def test_docs_render_with_nothing_fetched_from_outside(url: str, open_page: PageFactory) -> None:
    page = open_page()
    outside: list[str] = []

    def record(request: Request) -> None:
        if urlsplit(request.url).hostname not in {"127.0.0.1", None}:
            outside.append(request.url)

    page.on("request", record)
    page.goto(f"{url}/docs")
    expect(page.locator(".swagger-ui .title").first).to_contain_text("Aptix")
    expect(page.get_by_text("/v1/agent/execute").first).to_be_visible()
    page.goto(f"{url}/console/")
    expect(page.get_by_role("heading", name="Chat")).to_be_visible()
    assert outside == []
