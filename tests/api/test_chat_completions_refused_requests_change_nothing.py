"""A refused ``POST /v1/chat/completions`` writes nothing, and its 409s name the session.

Driven over HTTP (``httpx.ASGITransport``) and with the real ``openai`` client; two users of
one org (``ann`` and ``carl``) share the deployment.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply

ANN = {"Authorization": "Bearer key-ann"}
CARL = {"Authorization": "Bearer key-carl"}
HEADER = "X-Aptix-Session"


class Gate:
    """A model whose turns on "wait" hold until released."""

    def __init__(self) -> None:
        self.released = asyncio.Event()
        self.waiting = asyncio.Event()

    async def answer(self, request: LlmRequest) -> LlmResponse:
        text = str(request.messages[-1]["content"])
        if "approve" in text:
            return reply(None, call("request_user_approval", {"prompt": "Deploy?"}, id="ap1"))
        if "wait" in text:
            self.waiting.set()
            await self.released.wait()
        return reply(f"echo: {text.splitlines()[-1]}")


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
async def http(tmp_path: Path, gate: Gate) -> AsyncIterator[httpx.AsyncClient]:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, api_keys="key-ann=acme:ann,key-carl=acme:carl"
    )
    runtime: Runtime
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=FunctionModel(gate.answer))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test/v1", headers=ANN
        ) as client:
            yield client


def _ask(text: str, model: str = "aptix-general", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], **extra}


async def _session(http: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    response = await http.get(f"/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_another_users_session_id_switches_nothing(http: httpx.AsyncClient) -> None:
    first = await http.post("/chat/completions", json=_ask("mine"))
    session_id = first.headers[HEADER]
    refused = await http.post(
        "/chat/completions",
        headers={**CARL, HEADER: session_id},
        json=_ask("take it over", "aptix-calculation"),
    )
    assert refused.status_code == 404
    assert refused.json()["error"]["type"] == "not_found_error"
    session = await _session(http, session_id)
    assert session["mode"] == "general"
    assert session["modeHistory"] == []


async def test_a_busy_session_refuses_before_its_mode_is_switched(
    http: httpx.AsyncClient, gate: Gate
) -> None:
    first = await http.post("/chat/completions", json=_ask("start"))
    session_id = first.headers[HEADER]
    running = asyncio.create_task(
        http.post("/chat/completions", headers={HEADER: session_id}, json=_ask("wait for it"))
    )
    await asyncio.wait_for(gate.waiting.wait(), 10)
    busy = await http.post(
        "/chat/completions", headers={HEADER: session_id}, json=_ask("now", "aptix-calculation")
    )
    assert busy.status_code == 409
    assert busy.json()["error"]["code"] == "session_busy"
    assert busy.headers[HEADER] == session_id
    assert int(busy.headers["Retry-After"]) >= 1
    assert (await _session(http, session_id))["mode"] == "general"
    gate.released.set()
    answered = await running
    assert answered.status_code == 200
    assert answered.json()["model"] == "aptix-general"
    session = await _session(http, session_id)
    assert (session["mode"], session["modeHistory"]) == ("general", [])


async def test_a_model_picked_with_the_next_instruction_switches_the_mode(
    http: httpx.AsyncClient,
) -> None:
    first = await http.post("/chat/completions", json=_ask("start"))
    session_id = first.headers[HEADER]
    switched = await http.post(
        "/chat/completions", headers={HEADER: session_id}, json=_ask("go", "aptix-calculation")
    )
    assert switched.status_code == 200
    assert switched.json()["model"] == "aptix-calculation"
    assert switched.json()["aptix"]["mode"] == "calculation"
    session = await _session(http, session_id)
    assert session["mode"] == "calculation"
    assert len(session["modeHistory"]) == 1


TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
CLASHING = {"type": "function", "function": {"name": "agent_calculator"}}


async def test_client_tools_refused_create_no_session(http: httpx.AsyncClient) -> None:
    for tools in ([TOOL, TOOL], [CLASHING]):
        refused = await http.post("/chat/completions", json=_ask("weather?", tools=tools))
        assert refused.status_code == 400, refused.text
        assert HEADER not in refused.headers
    assert (await http.get("/sessions")).json() == []


async def test_client_tools_refused_switch_no_mode(http: httpx.AsyncClient) -> None:
    first = await http.post("/chat/completions", json=_ask("start"))
    session_id = first.headers[HEADER]
    refused = await http.post(
        "/chat/completions",
        headers={HEADER: session_id},
        json=_ask("weather?", "aptix-calculation", tools=[CLASHING]),
    )
    assert refused.status_code == 400
    session = await _session(http, session_id)
    assert (session["mode"], session["modeHistory"]) == ("general", [])


async def test_conflicts_of_a_session_carry_its_header(http: httpx.AsyncClient) -> None:
    client = AsyncOpenAI(
        api_key="key-ann", base_url="http://test/v1", http_client=http, max_retries=0
    )
    handed = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=[{"role": "user", "content": "please approve"}]
    )
    session_id = handed.headers[HEADER]
    # A result for a call nobody waits for. (A new user message does not conflict: it
    # supersedes the calls the client left unanswered.)
    with pytest.raises(openai.ConflictError) as refused:
        await client.chat.completions.create(
            model="aptix-general",
            messages=[{"role": "tool", "tool_call_id": "nope", "content": "yes"}],
            extra_headers={HEADER: session_id},
        )
    assert refused.value.response.headers[HEADER] == session_id


async def test_a_blank_message_creates_no_session(http: httpx.AsyncClient) -> None:
    refused = await http.post("/chat/completions", json=_ask("\ufeff \u3000"))
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_request_error"
    assert (await http.get("/sessions")).json() == []
