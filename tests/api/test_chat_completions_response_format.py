"""``response_format`` on ``POST /v1/chat/completions``: structured answers from the provider.

Both hops are the real ``openai`` client: the SDK's ``chat.completions.parse`` and ``stream``
helpers drive Aptix in process, and Aptix's model is ``OpenAiLlmClient`` over HTTP to the
scripted OpenAI-compatible server, which records what it was asked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel

from aptix.api import create_app
from aptix.llm.openai_client import OpenAiLlmClient
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.conftest import KEYS, A

HEADER = "x-aptix-session"
ASK: list[Any] = [{"role": "user", "content": "The weather in Oslo, as JSON."}]
OSLO = '{"city": "Oslo", "celsius": 4}'


class Weather(BaseModel):
    city: str
    celsius: int


#: What ``parse(response_format=Weather)`` sends.
STRICT_WEATHER: Any = {
    "type": "json_schema",
    "json_schema": {
        "name": "Weather",
        "schema": Weather.model_json_schema() | {"additionalProperties": False},
        "strict": True,
    },
}


class GetWeather(BaseModel):
    """The current weather in a city (a client tool)."""

    city: str


@pytest.fixture
def provider() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


async def _client(runtime: Runtime, model: Any) -> AsyncIterator[AsyncOpenAI]:
    app = create_app(runtime=runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test/v1", headers=A) as h:
        yield AsyncOpenAI(api_key="key-a", base_url="http://test/v1", http_client=h, max_retries=0)


@pytest.fixture(params=["chat", "responses"])
async def client(
    request: pytest.FixtureRequest, keyed_runtime: Runtime, provider: ScriptedOpenAIServer
) -> AsyncIterator[AsyncOpenAI]:
    model = OpenAiLlmClient(
        base_url=provider.base_url, api_key=None, model="m-1", api=request.param, max_retries=0
    )
    async for opened in _client(keyed_runtime, model):
        yield opened
    await model.close()


def _asked(provider: ScriptedOpenAIServer, index: int) -> dict[str, Any] | None:
    """The format model request ``index`` asked for, in Chat Completions' shape."""
    body = provider.requests[index]
    if provider.paths[index] == "/v1/chat/completions":
        return body.get("response_format")
    # The Responses API spells it flat, as text.format.
    fmt = (body.get("text") or {}).get("format")
    if fmt is None or fmt["type"] != "json_schema":
        return fmt
    return {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}


async def test_parse_gets_the_providers_structured_answer(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply(OSLO))
    completion = await client.chat.completions.parse(
        model="aptix-general", messages=ASK, response_format=Weather
    )
    assert completion.choices[0].message.parsed == Weather(city="Oslo", celsius=4)
    assert _asked(provider, 0) == STRICT_WEATHER


