"""The chat after a turn is cut short: by Cancel turn, by kill -9 of the server, by a shutdown.

Review r1 (round 72): F2, a call's line kept reading "running…" (or "waiting for you") after
Cancel turn, where the record says ``unknown`` (or ``failed``); after kill -9 the stream's Retry
found the turn ``interrupted`` and sent the instruction again as a new turn, whose model ran the
(not idempotent) tool a second time. F4, the read after a turn a shutdown cut short said only
"Failed to fetch", and the message went back in the box as safe to send again although its call
had run.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer, Step
from tests.api.live import free_port, serve_isolated
from tests.console.browser import aptix_serve, modes_offering, new_chat
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


def _respond(body: dict[str, Any]) -> Step:
    """Answers "slow write <mark>" (a 60 s write, not safe to run twice) and "approve please"."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return reply("Done.")
    text = str(last.get("content") or "")
    if (write := slow_write_call(text)) is not None:
        return write
    if text == "approve please":
        approval = {"prompt": "Delete the report?", "action": "delete report"}
        return reply(None, call("request_user_approval", approval, id="approve-1"))
    return reply(f"Echo: {text}")


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(respond=_respond) as server:
        yield server


@pytest.fixture(scope="module")
def modes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in catalog, with slow_write offered in the default mode."""
    return modes_offering(tmp_path_factory.mktemp("modes"), "slow_write")


@pytest.fixture(scope="module")
def side_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("side") / "side.log"


@pytest.fixture(scope="module")
def url(
    tmp_path_factory: pytest.TempPathFactory,
    llm: ScriptedOpenAIServer,
    modes: Path,
    side_log: Path,
) -> Iterator[str]:
    data = tmp_path_factory.mktemp("console-cut-short")
    with aptix_serve(data, **slow_write_env(llm, modes, side_log)) as served:
        yield served


def _line(page: Page, tool: str) -> Locator:
    return page.locator("details.call").filter(has_text=tool).locator(".call-status")


def _turns(url: str, page: Page) -> list[dict[str, Any]]:
    session_id = page.evaluate("location.hash").rsplit("/", 1)[1]
    shown = httpx.get(f"{url}/v1/sessions/{session_id}", headers=A, timeout=30).json()
    return list(shown["turns"])


def test_cancel_turn_shows_the_recorded_outcome_of_the_call_it_stopped(
    url: str, side_log: Path, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    new_chat(page, url, "slow write cancelled")
    line = _line(page, "slow_write")
    expect(line).to_have_text("running…")
    started(page, side_log, "cancelled")
    page.get_by_role("button", name="Cancel turn").click()
    expect(page.locator(".transcript .note")).to_have_text(["Turn cancelled."])
    # As the record says it (and a reload would): it may have taken effect.
    expect(line).to_have_text("outcome unknown")
    [turn] = _turns(url, page)
    assert (turn["status"], [c["outcome"] for c in turn["toolCalls"]]) == ("cancelled", ["unknown"])
    expect(page.get_by_role("button", name="Send")).to_be_enabled()


def test_cancel_turn_on_a_waiting_approval_shows_the_calls_recorded_outcome(
    url: str, open_page: PageFactory
) -> None:
    page = open_page(key="key-a")
    new_chat(page, url, "approve please")
    expect(page.get_by_role("region", name="Approval needed")).to_be_visible()
    line = _line(page, "request_user_approval")
    expect(line).to_have_text("waiting for you")
    page.get_by_role("button", name="Cancel turn").click()
    expect(page.locator(".transcript .note")).to_have_text(["Turn cancelled."])
    expect(line).to_have_text("failed")
    [turn] = _turns(url, page)
    assert (turn["status"], [c["outcome"] for c in turn["toolCalls"]]) == ("cancelled", ["failed"])


def test_retry_after_a_kill_9_shows_the_interrupted_turn_and_runs_nothing_again(
    tmp_path: Path, llm: ScriptedOpenAIServer, modes: Path, open_page: PageFactory
) -> None:
    side_log = tmp_path / "side.log"
    env = slow_write_env(llm, modes, side_log)
    port = free_port()  # the server comes back where the page points
    page = open_page(key="key-a")
    requests = recorded(page)
    with serve_isolated(tmp_path, tmp_path / "serve.log", 180, port, **env) as (url, process):
        new_chat(page, url, "slow write killed")
        line = _line(page, "slow_write")
        expect(line).to_have_text("running…")
        started(page, side_log, "killed")
        lost = killed(page, process)
    with serve_isolated(tmp_path, tmp_path / "serve.log", 180, port, **env) as (url, _):
        lost.get_by_role("button", name="Retry").click()
        notes = page.locator(".transcript .note")
        expect(notes.first).to_have_text(INTERRUPTED)
        expect(notes.last).to_contain_text(NOT_SENT_AGAIN)
        expect(line).to_have_text("outcome unknown")
        expect(page.locator("details.call")).to_have_count(1)
        expect(page.get_by_role("button", name="Send")).to_be_enabled()
        turns = _turns(url, page)
        assert [(t["status"], [c["outcome"] for c in t["toolCalls"]]) for t in turns] == [
            ("interrupted", ["unknown"])
        ]
    # The instruction was posted once, and the write began once.
    assert len(posted(requests)) == 1
    assert side_log.read_text().splitlines() == ["start killed"]


def test_a_turn_a_shutdown_cut_short_is_read_back_with_a_retry_and_not_sent_again(
    tmp_path: Path, llm: ScriptedOpenAIServer, modes: Path, open_page: PageFactory
) -> None:
    """SIGTERM: the server gives the streamed turn its grace (about 24 s), then ends it."""
    side_log = tmp_path / "side.log"
    env = slow_write_env(llm, modes, side_log)
    port = free_port()
    page = open_page(key="key-a")
    requests = recorded(page)
    with serve_isolated(tmp_path, tmp_path / "serve.log", 180, port, **env) as (url, process):
        new_chat(page, url, "slow write stopped")
        line = _line(page, "slow_write")
        expect(line).to_have_text("running…")
        started(page, side_log, "stopped")
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        unread = page.get_by_role("alert").filter(has_text="could not be read back yet")
        expect(unread).to_be_visible()
    # Said in words, not as the browser's bare "Failed to fetch".
    expect(page.get_by_text("Failed to fetch", exact=True)).to_have_count(0)
    with serve_isolated(tmp_path, tmp_path / "serve.log", 180, port, **env) as (url, _):
        unread.get_by_role("button", name="Retry").click()
        notes = page.locator(".transcript .note")
        expect(notes.last).to_contain_text(NOT_SENT_AGAIN)
        expect(notes.filter(has_text=INTERRUPTED)).to_have_count(1)
        expect(page.get_by_text("back in the box")).to_have_count(0)
        expect(line).to_have_text("outcome unknown")
        expect(page.get_by_label("Message")).to_have_value("")
        turns = _turns(url, page)
        assert [(t["status"], [c["outcome"] for c in t["toolCalls"]]) for t in turns] == [
            ("interrupted", ["unknown"])
        ]
    assert len(posted(requests)) == 1
    assert side_log.read_text().splitlines() == ["start stopped"]
