"""A real ``aptix serve`` behind the real ``openai`` client: Aptix as an OpenAI endpoint.

The model behind Aptix is the scripted OpenAI-compatible server, so both hops are real HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai import OpenAI

from aptix.llm.types import LlmResponse
from aptix.testing import call, reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.live import scripted_model_env, serve

HEADER = "x-aptix-session"


def answer(body: dict[str, Any]) -> LlmResponse:
    """The model: asks approval, computes, or echoes the last message."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return reply(f"the tool said {last['content']}")
    text = str(last["content"])
    if "approve" in text:
        return reply(None, call("request_user_approval", {"prompt": "Deploy?"}, id="ap1"))
    if "compute" in text:
        return reply(None, call("agent_calculator", {"expression": "6*7"}, id="c1"))
    return reply(f"echo: {text.splitlines()[-1]}")


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(respond=answer) as server:
        yield server


@pytest.fixture(scope="module")
def client(
    model: ScriptedOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OpenAI]:
    with serve(tmp_path_factory.mktemp("openai-live"), **scripted_model_env(model.base_url)) as url:
        yield OpenAI(api_key="unused", base_url=f"{url}/v1", max_retries=0)


def test_a_plain_and_a_streamed_answer(client: OpenAI) -> None:
    plain = client.chat.completions.create(
        model="aptix-general", messages=[{"role": "user", "content": "hello"}]
    )
    assert plain.choices[0].message.content == "echo: hello"
    stream = client.chat.completions.create(
        model="aptix-general",
        messages=[{"role": "user", "content": "streamed hello"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: streamed hello"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0


def test_a_server_tool_is_used_inside_the_turn(client: OpenAI, model: ScriptedOpenAIServer) -> None:
    completion = client.chat.completions.create(
        model="aptix-general", messages=[{"role": "user", "content": "compute six sevens"}]
    )
    assert completion.choices[0].message.tool_calls is None
    assert "42" in (completion.choices[0].message.content or "")
    assert model.requests[-1]["messages"][-1]["role"] == "tool"


def test_a_client_final_round_trip_resumes_exactly_once(
    client: OpenAI, model: ScriptedOpenAIServer
) -> None:
    messages: list[Any] = [{"role": "user", "content": "approve the deploy"}]
    first = client.chat.completions.create(model="aptix-general", messages=messages)
    assert first.choices[0].finish_reason == "tool_calls"
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "ap1", "content": json.dumps({"approved": True})},
    ]
    before = len(model.requests)
    second = client.chat.completions.create(model="aptix-general", messages=messages)
    assert second.choices[0].finish_reason == "stop"
    assert len(model.requests) == before + 1
    with pytest.raises(openai.ConflictError):
        client.chat.completions.create(model="aptix-general", messages=messages)
    assert len(model.requests) == before + 1


def test_a_conversation_continues_without_the_header(client: OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "remember the number 7"}]
    raw = client.chat.completions.with_raw_response.create(model="aptix-general", messages=messages)
    messages += [
        {"role": "assistant", "content": raw.parse().choices[0].message.content},
        {"role": "user", "content": "what was it?"},
    ]
    again = client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=messages
    )
    assert again.headers[HEADER] == raw.headers[HEADER]


def test_a_model_from_the_list_sets_the_mode(client: OpenAI) -> None:
    models = [m.id for m in client.models.list()]
    assert "aptix-calculation" in models
    raw = client.chat.completions.with_raw_response.create(
        model="aptix-calculation", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().model == "aptix-calculation"
    session = client.get(f"/sessions/{raw.headers[HEADER]}", cast_to=dict)  # type: ignore[type-var]
    assert session["mode"] == "calculation"
