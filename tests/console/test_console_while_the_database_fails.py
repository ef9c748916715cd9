"""The console while the database fails (review r2, round 69).

F1: a session that could not be loaded for now (503, a network error) stays the chat's
session, with a Retry, and Send waits for it; only a 404 lets it go. F2: the composer is busy
from the moment a new chat's session is being created, and a failure loses nothing typed.
F3: text streamed before a bare error envelope is labelled partial and the message goes back
in the box. F4: a page that failed to load keeps its heading and offers a Retry. F5: a warning
equal to the turn's error is shown once, in chat and on the session page.

The API's failures are made by intercepting the browser's requests (``page.route``): what is
tested is what the page does with a 503 ``database_unavailable``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, Request, Route, expect

from aptix.api.errors import DATABASE_UNAVAILABLE
from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer, Step
from tests.console.browser import aptix_serve, scripted_env
from tests.console.conftest import PageFactory

A = {"Authorization": "Bearer key-a"}
OUTAGE = {"error": {"code": "database_unavailable", "message": DATABASE_UNAVAILABLE}}
#: The ending of a turn the database failed after its call ran: the same text is its warning.
ENDED = (
    "Ended because the database was unavailable (InterfaceError); see the server log. This "
    "request's calls ran (listed with their outcomes): sending it again would run them again."
)


def _respond(body: dict[str, Any]) -> Step:
    return reply(f"Echo: {body['messages'][-1].get('content')}")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ScriptedOpenAIServer(respond=_respond) as llm:
        data = tmp_path_factory.mktemp("console-outage")
        with aptix_serve(data, **scripted_env(llm)) as served:
            yield served


def _session_with_a_turn(url: str) -> str:
    answer = httpx.post(f"{url}/v1/agent/execute", json={"instruction": "hello"}, headers=A)
    assert answer.json()["text"] == "Echo: hello", answer.text
    return str(answer.json()["sessionId"])


def _outage(route: Route) -> None:
    route.fulfill(status=503, headers={"Retry-After": "5"}, json=OUTAGE)


def _events(*events: tuple[str, dict[str, Any]]) -> str:
    return "".join(f"event: {kind}\ndata: {json.dumps(data)}\n\n" for kind, data in events)


def _posts(requests: list[Request], path: str) -> list[Any]:
    return [
        json.loads(r.post_data or "null")
        for r in requests
        if r.method == "POST" and r.url.split("?")[0].endswith(path)
    ]


def _open_chat(page: Page, url: str) -> None:
    page.goto(f"{url}/console/#/chat")
    expect(page.locator("#chat-mode")).to_have_text("general")


def test_a_session_that_failed_to_load_stays_with_a_retry_and_send_waits_for_it(
    url: str, open_page: PageFactory
) -> None:
    sid = _session_with_a_turn(url)
    page = open_page(key="key-a")
    requests: list[Request] = []
    page.on("request", lambda request: requests.append(request))
    failing = [True]

    def session(route: Route) -> None:
        if failing[0]:
            _outage(route)
        else:
            route.continue_()

    page.route(f"**/v1/sessions/{sid}?*", session)
    page.goto(f"{url}/console/#/chat/{sid}")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("This session could not be loaded for now.")
    expect(alert).to_contain_text(DATABASE_UNAVAILABLE)
    assert page.url.endswith(f"#/chat/{sid}")  # a reload still opens it
    send = page.get_by_role("button", name="Send")
    expect(send).to_be_disabled()
    message = page.get_by_label("Message")
    message.fill("second message")
    message.press("Enter")  # refused: the session has not loaded
    expect(message).to_have_value("second message")
    expect(page.locator(".msg.user")).to_have_count(0)

    failing[0] = False
    alert.get_by_role("button", name="Retry").click()
    expect(page.locator(".msg.assistant .md")).to_have_text(["Echo: hello"])
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(message).to_be_focused()
    expect(send).to_be_enabled()
    send.click()
    expect(page.locator(".msg.assistant .md").last).to_have_text("Echo: second message")
    assert page.url.endswith(f"#/chat/{sid}")
    assert _posts(requests, "/v1/sessions") == []  # no new session was started
    assert [body["sessionId"] for body in _posts(requests, "/v1/agent/execute")] == [sid]


def test_a_session_the_network_failed_to_load_stays_too(url: str, open_page: PageFactory) -> None:
    sid = _session_with_a_turn(url)
    page = open_page(key="key-a")
    page.route(f"**/v1/sessions/{sid}?*", lambda route: route.abort("connectionrefused"))
    page.goto(f"{url}/console/#/chat/{sid}")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("This session could not be loaded for now.")
    expect(alert.get_by_role("button", name="Retry")).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    assert page.url.endswith(f"#/chat/{sid}")
    page.unroute(f"**/v1/sessions/{sid}?*")
    alert.get_by_role("button", name="Retry").click()
    expect(page.locator(".msg.assistant .md")).to_have_text(["Echo: hello"])
    expect(page.get_by_role("button", name="Send")).to_be_enabled()


def test_the_composer_is_busy_while_a_new_session_is_created_and_loses_nothing(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    held: list[Route] = []
    page.route("**/v1/sessions", lambda route: held.append(route))
    _open_chat(page, url)
    message = page.get_by_label("Message")
    message.fill("first message")
    message.press("Enter")
    expect(page.locator(".thinking")).to_be_visible()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    expect(page.get_by_role("button", name="Cancel turn")).to_be_disabled()  # no turn yet
    message.fill("second message, typed while waiting")
    message.press("Enter")  # refused: the first one is still being sent
    expect(message).to_have_value("second message, typed while waiting")
    expect(page.locator(".msg.user p")).to_have_text(["first message"])

    assert len(held) == 1  # one session asked for, not two
    held[0].fulfill(status=503, json=OUTAGE)
    expect(page.locator(".transcript .note.error")).to_have_text([DATABASE_UNAVAILABLE])
    expect(message).to_have_value("first message\nsecond message, typed while waiting")
    expect(page.locator(".msg.user")).to_have_count(0)
    expect(page.locator(".thinking")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    assert len(held) == 1


def test_text_streamed_before_an_outage_is_labelled_partial_and_the_message_is_back(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    armed = [False]

    def execute(route: Route) -> None:
        armed[0] = True  # the refresh after the turn meets the outage too
        body = _events(
            ("text_delta", {"delta": "Held "}),
            ("text_delta", {"delta": "answer"}),
            ("text", {"text": "Held answer"}),
            ("turn_finished", OUTAGE),
        )
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=body)

    def session(route: Route) -> None:
        if armed[0]:
            _outage(route)
        else:
            route.continue_()

    page.route("**/v1/agent/execute", execute)
    page.route("**/v1/sessions/*", session)
    _open_chat(page, url)
    message = page.get_by_label("Message")
    message.fill("hold 5 please")
    page.get_by_role("button", name="Send").click()
    # Back in the box once the turn and the refresh after it have ended.
    expect(message).to_have_value("hold 5 please")
    log = page.locator(".transcript")
    expect(log.locator(".msg.assistant .md")).to_have_text(["Held answer"])
    expect(log.locator(".note")).to_have_text(
        [
            DATABASE_UNAVAILABLE,
            "The text above is partial and may not have been saved: the turn did not complete.",
            "Your message is back in the box: sending it again runs nothing twice.",
        ]
    )
    expect(log.get_by_text(DATABASE_UNAVAILABLE, exact=True)).to_have_count(1)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()


def test_a_warning_equal_to_the_error_is_shown_once_in_chat(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")

    def execute(route: Route) -> None:
        sid = json.loads(route.request.post_data or "{}")["sessionId"]
        call = {
            "callId": "call_1",
            "name": "agent_calculator",
            "argumentsJson": '{"expression": "1+1"}',
            "isServerTool": True,
            "wasExecuted": True,
            "requiresClientExecution": False,
            "resultJson": "2",
            "errorMessage": None,
            "outcome": "succeeded",
        }
        finished = {
            "sessionId": sid,
            "turnId": "t1",
            "kind": "error",
            "mode": "general",
            "text": None,
            "toolCalls": [call],
            "warnings": [ENDED],
            "error": ENDED,
        }
        body = _events(
            ("tool_call_started", call), ("tool_call_finished", call), ("turn_finished", finished)
        )
        route.fulfill(status=200, headers={"content-type": "text/event-stream"}, body=body)

    page.route("**/v1/agent/execute", execute)
    _open_chat(page, url)
    page.get_by_label("Message").fill("add it")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".call-status")).to_have_text("done")
    log = page.locator(".transcript")
    expect(log.locator(".note")).to_have_text([ENDED])
    expect(page.get_by_role("button", name="Send")).to_be_enabled()  # the turn has ended


def test_a_warning_equal_to_the_error_is_listed_once_on_the_session_page(
    url: str, open_page: PageFactory
) -> None:
    sid = _session_with_a_turn(url)
    page = open_page(key="key-a")

    def session(route: Route) -> None:
        stored = route.fetch()
        body = stored.json()
        turn = body["turns"][0]
        turn.update(
            status="error",
            warnings=[ENDED, "Another warning."],
            error={"code": "database_unavailable", "message": ENDED},
        )
        route.fulfill(response=stored, json=body)

    page.route(f"**/v1/sessions/{sid}?*", session)
    page.goto(f"{url}/console/#/sessions/{sid}")
    turn = page.get_by_role("article", name="Turn 1")
    expect(turn.locator(".turn-error")).to_have_text(f"Error {ENDED}")
    warnings = turn.get_by_role("list", name="Warnings of turn 1")
    expect(warnings.get_by_role("listitem")).to_have_text(["Another warning."])


@pytest.mark.parametrize("view", ["sessions", "authoring"])
def test_a_page_that_failed_to_load_keeps_its_heading_and_offers_a_retry(
    url: str, open_page: PageFactory, view: str
) -> None:
    page = open_page(key="key-a")
    failing = [True]

    def listing(route: Route) -> None:
        if failing[0]:
            _outage(route)
        else:
            route.continue_()

    page.route("**/v1/sessions?*", listing)
    page.route("**/v1/tools/agent_workflow_authoring/invoke", listing)
    page.goto(f"{url}/console/#/{view}")
    heading = view.capitalize()
    expect(page.get_by_role("heading", level=1)).to_have_text(heading)
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text(DATABASE_UNAVAILABLE)
    failing[0] = False
    page.get_by_role("button", name="Retry").click()
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.get_by_role("heading", level=1)).to_have_text(heading)
    expect(page.locator("#main")).to_be_focused()
    expect(page.locator("#main table, #main .sessions-empty, #main form").first).to_be_visible()


def test_the_navigation_link_of_a_page_that_failed_loads_it_again(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    page.route("**/v1/sessions?*", _outage)
    page.goto(f"{url}/console/#/sessions")
    expect(page.get_by_role("alert")).to_contain_text(DATABASE_UNAVAILABLE)
    page.unroute("**/v1/sessions?*")
    page.get_by_role("navigation").get_by_role("link", name="Sessions").click()
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.get_by_role("table", name="Sessions 1–")).to_be_visible()
