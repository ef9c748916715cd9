"""The console on turns that ended without completing, and on calls a client answered with an error.

Review r1 (round 66): F1, the session page labelled the text a cancelled or failed turn kept
("I will do it now." beside a call) "Answer", and the chat reopened on such a session showed it
as the model's message with nothing after it; F2, ``request_user_approval`` answered with
``isError: true`` read ``failed`` with "—" as its error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from aptix.testing import call, reply
from aptix.testing.server import Fail, ScriptedOpenAIServer, Step
from tests.console.browser import aptix_serve, scripted_env
from tests.console.conftest import PageFactory

A = {"Authorization": "Bearer key-a"}
#: The client's error text, with a bidi control the page must show rather than obey.
CLOSED = "closed \u202edialog"
CLOSED_SHOWN = "closed <U+202E>dialog"
FAILED_TABLE = "Tool calls that failed, were denied or were cut short, with their error"


def _respond(body: dict[str, Any]) -> Step:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Fail(500, "the model fell over after the call")
    text = str(last.get("content") or "")
    if text == "ask, then fail":
        approval = {"prompt": "Go on?", "action": "go on"}
        return reply("I will do it now.", call("request_user_approval", approval, id="ask-1"))
    if text == "add, then fail":
        return reply("Adding it now.", call("agent_calculator", {"expression": "1+1"}, id="add-1"))
    return reply(f"Echo: {text}")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ScriptedOpenAIServer(respond=_respond) as llm:
        data = tmp_path_factory.mktemp("console-unfinished")
        with aptix_serve(data, **scripted_env(llm)) as served:
            yield served


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    answered = httpx.post(f"{url}/v1/agent/execute", json=body, headers=A, timeout=60)
    return dict(answered.json())


@pytest.fixture(scope="module")
def session(url: str) -> str:
    """Turn 1: a promise and an approval answered with an error, cancelled after the model
    failed; turn 2: a promise and a calculation, then the model failed."""
    sid = httpx.post(f"{url}/v1/sessions", json={}, headers=A).json()["sessionId"]
    asked = _post(url, {"sessionId": sid, "instruction": "ask, then fail"})
    answer = {"callId": asked["toolCalls"][0]["callId"], "result": CLOSED, "isError": True}
    _post(url, {"sessionId": sid, "toolResults": [answer]})
    turn = httpx.get(f"{url}/v1/sessions/{sid}", headers=A).json()["turns"][-1]
    cancel = f"{url}/v1/sessions/{sid}/turns/{turn['turnId']}/cancel"
    httpx.post(cancel, headers=A).raise_for_status()
    _post(url, {"sessionId": sid, "instruction": "add, then fail"})
    turns = httpx.get(f"{url}/v1/sessions/{sid}", headers=A).json()["turns"]
    assert [(t["status"], t["text"]) for t in turns] == [
        ("cancelled", "I will do it now."),
        ("error", "Adding it now."),
    ]
    return sid


def test_the_session_page_labels_an_unfinished_turns_text_partial_and_shows_the_clients_error(
    url: str, session: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/sessions/{session}")
    first = page.get_by_role("article", name="Turn 1")
    expect(first.locator(".answer-text .who")).to_have_text(
        "Partial text (the turn did not complete: cancelled)"
    )
    expect(first.locator(".answer-text .md")).to_have_text("I will do it now.")
    second = page.get_by_role("article", name="Turn 2")
    expect(second.locator(".answer-text .who")).to_have_text(
        "Partial text (the turn did not complete: error)"
    )
    expect(page.locator(".answer-text .who", has_text="Answer")).to_have_count(0)
    # F2: the client's own words are the failed call's error, in the table and the call.
    failed = page.get_by_role("table", name=FAILED_TABLE)
    cells = failed.get_by_role("row").nth(1).get_by_role("cell")
    expect(cells).to_have_text(["1", "request_user_approval", "failed", CLOSED_SHOWN])
    details = first.locator("details.call").filter(has_text="request_user_approval")
    details.locator("summary").click()
    expect(details.locator("h4")).to_have_text(["Arguments", "Error", "Client's answer"])
    expect(details.locator("p")).to_have_text(CLOSED_SHOWN)


def test_a_completed_turns_text_is_still_its_answer(url: str, open_page: PageFactory) -> None:
    done = _post(url, {"instruction": "hello"})
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/sessions/{done['sessionId']}")
    turn = page.get_by_role("article", name="Turn 1")
    expect(turn.locator(".answer-text .who")).to_have_text("Answer")


def test_the_chat_reopened_on_the_session_says_the_text_is_partial(
    url: str, session: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.goto(f"{url}/console/#/chat/{session}")
    expect(page.locator(".msg.assistant")).to_have_count(2)
    notes = page.locator(".transcript .note")
    expect(notes).to_have_text(
        [
            "Turn cancelled. The text above is partial: the turn did not complete.",
            re.compile("HTTP 500.*the model fell over after the call"),
            "Turn failed. The text above is partial: the turn did not complete.",
        ],
        use_inner_text=True,
    )
