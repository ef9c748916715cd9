"""A chat reopened on a turn that waits for an answer it already has.

Review r1 (round 72) F1: after Approve, the model failed, so the turn waits for that same answer
to be sent again (docs/http-api.md); a reload, or a second tab, drew the approval card unanswered,
and a Deny there lost to the stored Approve: the action went ahead as "answered elsewhere".
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, Request, expect

from aptix.testing import call, reply
from aptix.testing.server import Fail, ScriptedOpenAIServer, Step
from tests.console.browser import aptix_serve, scripted_env
from tests.console.conftest import PageFactory

A = {"Authorization": "Bearer key-a"}


class Model:
    """The answer to "approve <name>": an approval the model fails after, once per call id."""

    def __init__(self) -> None:
        self.failed: set[str] = set()

    def __call__(self, body: dict[str, Any]) -> Step:
        last = body["messages"][-1]
        if last["role"] == "tool":
            call_id = str(last.get("tool_call_id"))
            if call_id not in self.failed:
                self.failed.add(call_id)
                return Fail(500, "the model fell over after the answer")
            approved = json.loads(last["content"]).get("approved") is True
            return reply("Approved: it is done." if approved else "Denied: nothing was done.")
        text = str(last.get("content") or "")
        approval = {"prompt": "Archive the report?", "action": "archive report"}
        return reply(None, call("request_user_approval", approval, id=f"ask-{text}"))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ScriptedOpenAIServer(respond=Model()) as llm:
        data = tmp_path_factory.mktemp("console-answer-on-record")
        with aptix_serve(data, **scripted_env(llm)) as served:
            yield served


def _approve_then_fail(page: Page, url: str, name: str) -> str:
    """Approve in a new chat, the model failing after it; the session id."""
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    page.get_by_label("Message").fill(f"approve {name}")
    page.get_by_role("button", name="Send").click()
    page.get_by_role("region", name="Approval needed").get_by_role("button", name="Approve").click()
    expect(page.get_by_role("button", name="Send answer again")).to_be_visible()
    return str(page.evaluate("location.hash")).rsplit("/", 1)[1]


def _shows_the_answer_on_record(page: Page) -> None:
    card = page.get_by_role("region", name="Approval needed")
    expect(card.locator(".answer")).to_have_text("Answered: approved.")
    expect(page.locator(".card button:not(:disabled)")).to_have_count(0)
    expect(page.get_by_role("button", name="Send answer again")).to_be_visible()
    expect(page.get_by_role("button", name="Cancel turn")).to_be_enabled()


def test_a_reload_shows_the_answer_on_record_and_sends_it_again(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    session_id = _approve_then_fail(page, url, "reloaded")
    page.reload()
    _shows_the_answer_on_record(page)
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    page.get_by_role("button", name="Send answer again").click()
    expect(page.locator(".msg.assistant").last).to_contain_text("Approved: it is done.")
    expect(page.get_by_role("button", name="Send answer again")).to_have_count(0)
    expect(page.get_by_role("button", name="Cancel turn")).to_be_disabled()
    [resend] = [
        json.loads(r.post_data or "null")
        for r in requests
        if r.method == "POST" and r.url.endswith("/v1/agent/execute")
    ]
    call_id = "ask-approve reloaded"
    assert resend["toolResults"] == [
        {"callId": call_id, "result": {"approved": True}, "isError": False}
    ]
    shown = httpx.get(f"{url}/v1/sessions/{session_id}", headers=A, timeout=30).json()
    assert [(t["status"], t["text"]) for t in shown["turns"]] == [
        ("completed", "Approved: it is done.")
    ]


def test_a_second_tab_shows_the_answer_on_record_not_a_fresh_card(
    url: str, open_page: PageFactory
) -> None:
    first = open_page(key="key-a")
    session_id = _approve_then_fail(first, url, "second tab")
    other = open_page(key="key-a")
    other.goto(f"{url}/console/#/chat/{session_id}")
    _shows_the_answer_on_record(other)
    other.get_by_role("button", name="Cancel turn").click()
    expect(other.locator(".transcript .note").last).to_have_text("Turn cancelled.")
    shown = httpx.get(f"{url}/v1/sessions/{session_id}", headers=A, timeout=30).json()
    assert shown["turns"][-1]["status"] == "cancelled"
