"""What a turn's client is told when the server stops under it: uvicorn run in-process.

Past its graceful drain uvicorn cancels the requests still running; sse-starlette closes the
streams as soon as the server starts stopping. Either way the client gets the error envelope
(503 ``shutting_down``), not a bare 500 or a stream that just ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import uvicorn

from aptix.api import create_app, shutdown
from aptix.cli.stopping_server import StoppingServer
from aptix.db.types import utc_now
from aptix.llm import LlmRequest, LlmResponse
from aptix.reasoner import stopping
from aptix.runtime import Runtime
from aptix.testing import FunctionModel, call, reply


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def _serving(
    runtime: Runtime, model: FunctionModel, graceful: int
) -> AsyncIterator[tuple[StoppingServer, httpx.AsyncClient]]:
    """``aptix serve``'s server on a free port, stopped (as SIGTERM does) by the test."""
    app = create_app(runtime=runtime, model=model)
    port = _free_port()
    config = uvicorn.Config(app, port=port, timeout_graceful_shutdown=graceful, log_config=None)
    server = StoppingServer(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        assert not serving.done(), serving
        await asyncio.sleep(0.02)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield server, client
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 30)


def _model(asked: asyncio.Event, seconds: float) -> FunctionModel:
    """Asks for a calculation, then thinks ``seconds`` before answering."""

    async def answer(request: LlmRequest) -> LlmResponse:
        if not any(m.get("role") == "tool" for m in request.messages):
            return reply(None, call("agent_calculator", {"expression": "1+1"}, id="c1"))
        asked.set()
        await asyncio.sleep(seconds)
        return reply("Two.")

    return FunctionModel(answer)


async def _events(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    async with client.stream("POST", "/v1/agent/execute", json=body) as response:
        assert response.status_code == 200
        kind = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((kind, json.loads(line.removeprefix("data: "))))
    return events


async def _stop_while(
    server: StoppingServer, asked: asyncio.Event, request: Callable[[], Coroutine[Any, Any, Any]]
) -> Any:
    """Run ``request`` and stop the server (as SIGTERM does) once the model thinks."""
    answer = asyncio.create_task(request())
    await asyncio.wait_for(asked.wait(), 30)
    server.should_exit = True
    return await asyncio.wait_for(answer, 30)


@pytest.fixture(autouse=True)
def _process_not_stopping(monkeypatch: pytest.MonkeyPatch) -> None:
    # stop_process() marks the whole process: the other tests' turns must not read it.
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})


async def test_a_turn_cut_short_past_the_drain_answers_503_shutting_down(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    asked = asyncio.Event()
    async with _serving(runtime, _model(asked, 60), graceful=1) as (server, client):
        sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]
        body = {"sessionId": sid, "instruction": "add"}
        with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
            answer = await _stop_while(
                server, asked, lambda: client.post("/v1/agent/execute", json=body)
            )
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["retry-after"] == "5"
    error = answer.json()["error"]
    assert error["code"] == "shutting_down"
    assert "Send the request again" in error["message"]
    assert not [r for r in caplog.records if r.exc_info], "uvicorn logged a traceback"
    [turn] = await runtime.turns.list_turns(sid, "local")
    # Left as a crash leaves it: the next request takes it over at once.
    assert turn.status == "running"
    assert turn.lease_until is not None
    assert turn.lease_until <= utc_now()


async def test_a_streamed_turn_cut_short_by_the_shutdown_ends_with_the_error_event(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutdown, "STREAM_DRAIN_SECONDS", 0.3)
    monkeypatch.setattr(shutdown, "STREAM_GRACE_SECONDS", 10)
    asked = asyncio.Event()
    async with _serving(runtime, _model(asked, 60), graceful=20) as (server, client):
        sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]
        body = {"sessionId": sid, "instruction": "add", "stream": True}
        events = await _stop_while(server, asked, lambda: _events(client, body))
    assert [kind for kind, _ in events] == [
        "tool_call_started",
        "tool_call_finished",
        "turn_finished",
    ]
    assert events[-1][1]["error"]["code"] == "shutting_down"
    [turn] = await runtime.turns.list_turns(sid, "local")
    assert turn.status == "running"  # cut short, not cancelled: a retry takes it over
    assert [c["callId"] for c in turn.tool_calls] == ["c1"]


async def test_a_streamed_turn_finishing_within_the_drain_ends_as_usual(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sse-starlette closes streams as soon as the server starts stopping; the turn still gets
    # the drain a plain request gets.
    monkeypatch.setattr(shutdown, "STREAM_DRAIN_SECONDS", 15)
    monkeypatch.setattr(shutdown, "STREAM_GRACE_SECONDS", 20)
    asked = asyncio.Event()
    async with _serving(runtime, _model(asked, 1), graceful=25) as (server, client):
        sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]
        body = {"sessionId": sid, "instruction": "add", "stream": True}
        events = await _stop_while(server, asked, lambda: _events(client, body))
    kind, finished = events[-1]
    assert (kind, finished["kind"], finished["text"]) == ("turn_finished", "ok", "Two.")
    [turn] = await runtime.turns.list_turns(sid, "local")
    assert turn.status == "completed"
