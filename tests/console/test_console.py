"""The console in a real Chromium against ``aptix serve`` with API keys and a scripted model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from aptix.testing.server import ScriptedOpenAIServer
from tests.console.browser import aptix_serve
from tests.console.conftest import PageFactory
from tests.console.model import respond

KEYS = "key-a=acme:ann:admin,key-b=globex:bob:admin"
A = {"Authorization": "Bearer key-a"}
B = {"Authorization": "Bearer key-b"}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ScriptedOpenAIServer(respond=respond) as llm:
        env = {
            "APTIX_API_KEYS": KEYS,
            "APTIX_LLM_MODEL": "scripted",
            "APTIX_LLM_BASE_URL": llm.base_url,
            "APTIX_LLM_MAX_RETRIES": "0",
        }
        with aptix_serve(tmp_path_factory.mktemp("console"), **env) as served:
            yield served


def test_a_wrong_key_is_refused_on_the_field_and_a_right_one_signs_in(
    url: str, open_page: PageFactory
) -> None:
    page = open_page()
    page.goto(f"{url}/console")
    key = page.get_by_label("API key")
    key.fill("not-a-key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#api-key-error")).to_have_text(
        "That API key was not accepted. Check it and try again."
    )
    expect(key).to_have_attribute("aria-invalid", "true")
    key.fill("key-a")
    page.get_by_role("button", name="Sign in").click()
    for name in ("Chat", "Sessions", "Modes", "Workflows", "Authoring"):
        expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Chat")).to_be_visible()
    expect(page.locator("#chat-mode")).to_have_text("general")
