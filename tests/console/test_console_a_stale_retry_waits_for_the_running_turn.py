"""A lost stream's Retry, or an answer to a turn ended elsewhere, while this tab's next turn runs.

Review r1 (round 73) F1: the Retry of a lost stream stayed in the conversation and worked while
a later turn of the same tab ran. Its request (refused, 409 ``session_busy``) took the running
turn's place in the page: Send came back on, Cancel turn went off and no longer cancelled the
turn, which went on running; and the retried message, refused, was neither sent nor put back in
the box. "Send answer again" (and a card's answer) had the same path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, Route, expect

from aptix.testing import call, reply
from aptix.testing.server import Fail, ScriptedOpenAIServer, Step
from tests.console.browser import aptix_serve, modes_offering, new_chat
from tests.console.conftest import PageFactory
from tests.console.slow_write import posted, recorded, slow_write_call, slow_write_env, started

A = {"Authorization": "Bearer key-a"}
TURN_RUNNING = "A turn is running in this tab: try again once it has finished, or cancel it."
BUSY = "wait for it to finish or cancel it"


class Model:
    """ "slow write <mark>": a 60 s write; "flaky <x>": HTTP 500 the first time, then an echo;
    "approve <x>": an approval, the model failing once after its answer; else an echo."""

    def __init__(self) -> None:
        self.failed: set[str] = set()

    def _once(self, key: str) -> bool:
        """Whether ``key`` is seen for the first time."""
        first = key not in self.failed
        self.failed.add(key)
        return first

    def __call__(self, body: dict[str, Any]) -> Step:
        last = body["messages"][-1]
        if last["role"] == "tool":
            if self._once(str(last.get("tool_call_id"))):
                return Fail(500, "the model fell over after the answer")
            return reply("Approved: it is done.")
        text = str(last.get("content") or "")
        if (write := slow_write_call(text)) is not None:
            return write
        if text.startswith("flaky ") and self._once(text):
            return Fail(500, "the model failed once")
        if text.startswith("approve "):
            approval = {"prompt": "Archive the report?", "action": "archive report"}
            return reply(None, call("request_user_approval", approval, id=f"ask-{text}"))
        return reply(f"Echo: {text}")


@pytest.fixture(scope="module")
def side_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("side") / "side.log"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, side_log: Path) -> Iterator[str]:
    modes = modes_offering(tmp_path_factory.mktemp("modes"), "slow_write")
    data = tmp_path_factory.mktemp("console-stale-retry")
    with (
        ScriptedOpenAIServer(respond=Model()) as llm,
        aptix_serve(data, **slow_write_env(llm, modes, side_log)) as served,
    ):
        yield served


def _send(page: Page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send", exact=True).click()


def _session_id(page: Page) -> str:
    return str(page.evaluate("location.hash")).rsplit("/", 1)[1]


def _turns(url: str, session_id: str) -> list[tuple[str, str, list[str]]]:
    shown = httpx.get(f"{url}/v1/sessions/{session_id}", headers=A, timeout=30).json()
    return [
        (t["status"], t["instruction"], [c["outcome"] for c in t["toolCalls"]])
        for t in shown["turns"]
    ]


def _ended(page: Page, url: str, session_id: str) -> list[tuple[str, str, list[str]]]:
    """The session's turns once none of them runs (a cancel is written as the stream closes)."""
    for _ in range(300):
        turns = _turns(url, session_id)
        if all(status != "running" for status, _, _ in turns):
            return turns
        page.wait_for_timeout(100)
    raise AssertionError(f"a turn still runs: {turns}")


def _cut_after_headers(route: Route) -> None:
    """The answer's headers (X-Aptix-Turn) reach the page; its events never do."""
    answer = route.fetch(timeout=120_000)
    route.fulfill(response=answer, body="")


def _lost(page: Page, text: str) -> Locator:
    """Send ``text`` (its model fails), its stream lost after the headers; the Retry."""
    page.route("**/v1/agent/execute", _cut_after_headers, times=1)
    _send(page, text)
    lost = page.get_by_role("alert").filter(has_text="The connection was lost")
    expect(lost).to_be_visible()
    retry = lost.get_by_role("button", name="Retry")
    expect(retry).to_be_enabled()
    return retry


def _running(page: Page) -> None:
    """This tab's turn runs, and only it holds the page: Send waits, Cancel turn is on."""
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_disabled()
    expect(page.get_by_role("button", name="Cancel turn")).to_be_enabled()


def _cancel(page: Page, url: str, session_id: str) -> list[tuple[str, str, list[str]]]:
    """Cancel turn cancels the running write; the session's turns then."""
    page.get_by_role("button", name="Cancel turn").click()
    cancelled = page.locator(".transcript .note").filter(has_text="Turn cancelled.")
    expect(cancelled).to_have_count(1)
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    return _ended(page, url, session_id)


