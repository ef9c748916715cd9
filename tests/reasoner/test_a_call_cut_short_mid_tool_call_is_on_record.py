"""A streamed model call cut short while it wrote a tool call (or a refusal) is charged.

Review r7 F4 (round 73): a stream that broke off after ~20 KB of tool-call arguments ended the
turn ``model_error`` with usage 0, no ``modelCalls`` entry and nothing in ``/v1/usage``, while
the same stream cut after text was charged its estimate: only text reached what a call cut
short is charged for. The provider bills the arguments (and a refusal) it streamed as it
bills text: they are now charged and recorded alike, marked ``estimated``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from aptix.llm.openai_client import OpenAiLlmClient
from aptix.quotas import PAYER, Payer
from aptix.quotas.usage import today
from aptix.reasoner import TurnEvent
from aptix.reasoner.context import default_counter
from aptix.testing.server import Raw, ScriptedOpenAIServer
from tests.reasoner.conftest import Harness

ARGUMENTS = '{"tag": "' + "x" * 20_000


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


def _chunk(delta: dict[str, Any]) -> bytes:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _chat_cut_in_a_call() -> Raw:
    call = {"index": 0, "id": "c9", "type": "function", "function": {"name": "write"}}
    pieces = [_chunk({"role": "assistant", "content": ""}), _chunk({"tool_calls": [call]})]
    for start in range(0, len(ARGUMENTS), 1_000):
        piece = {"index": 0, "function": {"arguments": ARGUMENTS[start : start + 1_000]}}
        pieces.append(_chunk({"tool_calls": [piece]}))
    return Raw(b"".join(pieces))  # no finish_reason: the stream broke off


def _chat_cut_in_a_refusal() -> Raw:
    words = [_chunk({"refusal": f"no{n} "}) for n in range(300)]
    return Raw(_chunk({"role": "assistant", "content": None}) + b"".join(words))


def _responses_cut_in_a_call() -> Raw:
    item = {"type": "function_call", "id": "fc_1", "call_id": "c9", "name": "write"}
    events: list[dict[str, Any]] = [
        {
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
        },
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "arguments": "", "status": "in_progress"},
        },
    ]
    for start in range(0, len(ARGUMENTS), 1_000):
        events.append(
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "item_id": "fc_1",
                "delta": ARGUMENTS[start : start + 1_000],
            }
        )
    return Raw(
        b"".join(
            f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
            for n, e in enumerate(events)
        )
    )


@pytest.mark.parametrize(
    ("api", "cut", "said"),
    [
        ("chat", _chat_cut_in_a_call, ARGUMENTS),
        ("chat", _chat_cut_in_a_refusal, "".join(f"no{n} " for n in range(300))),
        ("responses", _responses_cut_in_a_call, ARGUMENTS),
    ],
)
async def test_a_stream_cut_mid_call_or_refusal_is_charged_and_on_record(
    harness: Harness, server: ScriptedOpenAIServer, api: str, cut: Any, said: str
) -> None:
    server.add(cut())
    model = OpenAiLlmClient(
        base_url=server.base_url,
        api_key=None,
        model="m-1",
        api=api,  # type: ignore[arg-type]
        max_retries=0,
        timeout_seconds=10,
    )

    async def sink(event: TurnEvent) -> None:
        pass

    PAYER.set(Payer("acme", "key-1", "ann"))  # metered, as a request's turn is
    result = await harness.runtime.reasoner(model).execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="go", on_event=sink
    )
    assert result.kind == "error"
    assert server.requests[0]["stream"] is True
    charged = await harness.runtime.quotas.usage.read("acme", today())
    assert charged["modelCalls"] == 1
    [stored] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    [call] = stored.model_calls
    assert call["estimated"] is True
    assert call["completionTokens"] == default_counter().count(said)
    assert (call["promptTokens"], call["completionTokens"]) == (
        charged["promptTokens"],
        charged["completionTokens"],
    )
    assert result.usage.total_tokens == charged["totalTokens"]
