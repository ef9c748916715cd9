"""``/mcp``: a client's cancel stops its call however early it comes, and the call is not answered.

Over HTTP a call and its ``notifications/cancelled`` travel on connections of their own: the
cancel can reach Aptix before the call has got to its tool (quota, workflow sync, the SDK's
dispatch), or before the call's POST was even read. It is kept a short while and the call
never runs. A call the client cancelled gets no JSON-RPC answer (MCP, as over stdio and in a
batch): its POST ends with 202 and no body.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.types import ASGIApp

from aptix.api.auth import ApiKeyVerifier
from aptix.mcp.http import mcp_http_app
from aptix.mcp.server import (
    EARLY_CANCEL_ID_CHARS,
    EARLY_CANCEL_SECONDS,
    EARLY_CANCELS_PER_CALLER,
    EARLY_CANCELS_PER_SESSION,
    CallsInFlight,
    request_key,
)
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
CANCEL_TOOLS = Path(__file__).parent.parent / "api" / "cancel_tools.py"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def _call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _cancel(request_id: int) -> dict[str, Any]:
    params = {"requestId": request_id, "reason": "changed my mind"}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


@asynccontextmanager
async def _mcp_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *tool_modules: Path
) -> AsyncIterator[tuple[Runtime, ASGIApp]]:
    """A runtime with the cancel test's tools (and ``tool_modules``), and its ``/mcp`` app.

    (Not a fixture: the SDK's session manager must be left in the task it was entered in.)
    """
    monkeypatch.setenv("CANCEL_DIR", str(tmp_path))
    modules = [str(module) for module in (CANCEL_TOOLS, *tool_modules)]
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, tool_modules=modules)
    async with open_runtime(settings) as runtime, mcp_http_app(runtime, ApiKeyVerifier({})) as app:
        yield runtime, app


@asynccontextmanager
async def _served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    """A runtime with the cancel test's tools, and an HTTP client of its ``/mcp`` (in-process)."""
    async with _mcp_app(tmp_path, monkeypatch) as (runtime, app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", timeout=60
        ) as client:
            yield runtime, client


async def _session(http: httpx.AsyncClient) -> dict[str, str]:
    opened = await http.post("/mcp", json=INITIALIZE, headers=HEADERS)
    assert opened.status_code == 200, opened.text
    return {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"]}


def _paid(tmp_path: Path) -> list[str]:
    paid = tmp_path / "paid"
    return paid.read_text().split() if paid.exists() else []


async def test_a_cancel_that_comes_before_its_call_stops_it_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _served(tmp_path, monkeypatch) as (_, http):
        session = await _session(http)
        accepted = await http.post("/mcp", json=_cancel(3), headers=session)
        called = await http.post("/mcp", json=_call(3, "pay", {"invoice": 3}), headers=session)
        # Another client's call of the same id is not its to cancel; nor is a later call.
        other = await _session(http)
        theirs = await http.post("/mcp", json=_call(3, "pay", {"invoice": 30}), headers=other)
        later = await http.post("/mcp", json=_call(4, "pay", {"invoice": 4}), headers=session)
    assert accepted.status_code == 202
    assert _paid(tmp_path) == ["30", "4"]  # invoice 3 was never paid
    assert called.status_code == 202, called.text
    assert called.content == b""
    assert theirs.json()["result"]["isError"] is False, theirs.text
    assert later.json()["result"]["content"][0]["text"] == json.dumps("paid 4")


async def test_a_cancel_that_comes_while_the_call_is_on_its_way_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review's case: the call was read, but had not reached its tool yet."""
    answers: list[httpx.Response] = []
    async with _served(tmp_path, monkeypatch) as (runtime, http):
        session = await _session(http)
        reached, go_on = anyio.Event(), anyio.Event()
        check = runtime.workflows.sync.check

        async def slow_sync() -> None:  # the sync's database round trip, on a busy host
            reached.set()
            await go_on.wait()
            await check()

        monkeypatch.setattr(runtime.workflows.sync, "check", slow_sync)
        async with anyio.create_task_group() as group:

            async def post() -> None:
                call = _call(5, "pay", {"invoice": 5})
                answers.append(await http.post("/mcp", json=call, headers=session))

            group.start_soon(post)
            with anyio.fail_after(30):
                await reached.wait()
            accepted = await http.post("/mcp", json=_cancel(5), headers=session)
            go_on.set()
    assert accepted.status_code == 202
    assert _paid(tmp_path) == []  # the tool never ran
    assert answers[0].status_code == 202, answers[0].text
    assert answers[0].content == b""


async def test_a_call_cancelled_while_it_runs_is_not_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers: list[httpx.Response] = []
    async with _served(tmp_path, monkeypatch) as (_, http):
        session = await _session(http)
        async with anyio.create_task_group() as group:

            async def post() -> None:
                call = _call(6, "slow", {})
                answers.append(await http.post("/mcp", json=call, headers=session))

            group.start_soon(post)
            with anyio.fail_after(30):
                while not (tmp_path / "slow-started").exists():  # noqa: ASYNC110 - the tool's
                    await anyio.sleep(0.02)
            accepted = await http.post("/mcp", json=_cancel(6), headers=session)
        # The session goes on: the next call is answered as ever.
        after = await http.post("/mcp", json=_call(7, "pay", {"invoice": 7}), headers=session)
    assert accepted.status_code == 202
    # MCP: no answer for a cancelled request (not a tool error saying it was cancelled).
    assert answers[0].status_code == 202, answers[0].text
    assert answers[0].content == b""
    assert after.json()["result"]["content"][0]["text"] == json.dumps("paid 7")


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _starts_cancelled(calls: CallsInFlight, key: object) -> bool:
    with calls.running(key) as scope:
        return scope.cancel_called


async def test_an_early_cancel_is_kept_a_short_while_and_used_once() -> None:
    clock = _Clock()
    calls = CallsInFlight(clock)
    ann = ("acme", "ann", "k1")
    calls.cancel(request_key(ann, "s1", 1), keep=True)
    calls.cancel(request_key(ann, "s1", 2), keep=True)
    calls.cancel(request_key(ann, "s1", 3))  # not to be kept (a closed connection's)
    assert _starts_cancelled(calls, request_key(ann, "s1", 1))
    assert not _starts_cancelled(calls, request_key(ann, "s1", 1))  # used up
    assert not _starts_cancelled(calls, request_key(ann, "s2", 2))  # another session
    assert not _starts_cancelled(calls, request_key(ann, "s1", "2"))  # another id
    assert not _starts_cancelled(calls, request_key(ann, "s1", 3))
    clock.now += EARLY_CANCEL_SECONDS
    assert not _starts_cancelled(calls, request_key(ann, "s1", 2))  # too old


async def test_early_cancels_are_bounded_per_session_and_per_caller() -> None:
    calls = CallsInFlight(_Clock())
    ann = ("acme", "ann", "k1")
    for request_id in range(EARLY_CANCELS_PER_SESSION + 5):
        calls.cancel(request_key(ann, "busy", request_id), keep=True)
    assert _starts_cancelled(calls, request_key(ann, "busy", 0))
    assert not _starts_cancelled(calls, request_key(ann, "busy", EARLY_CANCELS_PER_SESSION))
    for number in range(EARLY_CANCELS_PER_CALLER):
        calls.cancel(request_key(ann, f"s{number}", 1), keep=True)
    assert not _starts_cancelled(calls, request_key(ann, "busy", 1))  # the oldest went
    assert _starts_cancelled(calls, request_key(ann, f"s{EARLY_CANCELS_PER_CALLER - 1}", 1))


async def test_one_callers_cancels_never_evict_another_callers_early_cancel() -> None:
    """Session ids are the client's word: made-up ones must not push out another org's cancel."""
    calls = CallsInFlight(_Clock())
    bob = request_key(("org-b", "bob", "key-b"), "sess-b", 7)
    calls.cancel(bob, keep=True)  # org B's cancel came before its call 7
    eve = ("org-a", "eve", "key-a")
    for session in range(64):  # 4,096 cancels under 64 made-up sessions
        for request_id in range(EARLY_CANCELS_PER_SESSION):
            calls.cancel(request_key(eve, f"fake-{session}", request_id), keep=True)
    assert _starts_cancelled(calls, bob)  # B's call still never runs
    assert _starts_cancelled(calls, request_key(eve, "fake-63", 63))  # her newest are kept
    assert not _starts_cancelled(calls, request_key(eve, "fake-0", 0))  # her oldest went


BATCH_VERSION = {"MCP-Protocol-Version": "2025-03-26"}


async def test_a_batchs_own_cancel_stops_its_call_as_over_stdio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review's case: the cancel came on the call's heels, while it was on its way."""
    async with _served(tmp_path, monkeypatch) as (_, http):
        session = {**await _session(http), **BATCH_VERSION}
        batch = [_call(1, "pay", {"invoice": 1}), _cancel(1)]
        answered = await http.post("/mcp", json=batch, headers=session)
        # A later call of another id in the same session is not cancelled by it.
        later = await http.post("/mcp", json=[_call(2, "pay", {"invoice": 2})], headers=session)
    assert _paid(tmp_path) == ["2"]  # invoice 1 was never paid, as the client was told
    assert answered.status_code == 202, answered.text
    assert answered.content == b""
    assert later.json()[0]["result"]["content"][0]["text"] == json.dumps("paid 2")


@asynccontextmanager
async def _logged(caplog: pytest.LogCaptureFixture) -> AsyncIterator[None]:
    """Capture ``/mcp``'s log: once Aptix configures logging, ``aptix`` does not propagate."""
    logger = logging.getLogger("aptix.mcp.http")
    logger.addHandler(caplog.handler)
    try:
        yield
    finally:
        logger.removeHandler(caplog.handler)


def _cancel_of(request_id: object) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id},
    }