def test_a_lost_streams_retry_waits_while_this_tabs_next_turn_runs(
    url: str, side_log: Path, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    new_chat(page, url, "hello")
    expect(page.get_by_text("Echo: hello")).to_be_visible()
    session_id = _session_id(page)
    retry = _lost(page, "flaky one")
    _send(page, "slow write B")
    started(page, side_log, "B")
    expect(retry).to_be_disabled()
    _running(page)
    assert _cancel(page, url, session_id) == [
        ("completed", "hello", []),
        ("error", "flaky one", []),
        ("cancelled", "slow write B", ["unknown"]),
    ]
    # Once the turn has ended, the Retry sends the message again.
    expect(retry).to_be_enabled()
    retry.click()
    expect(page.get_by_text("Echo: flaky one")).to_be_visible()
    assert _turns(url, session_id)[-1] == ("completed", "flaky one", [])


def test_a_retry_whose_read_meets_this_tabs_next_turn_waits_for_it(
    url: str, side_log: Path, open_page: PageFactory
) -> None:
    """Send starts a turn while the Retry reads the session: the Retry does not post."""
    page = open_page(key="key-a")
    new_chat(page, url, "hello")
    expect(page.get_by_text("Echo: hello")).to_be_visible()
    session_id = _session_id(page)
    retry = _lost(page, "flaky two")
    held: list[Route] = []

    def reads(address: str) -> bool:
        return f"/v1/sessions/{session_id}?" in address

    def hold(route: Route) -> None:
        held.append(route)  # answered once Send has started a turn

    page.route(reads, hold, times=1)
    requests = recorded(page)
    retry.click()
    for _ in range(1200):
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the Retry never read the session"
    _send(page, "slow write C")
    started(page, side_log, "C")
    held[0].continue_()
    expect(page.locator(".transcript .note").filter(has_text=TURN_RUNNING)).to_have_count(1)
    again = page.get_by_role("alert").filter(has_text="The connection was lost")
    expect(again.get_by_role("button", name="Retry")).to_be_disabled()
    _running(page)
    assert [(r.post_data_json or {}).get("instruction") for r in posted(requests)] == [
        "slow write C"
    ]
    assert _cancel(page, url, session_id)[-1] == ("cancelled", "slow write C", ["unknown"])
    again.get_by_role("button", name="Retry").click()
    expect(page.get_by_text("Echo: flaky two")).to_be_visible()


def test_a_retry_the_server_refuses_puts_the_message_back_in_the_box(
    url: str, side_log: Path, open_page: PageFactory
) -> None:
    """Another tab's turn runs: the Retry's post is refused (409 session_busy)."""
    page = open_page(key="key-a")
    new_chat(page, url, "hello")
    expect(page.get_by_text("Echo: hello")).to_be_visible()
    session_id = _session_id(page)
    retry = _lost(page, "flaky three")
    other = open_page(key="key-a")
    other.goto(f"{url}/console/#/chat/{session_id}")
    expect(other.get_by_text("Echo: hello")).to_be_visible()
    _send(other, "slow write D")
    started(other, side_log, "D")
    retry.click()
    expect(page.locator(".transcript .note").filter(has_text=BUSY)).to_have_count(1)
    expect(page.get_by_label("Message")).to_have_value("flaky three")
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    assert _cancel(other, url, session_id)[-1] == ("cancelled", "slow write D", ["unknown"])
    page.get_by_role("button", name="Send", exact=True).click()
    expect(page.get_by_text("Echo: flaky three")).to_be_visible()


def _approval_ended_elsewhere(page: Page, url: str, name: str, answer_first: bool) -> str:
    """An approval in a new chat (answered, the model failing after it, if ``answer_first``);
    then another client cancels that turn. The session id."""
    new_chat(page, url, f"approve {name}")
    card = page.get_by_role("region", name="Approval needed")
    expect(card).to_be_visible()
    if answer_first:
        card.get_by_role("button", name="Approve").click()
        expect(page.get_by_role("button", name="Send answer again")).to_be_enabled()
    session_id = _session_id(page)
    [turn] = httpx.get(f"{url}/v1/sessions/{session_id}", headers=A, timeout=30).json()["turns"]
    cancel = f"{url}/v1/sessions/{session_id}/turns/{turn['turnId']}/cancel"
    assert httpx.post(cancel, headers=A, timeout=30).status_code == 200
    return session_id


def test_send_answer_again_waits_while_this_tabs_next_turn_runs(
    url: str, side_log: Path, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    session_id = _approval_ended_elsewhere(page, url, "again", answer_first=True)
    _send(page, "slow write E")
    started(page, side_log, "E")
    expect(page.get_by_role("button", name="Send answer again")).to_be_disabled()
    _running(page)
    assert _cancel(page, url, session_id) == [
        ("cancelled", "approve again", ["succeeded"]),  # its answer is on record
        ("cancelled", "slow write E", ["unknown"]),
    ]


def test_a_card_answered_while_this_tabs_next_turn_runs_is_not_posted(
    url: str, side_log: Path, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    session_id = _approval_ended_elsewhere(page, url, "card", answer_first=False)
    _send(page, "slow write F")
    started(page, side_log, "F")
    requests = recorded(page)
    page.get_by_role("region", name="Approval needed").get_by_role("button", name="Approve").click()
    expect(page.locator(".transcript .note").filter(has_text=TURN_RUNNING)).to_have_count(1)
    expect(page.get_by_role("button", name="Send answer again")).to_be_disabled()
    _running(page)
    assert posted(requests) == []
    assert _cancel(page, url, session_id) == [
        ("cancelled", "approve card", ["failed"]),
        ("cancelled", "slow write F", ["unknown"]),
    ]
