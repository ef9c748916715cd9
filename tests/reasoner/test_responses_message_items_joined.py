"""A Responses answer of several message items reads as separate texts.

Review r3 (round 69), F4: the texts of two ``message`` items were run together
(``'Let me check the numbers.The total is 42.'``). Newer models send a ``phase:
"commentary"`` message before a ``phase: "final_answer"`` one; the commentary glued onto a
strict JSON answer failed its check. Now the items are joined with a blank line, and an
answer asked for in a format is its ``final_answer`` items alone. Streamed, every piece is
passed on as it comes (review s1, round 69: commentary held back was neither shown nor
charged when the call was cut short), and the pieces add up to the free-text answer.
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
FORMATTED = LlmRequest(
    messages=REQUEST.messages,
    response_format={
        "type": "json_schema",
        "json_schema": {"name": "total", "schema": {"type": "object"}, "strict": True},
    },
)


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
        "Let me check the numbers.\n\nThe total is 42.",
    ),
    "no-phase": (
        [_message(0, "First part.", None), _message(1, "Second part.", None)],
        "First part.\n\nSecond part.",
    ),
    "commentary-before-a-call": (
        [_message(0, "Let me add them.", "commentary"), _call(1)],
        "Let me add them.",
    ),
    "unmarked-then-final": (
        [_message(0, "Working on it.", None), _message(1, "Done: 4.", "final_answer")],
        "Working on it.\n\nDone: 4.",
    ),
}

#: The answer asked for in a format: the final-answer items, when any is marked.
FORMATTED_CASES = {
    "commentary-then-final": '{"total": 42}',
    "unmarked-then-final": '{"total": 4}',
    "no-phase": "First part.\n\nSecond part.",
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("streamed", [False, True], ids=["unstreamed", "streamed"])
async def test_message_items_are_kept_apart_and_every_piece_streamed(
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
        # What a streaming client shows is the answer that is kept, no more, no less.
        assert "".join(pieces) == expected


@pytest.mark.parametrize("case", list(FORMATTED_CASES))
@pytest.mark.parametrize("streamed", [False, True], ids=["unstreamed", "streamed"])
async def test_an_answer_in_a_format_is_the_final_answer_items(
    server: ScriptedOpenAIServer, case: str, streamed: bool
) -> None:
    output = [
        _message(i, '{"total": 42}' if case == "commentary-then-final" else '{"total": 4}', p)
        if p == "final_answer"
        else m
        for i, (m, p) in enumerate((m, m.get("phase")) for m in CASES[case][0])
    ]
    server.add(_stream(output) if streamed else Raw(json.dumps(_body(output)).encode()))
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    client = OpenAiLlmClient(base_url=server.base_url, api_key=None, model="m", api="responses")
    response = await client.complete(FORMATTED, on_text if streamed else None)
    assert response.text == FORMATTED_CASES[case]
    if streamed:
        # Every piece the model sent was passed on (and so is charged if the call is cut).
        assert all(m["content"][0]["text"] in "".join(pieces) for m in output)
