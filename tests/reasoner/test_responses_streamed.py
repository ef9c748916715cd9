"""A streamed call on the Responses API streams, as one on Chat Completions does.

Review r3 (round 69), F1: with ``APTIX_LLM_API=responses`` every model call went unstreamed,
so a streamed turn got its text in one piece once the model had finished, an answer longer
than the read timeout failed only on this API, and a call cut short was never charged. Now a
caller that streams (an ``on_text`` sink) gets the ``response.output_text.delta`` pieces as
they come, through the real ``openai`` client against the scripted server's event stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from aptix.errors import LlmError
from aptix.llm.openai_client import OpenAiLlmClient
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.quotas import PAYER, MeteredModel, Payer, Quotas
from aptix.quotas.usage import today
from aptix.testing import call, reply
from aptix.testing.server import Hold, Raw, ScriptedOpenAIServer, Unfinished

REQUEST = LlmRequest(messages=({"role": "user", "content": "Count to five."},))
FIVE = "One two three four five."


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


def _client(server: ScriptedOpenAIServer, api: str = "responses") -> OpenAiLlmClient:
    # A held answer the client cannot stream waits for this limit: the test fails, not hangs.
    return OpenAiLlmClient(
        base_url=server.base_url,
        api_key=None,
        model="m-1",
        api=api,  # type: ignore[arg-type]
        max_retries=0,
        timeout_seconds=10,
    )


def _sse(*events: dict[str, Any]) -> Raw:
    return Raw(
        b"".join(
            f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
            for n, e in enumerate(events)
        )
    )


_STARTED = {
    "type": "response.created",
    "response": {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "m",
        "status": "in_progress",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    },
}


def _delta(text: str, index: int = 0) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": f"msg_{index}",
        "output_index": index,
        "content_index": 0,
        "delta": text,
        "logprobs": [],
    }


async def test_the_pieces_arrive_as_the_model_writes_them(server: ScriptedOpenAIServer) -> None:
    # The model writes two words and waits: they reach the caller before it goes on.
    server.add(Hold(reply(FIVE, call("count", {"to": 5}, id="c1")), after_words=2))
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 2:
            server.release()

    response = await _client(server).complete(REQUEST, on_text)
    assert pieces == ["One ", "two ", "three ", "four ", "five."]
    assert (response.text, response.finish_reason, response.model_id) == (
        FIVE,
        "tool_calls",
        "scripted-model",
    )
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("c1", "count", {"to": 5})
    ]
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (10, 5)
    assert server.paths == ["/v1/responses"]
    assert server.requests[0]["stream"] is True


async def test_an_unstreamed_caller_makes_an_unstreamed_call(server: ScriptedOpenAIServer) -> None:
    server.add(reply(FIVE))
    response = await _client(server).complete(REQUEST)
    assert response.text == FIVE
    assert "stream" not in server.requests[0]


@pytest.mark.parametrize(
    ("finish", "reason"), [("length", "max_output_tokens"), ("content_filter", "content_filter")]
)
async def test_a_cut_answer_streams_and_says_why(
    server: ScriptedOpenAIServer, finish: str, reason: str
) -> None:
    from dataclasses import replace

    server.add(replace(reply("cut sho"), finish_reason=finish))
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    response = await _client(server).complete(REQUEST, on_text)
    assert (pieces, response.text, response.finish_reason) == (["cut ", "sho"], "cut sho", finish)


async def test_a_failed_answer_is_the_error_an_unstreamed_one_is(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(Unfinished("failed", "The server had an error (id 42)."))
    server.add(Unfinished("failed", "The server had an error (id 42)."))

    async def on_text(piece: str) -> None:
        return None

    errors = []
    for sink in (on_text, None):
        with pytest.raises(LlmError) as raised:
            await _client(server).complete(REQUEST, sink)
        errors.append(str(raised.value))
    assert errors[0] == errors[1]
    assert "status 'failed', server_error): The server had an error (id 42)." in errors[0]
    assert [r.get("stream") for r in server.requests] == [True, None]


async def test_an_error_event_is_a_model_error_with_its_message(
    server: ScriptedOpenAIServer,
) -> None:
    server.add(
        _sse(
            _STARTED,
            _delta("Partly "),
            {"type": "error", "code": "server_error", "message": "Upstream <b>broke</b>."},
        )
    )
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    with pytest.raises(LlmError, match=r"server_error\): Upstream <b>broke</b>\.") as raised:
        await _client(server).complete(REQUEST, on_text)
    assert "stream" in str(raised.value)
    assert pieces == ["Partly "]


@pytest.mark.parametrize(
    "step",
    [
        _sse(_STARTED, _delta("Transfer to account ")),
        Raw(b""),
        Unfinished("cancelled"),
    ],
    ids=["cut-after-a-piece", "empty", "no-terminal-event"],
)
async def test_a_stream_ending_without_its_last_event_is_the_chat_paths_error(
    server: ScriptedOpenAIServer, step: Any
) -> None:
    server.add(step)

    async def on_text(piece: str) -> None:
        return None

    with pytest.raises(LlmError, match="stream ended before the answer was finished"):
        await _client(server).complete(REQUEST, on_text)


async def test_text_sent_only_with_the_last_event_still_reaches_the_caller(
    server: ScriptedOpenAIServer,
) -> None:
    body = {
        **_STARTED["response"],
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": FIVE, "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 4, "output_tokens": 6, "total_tokens": 10},
    }
    server.add(_sse(_STARTED, {"type": "response.completed", "response": body}))
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    response = await _client(server).complete(REQUEST, on_text)
    assert (pieces, response.text, response.usage.total_tokens) == ([FIVE], FIVE, 10)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_call_cut_short_after_its_first_words_is_charged_on_either_api(
    server: ScriptedOpenAIServer, api: str
) -> None:
    # The model streams two words and never goes on; the caller gives up (a client gone).
    server.add(Hold(reply(FIVE), after_words=2))
    quotas = Quotas(token_budget="1000/hour")
    metered = MeteredModel(_client(server, api), quotas, prompt_tokens=lambda request: 300)
    two_words = asyncio.Event()
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 2:
            two_words.set()

    async def turn() -> LlmResponse:
        PAYER.set(Payer("acme", "key-1", "ann"))
        return await metered.complete(REQUEST, on_text)

    async with asyncio.timeout(30):
        running = asyncio.create_task(turn())
        await two_words.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    usage = await quotas.usage.read("acme", today())
    # The prompt's estimate, and "One two " (8 bytes, one token per 3 bytes): 3.
    assert (usage["modelCalls"], usage["promptTokens"], usage["completionTokens"]) == (1, 300, 3)