async def test_a_cancel_kept_for_its_call_is_small_and_others_never_take_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Review r6 F3: each kept cancel held its whole id (a megabyte, say), whatever its type."""
    longest = "x" * EARLY_CANCEL_ID_CHARS
    async with _logged(caplog), _served(tmp_path, monkeypatch) as (_, http):
        session = await _session(http)
        # A session's worth of cancels no call can have (MCP: an id is a string or an
        # integer), or too long to keep: none is kept, so none takes a kept cancel's place.
        unkeepable: list[object] = [True, False, None]
        for number in range(EARLY_CANCELS_PER_SESSION):
            unkeepable += [f"{longest}{number}", 10**EARLY_CANCEL_ID_CHARS + number, number + 0.5]
            unkeepable += [{"id": number}, [number]]
        for request_id in unkeepable:
            accepted = await http.post("/mcp", json=_cancel_of(request_id), headers=session)
            assert accepted.status_code == 202, accepted.text
        await http.post("/mcp", json=_cancel(3), headers=session)
        await http.post("/mcp", json=_call(3, "pay", {"invoice": 3}), headers=session)
        # The longest id kept is EARLY_CANCEL_ID_CHARS characters; one longer runs.
        for request_id, invoice in ((longest, 4), (longest + "y", 5)):
            await http.post("/mcp", json=_cancel_of(request_id), headers=session)
            call = _call(0, "pay", {"invoice": invoice}) | {"id": request_id}
            await http.post("/mcp", json=call, headers=session)
        # So is the longest session id: the session's id is the client's own text.
        for length, invoice in ((EARLY_CANCEL_ID_CHARS, 6), (EARLY_CANCEL_ID_CHARS + 1, 7)):
            own = {**HEADERS, "Mcp-Session-Id": "s" * length}
            await http.post("/mcp", json=_cancel(8), headers=own)
            await http.post("/mcp", json=_call(8, "pay", {"invoice": invoice}), headers=own)
    assert _paid(tmp_path) == ["5", "7"]
    told = [r.getMessage() for r in caplog.records if r.name == "aptix.mcp.http"]
    assert len(told) == 1, told  # logged once, however many came
    assert str(EARLY_CANCEL_ID_CHARS) in told[0]
