"""What a Chat Completions client is told when the server stops under its turn.

uvicorn run in-process, as in test_shutdown_answers: past the drain a plain request answers
503 ``shutting_down`` in OpenAI's error shape, and a stream ends with that error chunk and
``[DONE]``, not a bare 500 or a stream that just stops.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest

from aptix.api import shutdown
from aptix.reasoner import stopping
from aptix.runtime import Runtime
from tests.api.test_shutdown_answers import _model, _serving, _stop_while


@pytest.fixture(autouse=True)
def _process_not_stopping(monkeypatch: pytest.MonkeyPatch) -> None:
    # stop_process() marks the whole process: the other tests' turns must not read it.
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})


def _ask(stream: bool = False) -> dict[str, Any]:
    return {
        "model": "aptix-general",
        "messages": [{"role": "user", "content": "add"}],
        "stream": stream,
    }


async def _chunks(client: httpx.AsyncClient) -> tuple[str, list[Any]]:
    """The session and every ``data`` line of a streamed completion (JSON but ``[DONE]``)."""
    chunks: list[Any] = []
    async with client.stream("POST", "/v1/chat/completions", json=_ask(stream=True)) as response:
        assert response.status_code == 200
        sid = response.headers["x-aptix-session"]
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                chunks.append(data if data == "[DONE]" else json.loads(data))
    return sid, chunks


async def test_a_completion_cut_short_past_the_drain_answers_an_openai_503(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    asked = asyncio.Event()
    async with _serving(runtime, _model(asked, 60), graceful=1) as (server, client):
        with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
            answer = await _stop_while(
                server, asked, lambda: client.post("/v1/chat/completions", json=_ask())
            )
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["retry-after"] == "5"
    sid = answer.headers["x-aptix-session"]
    error = answer.json()["error"]
    assert (error["code"], error["type"], error["param"]) == ("shutting_down", "api_error", None)
    assert "Send the request again" in error["message"]
    assert not [r for r in caplog.records if r.exc_info], "uvicorn logged a traceback"
    [turn] = await runtime.turns.list_turns(sid, "local")
    assert turn.status == "running"  # left as a crash leaves it: a retry takes it over
    assert [c["callId"] for c in turn.tool_calls] == ["c1"]


async def test_a_streamed_completion_cut_short_ends_with_the_error_chunk(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutdown, "STREAM_DRAIN_SECONDS", 0.3)
    monkeypatch.setattr(shutdown, "STREAM_GRACE_SECONDS", 10)
    asked = asyncio.Event()
    async with _serving(runtime, _model(asked, 60), graceful=20) as (server, client):
        sid, chunks = await _stop_while(server, asked, lambda: _chunks(client))
    *_, last, done = chunks
    assert done == "[DONE]"
    error = last["error"]
    assert (error["code"], error["type"], error["param"]) == ("shutting_down", "api_error", None)
    assert "Send the request again" in error["message"]
    [turn] = await runtime.turns.list_turns(sid, "local")
    assert turn.status == "running"  # cut short, not cancelled: a retry takes it over


async def test_a_streamed_completion_finishing_within_the_drain_ends_as_usual(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutdown, "STREAM_DRAIN_SECONDS", 15)
    monkeypatch.setattr(shutdown, "STREAM_GRACE_SECONDS", 20)
    asked = asyncio.Event()
    async with _serving(runtime, _model(asked, 1), graceful=25) as (server, client):
        sid, chunks = await _stop_while(server, asked, lambda: _chunks(client))
    *_, last, done = chunks
    assert done == "[DONE]"
    assert last["choices"][0]["finish_reason"] == "stop"
    [turn] = await runtime.turns.list_turns(sid, "local")
    assert (turn.status, turn.text) == ("completed", "Two.")
