"""A streamed answer is the conversation the client holds: its next message continues it.

The real ``openai`` client streams from the app in process (``httpx.ASGITransport``); the
model behind Aptix speaks, calls a server tool, then speaks again within one turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import Runtime
from aptix.testing import FunctionModel, call, reply
from tests.api.conftest import A

HEADER = "x-aptix-session"


def answer(request: LlmRequest) -> LlmResponse:
    """Says something, computes with a server tool, then answers with its result."""
    last = request.messages[-1]
    if last["role"] == "tool":
        if "mode" in str(last["content"]):
            return reply("Now in calculation.")
        return reply("Six times seven is 42." if '"42"' in str(last["content"]) else "Failed.")
    text = str(last["content"])
    if "switch" in text:
        return reply(
            None,
            call("agent_change_mode", {"mode": "calculation", "branch": False, "reason": "math"}),
        )
    if "compute" in text:
        return reply("Let me compute.", call("agent_calculator", {"expression": "6*7"}))
    return reply(f"echo: {text.splitlines()[-1]}")


@pytest.fixture
async def client(keyed_runtime: Runtime) -> AsyncIterator[AsyncOpenAI]:
    app = create_app(runtime=keyed_runtime, model=FunctionModel(answer))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test/v1", headers=A) as h:
        yield AsyncOpenAI(api_key="key-a", base_url="http://test/v1", http_client=h, max_retries=0)


async def _streamed(client: AsyncOpenAI, messages: list[Any]) -> tuple[str, str, list[str]]:
    """The content the SDK assembles, the session, and the model of every chunk."""
    raw = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=messages, stream=True
    )
    content, models = "", []
    async for chunk in raw.parse():
        models.append(chunk.model)
        if chunk.choices:
            content += chunk.choices[0].delta.content or ""
    return content, raw.headers[HEADER], models


async def test_a_streamed_answer_continues_its_session(client: AsyncOpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "compute six times seven"}]
    content, session, _ = await _streamed(client, messages)
    assert content == "Let me compute.\n\nSix times seven is 42."
    messages += [
        {"role": "assistant", "content": content},
        {"role": "user", "content": "and then?"},
    ]
    again, next_session, _ = await _streamed(client, messages)
    assert next_session == session
    assert again == "echo: and then?"  # not the conversation quoted as a new session's context


async def test_the_plain_answer_says_what_the_stream_says(client: AsyncOpenAI) -> None:
    streamed, _, _ = await _streamed(client, [{"role": "user", "content": "compute, streamed"}])
    # Another conversation: two sessions holding the same one would continue neither.
    ask = [{"role": "user", "content": "compute it"}]
    raw = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=list(ask)
    )
    plain = raw.parse().choices[0].message.content
    assert plain == streamed
    continued = await client.chat.completions.with_raw_response.create(
        model="aptix-general",
        messages=[*ask, {"role": "assistant", "content": plain}, {"role": "user", "content": "ok"}],
    )
    assert continued.headers[HEADER] == raw.headers[HEADER]


async def test_every_chunk_names_the_mode_it_is_sent_in(client: AsyncOpenAI) -> None:
    content, _, models = await _streamed(client, [{"role": "user", "content": "switch please"}])
    assert content == "Now in calculation."
    # Sent before the agent changed the mode, then after: never the requested model again.
    assert models[0] == "aptix-general"
    switched = models.index("aptix-calculation")
    assert set(models[switched:]) == {"aptix-calculation"}
    assert len(models) - switched >= 3  # the mode_changed chunk, the text, the last chunk