async def test_server_tools_run_inside_the_turn_and_the_answer_is_the_last_calls_text(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    # Text said beside a tool call is no part of the answer a client parses.
    provider.add(reply("Let me compute.", call("agent_calculator", {"expression": "2+2"})))
    provider.add(reply(OSLO))
    completion = await client.chat.completions.parse(
        model="aptix-general", messages=ASK, response_format=Weather
    )
    message = completion.choices[0].message
    assert (message.content, message.parsed) == (OSLO, Weather(city="Oslo", celsius=4))
    assert completion.choices[0].finish_reason == "stop"
    # Both of the turn's model calls were asked for the format; the tool ran between them.
    assert _asked(provider, 0) == _asked(provider, 1) is not None
    assert len(provider.requests) == 2


async def test_a_streamed_structured_answer(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply("Checking.", call("agent_calculator", {"expression": "2+2"})))
    provider.add(reply(OSLO))
    async with client.chat.completions.stream(
        model="aptix-general", messages=ASK, response_format=Weather
    ) as stream:
        pieces = [e.delta async for e in stream if e.type == "content.delta"]
        completion = await stream.get_final_completion()
    assert "".join(pieces) == OSLO  # the answer alone, not "Checking."
    assert completion.choices[0].message.parsed == Weather(city="Oslo", celsius=4)
    assert _asked(provider, 1) is not None


async def test_a_json_object_answer_passes_through(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply('{"any": "object"}'))
    completion = await client.chat.completions.create(
        model="aptix-general", messages=ASK, response_format={"type": "json_object"}
    )
    assert completion.choices[0].message.content == '{"any": "object"}'
    assert _asked(provider, 0) == {"type": "json_object"}


async def test_free_text_asks_for_no_format(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply("hello"))
    await client.chat.completions.create(
        model="aptix-general", messages=ASK, response_format={"type": "text"}
    )
    # Not sent: an endpoint that knows no response_format still answers such requests.
    assert "response_format" not in provider.requests[0]
    assert "text" not in provider.requests[0]


@pytest.mark.parametrize("resume", ["parse", "stream without response_format"])
async def test_a_resume_after_a_client_tool_keeps_the_turns_format(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer, resume: str
) -> None:
    tools = [openai.pydantic_function_tool(GetWeather)]
    provider.add(reply(None, call("GetWeather", {"city": "Oslo"}, id="w1")))
    provider.add(reply(OSLO))
    first = await client.chat.completions.parse(
        model="aptix-general", messages=ASK, tools=tools, response_format=Weather
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    (handed,) = choice.message.tool_calls
    assert handed.function.parsed_arguments == GetWeather(city="Oslo")
    messages: list[Any] = [
        *ASK,
        choice.message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}),
        {"role": "tool", "tool_call_id": "w1", "content": '{"sky": "clear", "celsius": 4}'},
    ]
    if resume == "parse":
        second = await client.chat.completions.parse(
            model="aptix-general", messages=messages, tools=tools, response_format=Weather
        )
        assert second.choices[0].message.parsed == Weather(city="Oslo", celsius=4)
    else:
        # The turn recorded its format: a resume that names none is still answered in it.
        stream = await client.chat.completions.create(
            model="aptix-general", messages=messages, tools=tools, stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert Weather.model_validate_json(text) == Weather(city="Oslo", celsius=4)
    assert len(provider.requests) == 2
    assert _asked(provider, 1) == _asked(provider, 0) is not None


@pytest.mark.parametrize("stream", [False, True])
async def test_a_hand_off_carries_no_content_though_the_model_said_text_beside_the_call(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer, stream: bool
) -> None:
    # Review r3 F1 (round 68): the text said beside handed-over calls was the content, so
    # parse() raised on it as JSON off the schema and never reached the tool calls.
    tools = [openai.pydantic_function_tool(GetWeather)]
    provider.add(
        reply("Checking the weather first.", call("GetWeather", {"city": "Oslo"}, id="w1"))
    )
    provider.add(reply(OSLO))
    if stream:
        async with client.chat.completions.stream(
            model="aptix-general", messages=ASK, tools=tools, response_format=Weather
        ) as streamed:
            pieces = [e.delta async for e in streamed if e.type == "content.delta"]
            first = await streamed.get_final_completion()
        assert "".join(pieces) == ""
    else:
        first = await client.chat.completions.parse(
            model="aptix-general", messages=ASK, tools=tools, response_format=Weather
        )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert (choice.message.content or None, choice.message.parsed) == (None, None)
    assert choice.message.tool_calls is not None
    (handed,) = choice.message.tool_calls
    assert handed.function.parsed_arguments == GetWeather(city="Oslo")
    messages: list[Any] = [
        *ASK,
        choice.message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}),
        {"role": "tool", "tool_call_id": "w1", "content": '{"sky": "clear", "celsius": 4}'},
    ]
    second = await client.chat.completions.parse(
        model="aptix-general", messages=messages, tools=tools, response_format=Weather
    )
    assert second.choices[0].message.parsed == Weather(city="Oslo", celsius=4)
    # The same session resumed, and the text left out of the answer stayed in it.
    assert len(provider.requests) == 2
    assert "Checking the weather first." in json.dumps(provider.requests[1])


