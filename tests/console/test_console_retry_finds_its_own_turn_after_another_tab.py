"""A lost stream's Retry decides from this tab's own turn, not from another tab's.

Review s3 F1 (round 72): tab A read the session (turn 1), tab B added turn 2 to it, tab A sent
a not-idempotent write (turn 3) and the server was killed. Tab A's Retry took "the first turn
after the last one it had read": tab B's. It showed tab B's error (or answer) as its own, found
no call there that may have run and sent the instruction again, so the write began twice; the
write's line kept reading "running…" where the record says ``outcome unknown``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, Route, expect

from aptix.testing import reply
from aptix.testing.server import Fail, ScriptedOpenAIServer, Step
from tests.api.live import free_port, serve_isolated
from tests.console.browser import modes_offering
from tests.console.conftest import PageFactory
from tests.console.slow_write import (
    INTERRUPTED,
    NOT_SENT_AGAIN,
    killed,
    posted,
    recorded,
    slow_write_call,
    slow_write_env,
    started,
)

A = {"Authorization": "Bearer key-a"}
CANNOT_TELL = "Your message was not sent again: this tab cannot tell which turn on record"
FAILED = "The model endpoint answered HTTP 500"


def _respond(body: dict[str, Any]) -> Step:
    """Answers "slow write <mark>" (a 60 s write, not safe to run twice); "fail ...": HTTP 500."""
    text = str(body["messages"][-1].get("content") or "")
    if (write := slow_write_call(text)) is not None:
        return write
    if text.startswith("fail "):
        return Fail(500, "the model failed in tab B")
    return reply(f"Echo: {text}")


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(respond=_respond) as server:
        yield server


@pytest.fixture(scope="module")
def modes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in catalog, with slow_write offered in the default mode."""
    return modes_offering(tmp_path_factory.mktemp("modes"), "slow_write")


def _send(page: Page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def _turns(url: str, session_id: str) -> list[tuple[str, str, list[str]]]:
    shown = httpx.get(f"{url}/v1/sessions/{session_id}", headers=A, timeout=30).json()
    return [
        (t["status"], t["instruction"], [c["outcome"] for c in t["toolCalls"]])
        for t in shown["turns"]
    ]


def _another_tab_adds_a_turn(
    open_page: PageFactory, url: str, first: Page, text: str, shown: str
) -> str:
    """Tab A has read the session (one turn); tab B adds a turn to it. Its id."""
    first.goto(f"{url}/console/#/chat")
    expect(first.locator("#chat-mode")).to_have_text("general")
    _send(first, "hello one")
    expect(first.get_by_text("Echo: hello one")).to_be_visible()
    session_id = str(first.evaluate("location.hash")).rsplit("/", 1)[1]
    other = open_page(key="key-a")
    other.goto(f"{url}/console/#/chat/{session_id}")
    expect(other.get_by_text("Echo: hello one")).to_be_visible()
    _send(other, text)
    expect(other.get_by_text(shown)).to_be_visible()
    expect(other.get_by_role("button", name="Send")).to_be_enabled()
    return session_id


@pytest.mark.parametrize(
    ("other_text", "other_shows"),
    [("fail in tab B", FAILED), ("hi from tab B", "Echo: hi from tab B")],
    ids=["other-tab-failed", "other-tab-completed"],
)
def test_retry_after_a_kill_9_reads_its_own_turn_not_the_other_tabs(
    tmp_path: Path,
    llm: ScriptedOpenAIServer,
    modes: Path,
    open_page: PageFactory,
    other_text: str,
    other_shows: str,
) -> None:
    side_log = tmp_path / "side.log"
    env = slow_write_env(llm, modes, side_log)
    port = free_port()  # the server comes back where the page points
    page = open_page(key="key-a")
    requests = recorded(page)
    with serve_isolated(tmp_path, tmp_path / "serve.log", 180, port, **env) as (url, process):
        session_id = _another_tab_adds_a_turn(open_page, url, page, other_text, other_shows)
        _send(page, "slow write once")
        line = page.locator("details.call .call-status")
        expect(line).to_have_text("running…")
        started(page, side_log, "once")
        lost = killed(page, process)
    with serve_isolated(tmp_path, tmp_path / "serve.log", 180, port, **env) as (url, _):
        lost.get_by_role("button", name="Retry").click()
        notes = page.locator(".transcript .note")
        expect(notes.last).to_contain_text(NOT_SENT_AGAIN)
        expect(notes.filter(has_text=INTERRUPTED)).to_have_count(1)
        expect(line).to_have_text("outcome unknown")
        expect(page.get_by_role("button", name="Send")).to_be_enabled()
        # Tab B's ending is not shown as tab A's.
        expect(page.get_by_text(other_shows)).to_have_count(0)
        assert _turns(url, session_id) == [
            ("completed", "hello one", []),
            (("error" if other_text.startswith("fail") else "completed"), other_text, []),
            ("interrupted", "slow write once", ["unknown"]),
        ]
    assert len(posted(requests)) == 2  # "hello one" and the write, each once
    assert side_log.read_text().splitlines() == ["start once"]


def test_retry_that_cannot_name_its_turn_sends_nothing_that_may_have_run(
    tmp_path: Path, llm: ScriptedOpenAIServer, modes: Path, open_page: PageFactory
) -> None:
    """The stream's answer never reached the page (a proxy on the way lost it): no turn id."""
    side_log = tmp_path / "side.log"
    env = slow_write_env(llm, modes, side_log)
    port = free_port()
    page = open_page(key="key-a")
    requests = recorded(page)

    def proxied(route: Route) -> None:
        # Forwarded whole: a server killed meanwhile leaves the page a bare network failure.
        try:
            route.fulfill(response=route.fetch(timeout=120_000))
        except Exception:  # any failure of the fetch is the lost connection
            route.abort("connectionreset")

    with serve_isolated(tmp_path, tmp_path / "serve.log", 180, port, **env) as (url, process):
        session_id = _another_tab_adds_a_turn(open_page, url, page, "fail in tab B", FAILED)
        page.route("**/v1/agent/execute", proxied)
        _send(page, "slow write unnamed")
        started(page, side_log, "unnamed")
        lost = killed(page, process)
    with serve_isolated(tmp_path, tmp_path / "serve.log", 180, port, **env) as (url, _):
        lost.get_by_role("button", name="Retry").click()
        notes = page.locator(".transcript .note")
        expect(notes.last).to_contain_text(CANNOT_TELL)
        expect(page.get_by_text(FAILED)).to_have_count(0)
        expect(page.get_by_role("button", name="Send")).to_be_enabled()
        assert _turns(url, session_id)[-1] == ("interrupted", "slow write unnamed", ["unknown"])
    assert len(posted(requests)) == 2
    assert side_log.read_text().splitlines() == ["start unnamed"]
