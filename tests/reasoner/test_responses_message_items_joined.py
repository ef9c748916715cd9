"""A Responses answer of several message items reads as separate texts, the final one kept.

Review r3 (round 69), F4: the texts of two ``message`` items were run together
(``'Let me check the numbers.The total is 42.'``). Newer models send a ``phase:
"commentary"`` message before a ``phase: "final_answer"`` one; the commentary glued onto a
strict JSON answer failed its check. Now the items are joined with a blank line, and when
any item is a ``final_answer`` only those items are the answer; streamed, the pieces the
caller gets add up to that same text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from aptix.llm.openai_client import OpenAiLlmClient
from aptix.llm.types import LlmRequest
from aptix.testing.server import Raw, ScriptedOpenAIServer

REQUEST = LlmRequest(messages=({"role": "user", "content": "The total?"},))


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


def _message(index: int, text: str, phase: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "message",
        "id": f"msg_{index}",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    if phase is not None:
        item["phase"] = phase
    return item


def _call(index: int) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{index}",
        "call_id": "call_1",
        "name": "add",
        "arguments": "{}",
        "status": "completed",
    }


def _body(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "m",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
    }


def _stream(output: list[dict[str, Any]]) -> Raw:
    """The events of ``output``: each message's text in two pieces, then the whole answer."""
    started = {**_body([]), "status": "in_progress", "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
    for index, item in enumerate(output):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": piece,
                        "logprobs": [],
                    }
                )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": _body(output)})
    return Raw(
        b"".join(
            f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
            for n, e in enumerate(events)
        )
    )


CASES = {
    "commentary-then-final": (
        [
            _message(0, "Let me check the numbers.", "commentary"),
            _message(1, "The total is 42.", "final_answer"),
        ],
        "The total is 42.",
    ),
    "no-phase": (
        [_message(0, "First part.", None), _message(1, "Second part.", None)],
        "First part.\n\nSecond part.",
    ),
    "commentary-before-a-call": (
        [_message(0, "Let me add them.", "commentary"), _call(1)],
        "Let me add them.",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("streamed", [False, True], ids=["unstreamed", "streamed"])
async def test_message_items_are_kept_apart_and_the_final_answer_wins(
    server: ScriptedOpenAIServer, case: str, streamed: bool
) -> None:
    output, expected = CASES[case]
    server.add(_stream(output) if streamed else Raw(json.dumps(_body(output)).encode()))
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    client = OpenAiLlmClient(base_url=server.base_url, api_key=None, model="m", api="responses")
    response = await client.complete(REQUEST, on_text if streamed else None)
    assert response.text == expected
    if streamed:
        # What a streaming client shows is the answer that is kept, no more.
        assert "".join(pieces) == expected
