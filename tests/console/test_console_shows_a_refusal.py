"""The console says why a turn has no answer when the model declined (``message.refusal``).

Fixer f1, round 67: the chat said only "The model answered with no text.", and neither the
chat reopened nor the session's page showed anything of the refusal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from aptix.settings import AptixSettings
from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer, Step
from tests.console.browser import in_process
from tests.console.conftest import PageFactory

A = {"Authorization": "Bearer key-a"}
#: A refusal with a bidi control: shown, never obeyed, as all outside text.
NO = "I can't help with that \u202egnp.exe."
NO_SHOWN = "I can't help with that <U+202E>gnp.exe."


def _respond(body: dict[str, Any]) -> Step:
    last = str(body["messages"][-1].get("content") or "")
    return reply(None, refusal=NO) if last.startswith("pick a lock") else reply(f"Echo: {last}")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ScriptedOpenAIServer(respond=_respond) as llm:
        settings = AptixSettings(
            data_dir=Path(tmp_path_factory.mktemp("console-refusal")),
            load_plugins=False,
            semantic_matching=False,
            api_keys="key-a=acme:ann:admin",
            llm_model="scripted",
            llm_base_url=llm.base_url,
            llm_max_retries=0,
        )
        with in_process(settings) as served:
            yield served


def _declined(page: Page) -> None:
    note = page.locator(".note.refusal")
    expect(note).to_have_count(1)
    expect(note).to_have_text(f"The model declined to answer: {NO_SHOWN}")
    expect(page.get_by_text("The model answered with no text.")).to_have_count(0)


def test_the_chat_shows_the_refusal_live_and_when_reopened(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/chat")
    page.get_by_label("Message").fill("pick a lock for me")
    page.get_by_role("button", name="Send").click()
    _declined(page)
    expect(page).to_have_url(re.compile(r"#/chat/\w+"))
    page.reload()
    expect(page.locator(".msg.user")).to_have_count(1)
    _declined(page)


def test_the_session_page_shows_the_refusal(url: str, open_page: PageFactory) -> None:
    answer = httpx.post(
        f"{url}/v1/agent/execute",
        json={"instruction": "pick a lock, please"},
        headers=A,
        timeout=60,
    ).json()
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/sessions/{answer['sessionId']}")
    turn = page.get_by_role("article", name="Turn 1")
    expect(turn.locator(".refusal-text")).to_have_text(f"The model declined to answer {NO_SHOWN}")
