"""``POST /v1/chat/completions`` and ``GET /v1/models`` driven by the real ``openai`` client.

In process (``httpx.ASGITransport`` under ``AsyncOpenAI``): the wire is the client's own, the
model behind Aptix is a function of the request. tests/api/test_openai_live.py drives a real
``aptix serve`` the same way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import Runtime
from aptix.testing import FunctionModel, call, reply
from tests.api.conftest import A, B

HEADER = "x-aptix-session"


def _last(request: LlmRequest) -> dict[str, Any]:
    return request.messages[-1]


def answer(request: LlmRequest) -> LlmResponse:
    """Answers by the last message: asks approval, computes, or echoes."""
    last = _last(request)
    if last["role"] == "tool":
        return reply(f"tool said {last['content']}")
    text = str(last["content"])
    if "approve" in text:
        return reply(None, call("request_user_approval", {"prompt": "Deploy?"}, id="ap1"))
    if "compute" in text:
        return reply(None, call("agent_calculator", {"expression": "6*7"}, id="calc1"))
    if "weather" in text:
        return reply(None, call("get_weather", {"city": "Oslo"}, id="w1"))
    if "crash" in text:
        raise RuntimeError("a bug in the model adapter")
    return reply(f"echo: {text.splitlines()[-1]}")


@pytest.fixture
def model() -> FunctionModel:
    return FunctionModel(answer)


@pytest.fixture
async def http(keyed_runtime: Runtime, model: FunctionModel) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=keyed_runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test/v1", headers=A) as c:
        yield c


@pytest.fixture
def client(http: httpx.AsyncClient) -> AsyncOpenAI:
    return AsyncOpenAI(api_key="key-a", base_url="http://test/v1", http_client=http, max_retries=0)


async def test_models_are_the_modes(client: AsyncOpenAI) -> None:
    models = [m.id async for m in client.models.list()]
    assert "aptix-general" in models
    assert "aptix-calculation" in models


async def test_a_plain_answer_carries_its_session(client: AsyncOpenAI) -> None:
    raw = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=[{"role": "user", "content": "hello"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "echo: hello"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.total_tokens == 15
    assert len(raw.headers[HEADER]) == 32


async def test_a_streamed_answer_with_usage(client: AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="aptix-general",
        messages=[{"role": "user", "content": "stream me please"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, None
    async for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            usage = chunk.usage
    assert text == "echo: stream me please"
    assert finish == "stop"
    assert usage is not None
    assert usage.total_tokens == 15


async def test_a_stream_that_fails_unexpectedly_ends_with_an_error(client: AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="aptix-general", messages=[{"role": "user", "content": "crash"}], stream=True
    )
    with pytest.raises(openai.APIError, match=r"The server failed unexpectedly; it was logged\."):
        async for _ in stream:
            pass


async def test_a_server_tool_runs_inside_the_turn(
    client: AsyncOpenAI, model: FunctionModel
) -> None:
    completion = await client.chat.completions.create(
        model="aptix-calculation", messages=[{"role": "user", "content": "compute it"}]
    )
    message = completion.choices[0].message
    assert message.tool_calls is None
    assert completion.choices[0].finish_reason == "stop"
    assert message.content is not None
    assert "42" in message.content
    assert model.requests[-1].messages[-1]["role"] == "tool"


async def test_a_client_final_call_round_trip_resumes_once(
    client: AsyncOpenAI, model: FunctionModel
) -> None:
    messages: list[Any] = [{"role": "user", "content": "please approve the deploy"}]
    first = await client.chat.completions.create(model="aptix-general", messages=messages)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    (handed,) = choice.message.tool_calls
    assert handed.id == "ap1"
    assert handed.function.name == "request_user_approval"
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "ap1", "content": json.dumps({"approved": True})},
    ]
    calls_before = len(model.requests)
    second = await client.chat.completions.create(model="aptix-general", messages=messages)
    assert second.choices[0].finish_reason == "stop"
    assert "approved" in (second.choices[0].message.content or "")
    assert len(model.requests) == calls_before + 1
    with pytest.raises(openai.ConflictError) as refused:
        await client.chat.completions.create(model="aptix-general", messages=messages)
    assert refused.value.code == "tool_results_already_posted"
    assert len(model.requests) == calls_before + 1


async def test_client_tools_are_handed_back_as_tool_calls(client: AsyncOpenAI) -> None:
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    completion = await client.chat.completions.create(
        model="aptix-general",
        messages=[{"role": "user", "content": "what is the weather"}],
        tools=[weather],  # type: ignore[list-item]
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    assert choice.message.tool_calls[0].function.name == "get_weather"


async def test_a_conversation_continues_by_its_prefix(
    client: AsyncOpenAI, model: FunctionModel
) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "You are helpful. Today is Monday."},
        {"role": "user", "content": "first question"},
    ]
    raw = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=messages
    )
    session = raw.headers[HEADER]
    messages[0]["content"] = "You are helpful. Today is Tuesday."  # UIs rewrite system prompts
    messages += [
        {"role": "assistant", "content": raw.parse().choices[0].message.content},
        {"role": "user", "content": "second question"},
    ]
    again = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=messages
    )
    assert again.headers[HEADER] == session
    # The model saw the session's own transcript, not a replay of the client's copy.
    seen = [str(m["content"]) for m in model.requests[-1].messages if m["role"] == "user"]
    assert seen[-1] == "second question"
    assert seen[-2].endswith("first question")  # after the client's system prompt, as context


async def test_an_edited_conversation_does_not_continue_the_session_that_moved_on(
    client: AsyncOpenAI, model: FunctionModel
) -> None:
    # A chat UI's "edit and resend": the client's conversation now forks from an earlier
    # point than the session holds. Continuing that session would put the message the user
    # edited away back in front of the model.
    first: list[Any] = [{"role": "user", "content": "first"}]
    raw = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=first
    )
    session = raw.headers[HEADER]
    asked = [*first, {"role": "assistant", "content": raw.parse().choices[0].message.content}]
    second = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=[*asked, {"role": "user", "content": "secret topic"}]
    )
    assert second.headers[HEADER] == session
    edited = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=[*asked, {"role": "user", "content": "edited question"}]
    )
    assert edited.headers[HEADER] != session
    seen = " ".join(str(m["content"]) for m in model.requests[-1].messages)
    assert "edited question" in seen
    assert "first" in seen  # quoted as context
    assert "secret topic" not in seen


async def test_an_unknown_conversation_starts_a_session_with_its_context(
    client: AsyncOpenAI, model: FunctionModel
) -> None:
    raw = await client.chat.completions.with_raw_response.create(
        model="aptix-general",
        messages=[
            {"role": "user", "content": "earlier elsewhere"},
            {"role": "assistant", "content": "an answer from elsewhere"},
            {"role": "user", "content": "now this"},
        ],
    )
    assert raw.parse().choices[0].message.content == "echo: now this"
    instruction = str(model.requests[-1].messages[-1]["content"])
    assert "earlier elsewhere" in instruction
    assert "an answer from elsewhere" in instruction


async def test_a_prefix_two_sessions_share_picks_neither(client: AsyncOpenAI) -> None:
    sessions = set()
    for _ in range(2):
        raw = await client.chat.completions.with_raw_response.create(
            model="aptix-general", messages=[{"role": "user", "content": "same"}]
        )
        sessions.add(raw.headers[HEADER])
    assert len(sessions) == 2
    third = await client.chat.completions.with_raw_response.create(
        model="aptix-general",
        messages=[
            {"role": "user", "content": "same"},
            {"role": "assistant", "content": "echo: same"},
            {"role": "user", "content": "which one?"},
        ],
    )
    assert third.headers[HEADER] not in sessions


async def test_the_model_picks_the_mode(client: AsyncOpenAI, http: httpx.AsyncClient) -> None:
    raw = await client.chat.completions.with_raw_response.create(
        model="aptix-calculation", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.parse().model == "aptix-calculation"
    session = (await http.get(f"/sessions/{raw.headers[HEADER]}")).json()
    assert session["mode"] == "calculation"
    switched = await client.chat.completions.with_raw_response.create(
        model="aptix-general",
        messages=[{"role": "user", "content": "again"}],
        extra_headers={"X-Aptix-Session": raw.headers[HEADER]},
    )
    assert switched.parse().model == "aptix-general"


async def test_an_unknown_model_is_an_openai_404(client: AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert missing.value.code == "model_not_found"
    body = missing.value.body
    assert isinstance(body, dict)
    assert body["type"] == "not_found_error"


INVALID_CONVERSATIONS: list[list[Any]] = [
    [{"role": "wizard", "content": "hi"}],
    [{"role": "user"}],
    [{"role": "assistant", "content": "last is not a question"}],
    [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
    [{"role": "tool", "content": "no id"}],
    [{"role": "user", "content": "nul \u0000 inside"}],
    [{"role": "user", "content": "lone \ud800 surrogate"}],
    [],
]


async def test_invalid_messages_are_openai_400s(http: httpx.AsyncClient) -> None:
    for messages in INVALID_CONVERSATIONS:
        body = json.dumps({"model": "aptix-general", "messages": messages})  # escapes U+D800
        response = await http.post(
            "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 400, (messages, response.text)
        error = response.json()["error"]
        # One code for every refusal of a request, whichever check refused it.
        assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_request_error")
        assert error["message"]


async def test_a_stream_flag_that_is_not_a_boolean_is_an_openai_400(
    http: httpx.AsyncClient,
) -> None:
    for flag in (0, 1.0, "true"):
        body = {"model": "aptix-general", "messages": [{"role": "user", "content": "hi"}]}
        response = await http.post("/chat/completions", json={**body, "stream": flag})
        assert response.status_code == 400, (flag, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"


async def test_a_tool_message_for_an_unknown_call_is_refused(client: AsyncOpenAI) -> None:
    raw = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=[{"role": "user", "content": "please approve it"}]
    )
    with pytest.raises(openai.APIStatusError) as refused:
        await client.chat.completions.create(
            model="aptix-general",
            messages=[{"role": "tool", "tool_call_id": "nope", "content": "yes"}],
            extra_headers={"X-Aptix-Session": raw.headers[HEADER]},
        )
    assert refused.value.status_code in (400, 409)
    with pytest.raises(openai.BadRequestError):  # and without the session at all
        await client.chat.completions.create(
            model="aptix-general",
            messages=[{"role": "tool", "tool_call_id": "nope", "content": "yes"}],
        )


async def test_another_orgs_session_is_not_found(
    client: AsyncOpenAI, http: httpx.AsyncClient
) -> None:
    raw = await client.chat.completions.with_raw_response.create(
        model="aptix-general", messages=[{"role": "user", "content": "please approve it"}]
    )
    response = await http.post(
        "/chat/completions",
        headers={**B, "X-Aptix-Session": raw.headers[HEADER]},
        json={
            "model": "aptix-general",
            "messages": [{"role": "tool", "tool_call_id": "ap1", "content": "yes"}],
        },
    )
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


async def test_a_body_over_the_limit_is_refused_in_the_envelope(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/chat/completions",
        json={"model": "aptix-general", "messages": [{"role": "user", "content": "x" * 20_000}]},
    )
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "invalid_request_error"


async def test_without_a_key_the_models_are_refused(http: httpx.AsyncClient) -> None:
    response = await http.get("/models", headers={"Authorization": "Bearer wrong"})
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"
