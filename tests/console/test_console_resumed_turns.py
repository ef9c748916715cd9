"""Chat after an approval's answer: a tab left behind, and a resume whose stream was lost.

An answer the server already has wins (docs/http-api.md): the tab that answers late shows the
answer on record, not its own; and a resumed turn keeps its seq, so a lost stream's Retry finds
it by id and shows it rather than posting the answers again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, Route, expect

from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer, Step
from tests.console.browser import aptix_serve, scripted_env
from tests.console.conftest import PageFactory
from tests.console.model import respond


def _respond(body: dict[str, Any]) -> Step:
    """The console's scripted model, and "approve twice": a second approval after the first."""
    last = body["messages"][-1]
    called = str(last.get("tool_call_id"))
    if last.get("content") == "approve twice":
        first = {"prompt": "First step?", "action": "step one"}
        return reply("Two approvals.", call("request_user_approval", first, id="twice-1"))
    if called.startswith("twice-1"):
        second = {"prompt": "Second step?", "action": "step two"}
        return reply("One more.", call("request_user_approval", second, id="twice-2"))
    if called.startswith("twice-2"):
        approved = json.loads(last["content"]).get("approved") is True
        return reply("Both done." if approved else "Second step denied.")
    return respond(body)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ScriptedOpenAIServer(respond=_respond) as llm:
        data = tmp_path_factory.mktemp("console-resumed")
        with aptix_serve(data, **scripted_env(llm)) as served:
            yield served


def _ask_for_approval(page: Page, url: str) -> str:
    """Send "approve please" in a new chat; the session id once its card shows."""
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    page.get_by_label("Message").fill("approve please")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("region", name="Approval needed")).to_be_visible()
    return page.evaluate("location.hash").rsplit("/", 1)[1]


def _approval_line(page: Page) -> Locator:
    line = page.locator("details.call").filter(has_text="request_user_approval")
    return line.locator(".call-status")


def test_a_tab_left_behind_shows_the_answer_another_tab_gave_first(
    url: str, open_page: PageFactory
) -> None:
    behind = open_page(key="key-a")
    session_id = _ask_for_approval(behind, url)
    other = open_page(key="key-a")
    other.goto(f"{url}/console/#/chat/{session_id}")
    other.get_by_role("region", name="Approval needed").get_by_role(
        "button", name="Approve"
    ).click()
    expect(other.locator(".msg.assistant p").last).to_have_text("Approved: the report is deleted.")
    # The first tab still shows the card; its Deny comes too late.
    card = behind.get_by_role("region", name="Approval needed")
    card.get_by_role("button", name="Deny").click()
    expect(behind.locator(".msg.assistant p").last).to_have_text("Approved: the report is deleted.")
    expect(card.locator(".answer")).to_have_text(
        "Already answered elsewhere: approved. Your answer was not used."
    )
    expect(_approval_line(behind)).to_have_text("approved")
    expect(behind.get_by_text("The connection was lost")).to_have_count(0)
    expect(behind.get_by_role("button", name="Send")).to_be_enabled()


def test_an_answer_on_record_is_shown_as_given(url: str, open_page: PageFactory) -> None:
    page = open_page(key="key-a")
    _ask_for_approval(page, url)
    card = page.get_by_role("region", name="Approval needed")
    card.get_by_role("button", name="Deny").click()
    expect(page.locator(".msg.assistant p").last).to_have_text("Denied: nothing was done.")
    expect(card.locator(".answer")).to_have_text("You denied.")
    expect(_approval_line(page)).to_have_text("denied")