async def test_an_answer_that_is_not_json_fails_a_strict_format(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply("Sure! It is 4 degrees in Oslo."))
    raw = client.chat.completions.with_raw_response
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        await raw.parse(model="aptix-general", messages=ASK, response_format=Weather)
    assert refused.value.code == "response_format_unmet"
    assert "is not JSON" in refused.value.message
    assert "'Weather' is strict" in refused.value.message
    session = refused.value.response.headers[HEADER]
    stored = await client.get(f"/sessions/{session}", cast_to=dict)  # type: ignore[type-var]
    (turn,) = stored["turns"]
    assert (turn["status"], turn["error"]["code"]) == ("error", "response_format_unmet")


async def test_a_streamed_answer_off_the_schema_ends_with_the_error(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply('{"city": "Oslo", "celsius": "four"}'))
    stream = await client.chat.completions.create(
        model="aptix-general",
        messages=ASK,
        stream=True,
        response_format=STRICT_WEATHER,
    )
    texts: list[str] = []

    async def read() -> None:
        async for chunk in stream:
            texts.extend(c.delta.content or "" for c in chunk.choices)

    with pytest.raises(openai.APIError, match=r"does not match the schema .* at \$\.celsius"):
        await read()
    assert "".join(texts) == ""  # the answer off the schema was never sent as content


async def test_a_strict_schema_that_is_no_json_schema_is_refused_up_front(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    broken = {"name": "W", "schema": {"type": 5}, "strict": True}
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="aptix-general",
            messages=ASK,
            response_format={"type": "json_schema", "json_schema": broken},  # type: ignore[typeddict-item]
        )
    assert refused.value.param == "response_format"
    assert "not a valid JSON Schema" in refused.value.message
    assert provider.requests == []


async def test_a_format_type_aptix_does_not_know_is_refused(
    client: AsyncOpenAI, provider: ScriptedOpenAIServer
) -> None:
    for unknown in ({"type": "grammar", "grammar": "x"}, {"type": "json_schema"}):
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="aptix-general",
                messages=ASK,
                response_format=unknown,  # type: ignore[arg-type]
            )
        assert refused.value.param == "response_format"
        assert "response_format" in refused.value.message
    assert provider.requests == []


@pytest.fixture
async def demo_http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The API of a server configured with APTIX_LLM_MODEL=demo, as key-a."""
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, api_keys=KEYS, llm_model="demo")
    async with open_runtime(settings) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test/v1", headers=A
        ) as http:
            yield http


@pytest.mark.parametrize(
    "answer_format",
    [
        {"type": "json_object"},
        {"type": "json_schema", "json_schema": {"name": "W", "schema": {"type": "object"}}},
    ],
)
async def test_the_demo_model_refuses_a_response_format_up_front(
    demo_http: httpx.AsyncClient, answer_format: dict[str, Any]
) -> None:
    client = AsyncOpenAI(api_key="key-a", base_url="http://test/v1", http_client=demo_http)
    raw = client.chat.completions.with_raw_response
    with pytest.raises(openai.BadRequestError) as refused:
        await raw.create(model="aptix-general", messages=ASK, response_format=answer_format)  # type: ignore[arg-type]
    assert refused.value.param == "response_format"
    body = refused.value.body
    assert isinstance(body, dict)
    assert str(body["message"]).startswith("response_format: 'json_")
    assert "demo model" in str(body["message"])
    assert HEADER not in refused.value.response.headers  # refused before any session
    assert (await demo_http.get("/sessions")).json() == []
    # Free text is what it answers.
    plain = await client.chat.completions.create(
        model="aptix-general", messages=ASK, response_format={"type": "text"}
    )
    assert (plain.choices[0].message.content or "").startswith("(demo model)")
