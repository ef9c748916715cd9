"""A model's refusal reaches the client as OpenAI sends it: ``message.refusal``, no content.

Review r4 F4: the refusal was dropped, so a strict format answered 422 "is not JSON" and any
other an empty answer. Both hops are the real ``openai`` client: the SDK drives Aptix in
process, and Aptix's model is ``OpenAiLlmClient`` over HTTP to the scripted server, which
answers with ``message.refusal`` (streamed as ``delta.refusal``; in the Responses API a
``refusal`` content part).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel

from aptix.api import create_app
from aptix.llm.openai_client import OpenAiLlmClient
from aptix.runtime import Runtime
from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.conftest import A

ASK: list[Any] = [{"role": "user", "content": "The weather in Oslo, as JSON."}]
NO = "I'm sorry, I can't help with that."


class Weather(BaseModel):
    city: str
    celsius: int


@pytest.fixture
def provider() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture(params=["chat", "responses"])
async def client(
    request: pytest.FixtureRequest, keyed_runtime: Runtime, provider: ScriptedOpenAIServer
) -> AsyncIterator[AsyncOpenAI]:
    model = OpenAiLlmClient(
        base_url=provider.base_url, api_key=None, model="m-1", api=request.param, max_retries=0
    )
    app = create_app(runtime=keyed_runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test/v1", headers=A) as h:
        yield AsyncOpenAI(api_key="key-a", base_url="http://test/v1", http_client=h, max_retries=0)
    await model.close()


async def test_parse_reports_the_refusal_of_a_strict_format(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply(None, refusal=NO))
    completion = await client.chat.completions.parse(
        model="aptix-general", messages=ASK, response_format=Weather
    )
    message = completion.choices[0].message
    assert (message.refusal, message.parsed, message.content) == (NO, None, None)
    assert completion.choices[0].finish_reason == "stop"


async def test_a_streamed_refusal_comes_as_delta_refusal(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply(None, refusal=NO))
    async with client.chat.completions.stream(
        model="aptix-general", messages=ASK, response_format=Weather
    ) as stream:
        events = [e async for e in stream]
        completion = await stream.get_final_completion()
    assert [e.refusal for e in events if e.type == "refusal.done"] == [NO]
    assert "".join(e.delta for e in events if e.type == "content.delta") == ""
    message = completion.choices[0].message
    assert (message.refusal, message.parsed) == (NO, None)


@pytest.mark.parametrize("answer_format", [{"type": "json_object"}, None])
async def test_the_refusal_is_passed_on_without_a_strict_format(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer, answer_format: Any
) -> None:
    provider.add(reply(None, refusal=NO))
    extra = {} if answer_format is None else {"response_format": answer_format}
    completion = await client.chat.completions.create(model="aptix-general", messages=ASK, **extra)
    message = completion.choices[0].message
    assert (message.refusal, message.content) == (NO, None)


async def test_the_next_model_call_reads_the_refusal_as_what_the_model_said(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply(None, refusal=NO), reply("Fine: 4 degrees."))
    first = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=ASK
    )
    session = first.headers["x-aptix-session"]
    await client.chat.completions.create(
        model="aptix-general",
        messages=[{"role": "user", "content": "Just the temperature, then."}],
        extra_headers={"x-aptix-session": session},
    )
    sent = provider.requests[1]
    if provider.paths[1] == "/v1/chat/completions":
        said = [m for m in sent["messages"] if m["role"] == "assistant"]
        assert said == [{"role": "assistant", "content": NO}]  # no "refusal" key
    else:
        assert {"role": "assistant", "content": NO} in sent["input"]