def test_retry_after_a_lost_resume_stream_shows_the_finished_turn_without_posting_again(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    posted: list[dict[str, object]] = []  # counted here: no request passes the route uncounted
    lose = [True]

    def lose_the_stream(route: Route) -> None:
        body = json.loads(route.request.post_data or "{}")
        posted.append(body)
        if "toolResults" not in body or not lose[0]:
            route.continue_()
            return
        lose[0] = False
        route.fetch()  # the server runs the resume to its end; its events never arrive
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=": ping\n\n")

    page.route("**/v1/agent/execute", lose_the_stream)
    _ask_for_approval(page, url)
    page.get_by_role("region", name="Approval needed").get_by_role("button", name="Approve").click()
    alert = page.get_by_role("alert").filter(has_text="The connection was lost")
    expect(alert).to_be_visible()
    alert.get_by_role("button", name="Retry").click()
    expect(page.locator(".msg.assistant p")).to_have_text(
        ["I need your approval first.", "Approved: the report is deleted."]
    )
    expect(_approval_line(page)).to_have_text("approved")
    expect(page.get_by_role("alert").filter(has_text="The connection was lost")).to_have_count(0)
    # The instruction and its resume: the Retry read the record and posted nothing again.
    assert [sorted(body) for body in posted] == [
        ["instruction", "sessionId", "stream"],
        ["sessionId", "stream", "toolResults"],
    ]


def _answer(url: str, session_id: str, call_id: str, approved: bool) -> dict[str, Any]:
    """Another client answers ``call_id`` through the API."""
    results = [{"callId": call_id, "result": {"approved": approved}}]
    answer = httpx.post(
        f"{url}/v1/agent/execute",
        json={"sessionId": session_id, "toolResults": results},
        headers={"Authorization": "Bearer key-a"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _approve_twice(page: Page, url: str) -> str:
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")
    page.get_by_label("Message").fill("approve twice")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("region", name="Approval needed")).to_be_visible()
    return page.evaluate("location.hash").rsplit("/", 1)[1]


def test_a_tab_left_behind_after_the_turn_went_on_shows_how_it_ended_and_no_card(
    url: str, open_page: PageFactory
) -> None:
    """Its late answer gets the turn as it ended, not the hand-off the first answer got."""
    behind = open_page(key="key-a")
    session_id = _approve_twice(behind, url)
    _answer(url, session_id, "twice-1", approved=True)
    assert _answer(url, session_id, "twice-2", approved=False)["text"] == "Second step denied."
    card = behind.get_by_role("region", name="Approval needed")
    card.get_by_role("button", name="Approve").click()
    # The answer the turn ended with, not the stale "One more." of the first answer's hand-off.
    expect(behind.locator(".msg.assistant p")).to_have_text(
        ["Two approvals.", "Second step denied."]
    )
    expect(card.locator(".answer")).to_have_text("You approved.")
    expect(behind.get_by_role("region", name="Approval needed")).to_have_count(1)
    expect(behind.locator(".card button:not(:disabled)")).to_have_count(0)
    expect(behind.get_by_text("Second step?")).to_have_count(0)
    expect(behind.get_by_role("button", name="Send")).to_be_enabled()


def test_a_hand_off_answered_elsewhere_before_the_page_reads_it_draws_no_card(
    url: str, open_page: PageFactory
) -> None:
    """The stream names the second approval, but another client answers it first."""
    page = open_page(key="key-a")
    session_id = _approve_twice(page, url)
    armed = [True]

    def answer_first(route: Route) -> None:
        # The read of the session after the resume's stream: the other client is quicker.
        if route.request.method == "GET" and armed[0]:
            armed[0] = False
            _answer(url, session_id, "twice-2", approved=True)
        route.continue_()

    page.route(f"**/v1/sessions/{session_id}?*", answer_first)
    page.get_by_role("region", name="Approval needed").get_by_role("button", name="Approve").click()
    expect(page.get_by_text("Already answered elsewhere: the turn is completed.")).to_be_visible()
    expect(page.locator(".msg.assistant p").last).to_have_text("Both done.")
    expect(page.get_by_role("region", name="Approval needed")).to_have_count(1)
    expect(page.locator(".card button:not(:disabled)")).to_have_count(0)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
