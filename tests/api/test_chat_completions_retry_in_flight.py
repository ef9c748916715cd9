"""The same request sent again (an SDK's retry) never starts a second session or turn.

The ``openai`` client retries a request that timed out or failed with an identical body. A
first message has no earlier conversation to find its session by, so without care every
attempt would start a session and run the instruction again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from aptix.api import create_app
from aptix.errors import LlmError
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import Runtime
from aptix.testing import FunctionModel, call, reply
from tests.api.conftest import A

HEADER = "X-Aptix-Session"
ASK = {
    "model": "aptix-general",
    "messages": [{"role": "user", "content": "say hello to the world"}],
}


class Slow:
    """Calls ``agent_hello_world``, then answers once released; fails on "fail"."""

    def __init__(self) -> None:
        self.released = asyncio.Event()
        self.started = asyncio.Event()
        self.calls = 0

    async def answer(self, request: LlmRequest) -> LlmResponse:
        last = request.messages[-1]
        if "fail" in str(last["content"]):
            raise LlmError("The model endpoint answered HTTP 500: boom")
        if last["role"] == "tool":
            await self.released.wait()
            return reply("Done.")
        self.calls += 1
        self.started.set()
        return reply(None, call("agent_hello_world", {"name": "world"}))


@pytest.fixture
def slow() -> Slow:
    return Slow()


@pytest.fixture
async def http(keyed_runtime: Runtime, slow: Slow) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=keyed_runtime, model=FunctionModel(slow.answer))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test/v1", headers=A) as c:
        yield c


async def test_the_same_request_while_its_turn_runs_is_refused_busy(
    http: httpx.AsyncClient, slow: Slow
) -> None:
    first = asyncio.create_task(http.post("/chat/completions", json=ASK))
    await asyncio.wait_for(slow.started.wait(), 10)
    try:
        # Bounded: a second turn of the same request would wait for the release too.
        again = await asyncio.wait_for(http.post("/chat/completions", json=ASK), 10)
    finally:
        slow.released.set()
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "session_busy"
    assert int(again.headers["Retry-After"]) >= 1
    answered = await first
    assert answered.status_code == 200
    assert again.headers[HEADER] == answered.headers[HEADER]
    assert slow.calls == 1  # the instruction ran once
    sessions = (await http.get("/sessions")).json()
    assert [s["sessionId"] for s in sessions] == [answered.headers[HEADER]]
    hello = [c for c in answered.json()["aptix"]["toolCalls"] if c["name"] == "agent_hello_world"]
    assert len(hello) == 1


async def test_an_sdk_retrying_a_failed_turn_stays_in_one_session(
    http: httpx.AsyncClient,
) -> None:
    client = AsyncOpenAI(api_key="key-a", base_url="http://test/v1", http_client=http)
    ask: list[Any] = [{"role": "user", "content": "fail please"}]
    with pytest.raises(openai.InternalServerError):
        await client.with_options(max_retries=2).chat.completions.create(
            model="aptix-general", messages=ask
        )
    sessions = (await http.get("/sessions")).json()
    assert len(sessions) == 1
    turns = (await http.get(f"/sessions/{sessions[0]['sessionId']}")).json()["turns"]
    assert [t["status"] for t in turns] == ["error"] * 3
