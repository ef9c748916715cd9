"""How the model's answer ended reads the same whichever model API Aptix talks to.

Review r1 (round 67), F1-F5, model-side oddities, each through the real ``openai`` client on
both hops: the SDK drives Aptix in process, and Aptix's model is ``OpenAiLlmClient`` over
HTTP to the scripted server, on Chat Completions and on the Responses API.

- F1: a Responses answer cut by the output cap (``status: "incomplete"``,
  ``incomplete_details.reason: "max_output_tokens"``) reached OpenAI clients as
  ``finish_reason: "stop"``, and the record, ``/v1/agent/execute`` and traces said
  ``incomplete`` (``completed`` for a whole answer) where the Chat path says ``length``
  (``stop``).
- F2: an answer the provider's content filter stopped was ``finish_reason: "stop"`` on
  ``/v1/chat/completions`` (both APIs), and ``incomplete`` in the Responses path's record.
- F3: a Responses answer with ``status: "failed"`` (and an ``error``) was a completed turn
  with an empty answer, the endpoint's message nowhere; now a ``model_error`` (502).
- F4: ``null`` usage counts failed the request with 500 ``internal_error``; now read as 0.
- F5: a non-streamed Chat Completions tool call without an ``id`` (missing or ``null``)
  failed the turn with a Python error text; now it gets a fresh id, as streamed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from aptix.api import create_app
from aptix.llm.openai_client import OpenAiLlmClient
from aptix.runtime import Runtime
from aptix.testing import reply
from aptix.testing.server import Raw, ScriptedOpenAIServer, Unfinished
from tests.api.conftest import A

ASK: list[Any] = [{"role": "user", "content": "List the steps."}]
CUT = "The first three steps are: one, two, thr"


@dataclasses.dataclass
class Aptix:
    api: str
    http: httpx.AsyncClient
    sdk: AsyncOpenAI

    async def turn(self, session_id: str, turn_id: str) -> dict[str, Any]:
        session = await self.http.get(f"/v1/sessions/{session_id}")
        assert session.status_code == 200, session.text
        [turn] = [t for t in session.json()["turns"] if t["turnId"] == turn_id]
        return dict(turn)

    async def last_turn(self, session_id: str) -> dict[str, Any]:
        session = await self.http.get(f"/v1/sessions/{session_id}")
        assert session.status_code == 200, session.text
        return dict(session.json()["turns"][-1])


@pytest.fixture
def provider() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


async def _aptix(
    runtime: Runtime, provider: ScriptedOpenAIServer, api: Any
) -> AsyncIterator[Aptix]:
    model = OpenAiLlmClient(
        base_url=provider.base_url, api_key=None, model="m-1", api=api, max_retries=0
    )
    transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=model))
    async with httpx.AsyncClient(transport=transport, base_url="http://test", headers=A) as h:
        sdk = AsyncOpenAI(api_key="key-a", base_url="http://test/v1", http_client=h, max_retries=0)
        yield Aptix(api, h, sdk)
    await model.close()


@pytest.fixture(params=["chat", "responses"])
async def aptix(
    request: pytest.FixtureRequest, keyed_runtime: Runtime, provider: ScriptedOpenAIServer
) -> AsyncIterator[Aptix]:
    async for served in _aptix(keyed_runtime, provider, request.param):
        yield served


@pytest.fixture
async def on_responses(
    keyed_runtime: Runtime, provider: ScriptedOpenAIServer
) -> AsyncIterator[Aptix]:
    async for served in _aptix(keyed_runtime, provider, "responses"):
        yield served


@pytest.fixture
async def on_chat(keyed_runtime: Runtime, provider: ScriptedOpenAIServer) -> AsyncIterator[Aptix]:
    async for served in _aptix(keyed_runtime, provider, "chat"):
        yield served


def _ended(finish: str) -> Any:
    return dataclasses.replace(reply(CUT), finish_reason=finish)


# F1, F2 -------------------------------------------------------------------------------------


async def test_a_whole_answer_finishes_stop_in_the_answer_and_the_record(
    aptix: Aptix, provider: ScriptedOpenAIServer
) -> None:
    provider.add(reply("A whole answer."))
    answer = await aptix.http.post("/v1/agent/execute", json={"instruction": "hello"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["kind"], body["finishReason"]) == ("ok", "stop")
    turn = await aptix.turn(body["sessionId"], body["turnId"])
    assert [c["finishReason"] for c in turn["modelCalls"]] == ["stop"]


@pytest.mark.parametrize("finish", ["length", "content_filter"])
async def test_a_cut_answer_says_why_to_an_openai_client(
    aptix: Aptix, provider: ScriptedOpenAIServer, finish: str
) -> None:
    provider.add(_ended(finish))
    raw = await aptix.sdk.chat.completions.with_raw_response.create(
        model="aptix-general", messages=ASK
    )
    completion = raw.parse()
    choice = completion.choices[0]
    assert (choice.finish_reason, choice.message.content) == (finish, CUT)
    turn = await aptix.last_turn(raw.headers["x-aptix-session"])
    assert (turn["status"], [c["finishReason"] for c in turn["modelCalls"]]) == (
        "completed",
        [finish],
    )


@pytest.mark.parametrize("finish", ["length", "content_filter"])
async def test_a_cut_answer_streamed_says_why_to_an_openai_client(
    aptix: Aptix, provider: ScriptedOpenAIServer, finish: str
) -> None:
    provider.add(_ended(finish))
    stream = await aptix.sdk.chat.completions.create(
        model="aptix-general", messages=ASK, stream=True
    )
    chunks = [chunk async for chunk in stream]
    endings = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert (endings, text) == ([finish], CUT)


@pytest.mark.parametrize("finish", ["length", "content_filter"])
async def test_agent_execute_names_the_cut_in_one_vocabulary(
    aptix: Aptix, provider: ScriptedOpenAIServer, finish: str
) -> None:
    provider.add(_ended(finish))
    answer = await aptix.http.post("/v1/agent/execute", json={"instruction": "long"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["kind"], body["text"], body["finishReason"]) == ("ok", CUT, finish)


# F3 -----------------------------------------------------------------------------------------


async def test_a_failed_responses_answer_is_a_model_error_for_openai_clients(
    on_responses: Aptix, provider: ScriptedOpenAIServer
) -> None:
    provider.add(Unfinished("failed", "The server had an error (id 42)."))
    with pytest.raises(openai.APIStatusError) as raised:
        await on_responses.sdk.chat.completions.create(model="aptix-general", messages=ASK)
    assert raised.value.status_code == 502
    error = raised.value.body
    assert isinstance(error, dict)
    assert error["code"] == "model_error"
    assert "The server had an error (id 42)." in error["message"]
    assert "failed" in error["message"]


@pytest.mark.parametrize("status", ["failed", "cancelled", "in_progress", "queued"])
async def test_a_responses_answer_that_holds_none_ends_the_turn_as_a_model_error(
    on_responses: Aptix, provider: ScriptedOpenAIServer, status: str
) -> None:
    provider.add(Unfinished(status, "The server had an error (id 42)."))
    answer = await on_responses.http.post("/v1/agent/execute", json={"instruction": "hello"})
    body = answer.json()
    assert body["kind"] == "error", body
    turn = await on_responses.turn(body["sessionId"], body["turnId"])
    assert turn["status"] == "error"
    assert turn["error"]["code"] == "model_error"
    assert f"status '{status}'" in turn["error"]["message"]
    if status == "failed":
        assert "The server had an error (id 42)." in turn["error"]["message"]


# F4 -----------------------------------------------------------------------------------------

_NULL_CHAT = {
    "id": "c",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello."},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None},
}
_NULL_RESPONSES = {
    "id": "r",
    "object": "response",
    "created_at": 1,
    "status": "completed",
    "model": "m",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hello.", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": None, "output_tokens": None, "total_tokens": None},
}
_NULL_CHAT_STREAM = (
    b"".join(
        f"data: {json.dumps(event)}\n\n".encode()
        for event in (
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": "Hello."}, "finish_reason": "stop"}],
            },
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [],
                "usage": {"prompt_tokens": None, "completion_tokens": 7, "total_tokens": None},
            },
        )
    )
    + b"data: [DONE]\n\n"
)


_NULL_RESPONSES_STREAM = b"".join(
    f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
    for event in (
        {
            "type": "response.output_text.delta",
            "sequence_number": 0,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": "Hello.",
            "logprobs": [],
        },
        {
            "type": "response.completed",
            "sequence_number": 1,
            "response": {
                **_NULL_RESPONSES,
                "usage": {"input_tokens": None, "output_tokens": 7, "total_tokens": None},
            },
        },
    )
)


def _null_usage(api: str, streamed: bool = False) -> Raw:
    if streamed:
        return Raw(_NULL_CHAT_STREAM if api == "chat" else _NULL_RESPONSES_STREAM)
    return Raw(json.dumps(_NULL_CHAT if api == "chat" else _NULL_RESPONSES).encode())


async def test_null_usage_counts_read_as_zero_and_the_answer_is_kept(
    aptix: Aptix, provider: ScriptedOpenAIServer
) -> None:
    provider.add(_null_usage(aptix.api))
    answer = await aptix.http.post("/v1/agent/execute", json={"instruction": "hi"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["kind"], body["text"]) == ("ok", "Hello.")
    assert body["usage"]["totalTokens"] == 0
    turn = await aptix.turn(body["sessionId"], body["turnId"])
    assert (turn["status"], turn["text"]) == ("completed", "Hello.")
    [model_call] = turn["modelCalls"]
    assert (model_call["promptTokens"], model_call["completionTokens"]) == (0, 0)


@pytest.mark.parametrize("streamed", [False, True])
async def test_null_usage_counts_answer_an_openai_client(
    aptix: Aptix, provider: ScriptedOpenAIServer, streamed: bool
) -> None:
    provider.add(_null_usage(aptix.api, streamed))
    if not streamed:
        completion = await aptix.sdk.chat.completions.create(model="aptix-general", messages=ASK)
        assert completion.choices[0].message.content == "Hello."
        assert completion.usage is not None
        assert completion.usage.total_tokens == 0
        return
    stream = await aptix.sdk.chat.completions.create(
        model="aptix-general", messages=ASK, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello."
    usage = [c.usage for c in chunks if c.usage is not None]
    # Either API streams from the model; the one count it sent is kept, the null ones are 0.
    assert [(u.prompt_tokens, u.completion_tokens) for u in usage] == [(0, 7)]


# F5 -----------------------------------------------------------------------------------------

_CALC = {
    "type": "function",
    "function": {"name": "agent_calculator", "arguments": '{"expression":"1+1"}'},
}


def _calling(call: dict[str, Any]) -> Raw:
    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return Raw(json.dumps(body).encode())


@pytest.mark.parametrize("call", [_CALC, {"id": None, **_CALC}], ids=["missing", "null"])
async def test_a_tool_call_without_an_id_gets_a_fresh_one_unstreamed(
    on_chat: Aptix, provider: ScriptedOpenAIServer, call: dict[str, Any]
) -> None:
    provider.add(_calling(call), reply("It is 2."))
    answer = await on_chat.http.post("/v1/agent/execute", json={"instruction": "1+1"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["kind"], body["text"]) == ("ok", "It is 2."), body
    [ran] = body["toolCalls"]
    assert ran["outcome"] == "succeeded"
    assert ran["callId"].startswith("call_")
    # The model reads the result under the id it is told its call has.
    sent = provider.requests[1]["messages"]
    [asked] = [m for m in sent if m.get("tool_calls")]
    [result] = [m for m in sent if m["role"] == "tool"]
    assert asked["tool_calls"][0]["id"] == result["tool_call_id"] == ran["callId"]


async def test_a_tool_call_without_a_name_fails_as_a_call_not_the_turn(
    on_chat: Aptix, provider: ScriptedOpenAIServer
) -> None:
    nameless = {"id": "call_1", "type": "function", "function": {"name": None, "arguments": "{}"}}
    provider.add(_calling(nameless), reply("I could not."))
    answer = await on_chat.http.post("/v1/agent/execute", json={"instruction": "1+1"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["kind"], body["text"]) == ("ok", "I could not."), body
    assert [c["outcome"] for c in body["toolCalls"]] == ["failed"]
