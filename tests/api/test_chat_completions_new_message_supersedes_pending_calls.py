"""A new user message on the OpenAI-compatible endpoint supersedes the calls left unanswered.

A chat client that does not run tools (the ``llm`` CLI, chat UIs) never sends ``tool``
messages: its next message closes the pending calls as not run and runs. The native
``POST /v1/agent/execute`` still refuses a new instruction while calls are pending.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner.call_states import NOT_ANSWERED
from aptix.runtime import Runtime
from aptix.testing import FunctionModel, call, reply
from tests.api.conftest import A


def answer(request: LlmRequest) -> LlmResponse:
    """Asks for approval first; afterwards echoes the last user message."""
    last = request.messages[-1]
    if last["role"] == "user" and "delete" in str(last["content"]):
        return reply(None, call("request_user_approval", {"prompt": "Delete all?"}, id="ap1"))
    return reply(f"echo: {str(last['content']).splitlines()[-1]}")


@pytest.fixture
def model() -> FunctionModel:
    return FunctionModel(answer)


@pytest.fixture
async def http(keyed_runtime: Runtime, model: FunctionModel) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=keyed_runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test/v1", headers=A) as c:
        yield c


async def _handed_over(client: AsyncOpenAI) -> tuple[str, list[dict[str, Any]]]:
    """A first message whose answer hands a call to the client; its session and messages."""
    first: list[dict[str, Any]] = [{"role": "user", "content": "delete all files"}]
    raw = await client.chat.completions.with_raw_response.create(
        model="aptix-general",
        messages=first,  # type: ignore[arg-type]
    )
    message = raw.parse().choices[0].message
    assert message.tool_calls
    assert message.tool_calls[0].id == "ap1"
    return raw.headers["x-aptix-session"], [*first, message.model_dump(exclude_none=True)]


async def test_a_new_message_closes_the_unanswered_calls_and_runs(
    http: httpx.AsyncClient, model: FunctionModel
) -> None:
    client = AsyncOpenAI(api_key="key-a", base_url="http://test/v1", http_client=http)
    session_id, earlier = await _handed_over(client)
    completion = await client.chat.completions.create(
        model="aptix-general",
        messages=[*earlier, {"role": "user", "content": "never mind, say hi"}],
        extra_headers={"X-Aptix-Session": session_id},
    )
    assert completion.choices[0].message.content == "echo: never mind, say hi"
    # The model read that the call was not run, then the new message.
    told = model.requests[-1].messages
    [closed] = [m for m in told if m["role"] == "tool"]
    assert closed["tool_call_id"] == "ap1"
    assert json.loads(closed["content"]) == {"error": NOT_ANSWERED}
    assert told[-1] == {"role": "user", "content": "never mind, say hi"}
    stored = (await http.get(f"/sessions/{session_id}")).json()
    superseded, ran = stored["turns"]
    assert superseded["status"] == "cancelled"
    [call_] = superseded["toolCalls"]
    assert (call_["outcome"], call_["wasExecuted"]) == ("failed", False)
    assert ran["status"] == "completed"


async def test_the_native_endpoint_still_refuses_a_new_instruction(
    http: httpx.AsyncClient,
) -> None:
    client = AsyncOpenAI(api_key="key-a", base_url="http://test/v1", http_client=http)
    session_id, _ = await _handed_over(client)
    refused = await http.post(
        "/agent/execute", json={"sessionId": session_id, "instruction": "never mind"}
    )
    assert refused.status_code == 409, refused.text
    assert "ap1" in refused.json()["error"]["message"]
