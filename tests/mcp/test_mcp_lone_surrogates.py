"""A lone surrogate escape is valid JSON: MCP refuses it in words, answering the request's id."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from aptix.mcp.messages import batch_refused, refusal
from aptix.nul import SURROGATE_REFUSED
from tests.api.live import serve
from tests.mcp.over_stdio import stdio_answers

# Written by hand: json.dumps would not write a lone surrogate escape a client can send.
CALL = (
    '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name":'
    ' "agent_workflow_registry", "arguments": {"operation": "match_workflow",'
    ' "userMessage": "\\ud800 switch to another mode"}}}'
)
REFUSED = {
    "jsonrpc": "2.0",
    "id": 7,
    "error": {
        "code": -32602,
        "message": f"{SURROGATE_REFUSED} (found in 'params.arguments.userMessage').",
    },
}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def test_the_call_is_valid_json_that_names_the_lone_surrogate() -> None:
    assert json.loads(CALL)["params"]["arguments"]["userMessage"].startswith("\ud800")
    assert refusal(CALL.encode()) == REFUSED


def test_a_lone_surrogate_in_a_key_is_shown_escaped_and_an_unsendable_id_is_null() -> None:
    key = '{"jsonrpc": "2.0", "id": "a", "method": "ping", "params": {"\\udc00k": 1}}'
    in_id = '{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}'
    assert refusal(key) == {
        "jsonrpc": "2.0",
        "id": "a",
        "error": {"code": -32602, "message": f"{SURROGATE_REFUSED} (found in 'params.\\udc00k')."},
    }
    answer = refusal(in_id)
    assert answer is not None
    assert answer["id"] is None
    assert answer["error"] == {"code": -32602, "message": f"{SURROGATE_REFUSED} (found in 'id')."}


def test_what_is_not_json_or_not_a_message_is_still_refused_as_such() -> None:
    assert refusal('{"id": 1, "x": "\\ud800"') == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: the body is not JSON."},
    }
    # An array is a batch: where none is taken apart, it is refused as one, never as text.
    a_batch = refusal('[{"x": "\\ud800"}]')
    assert a_batch is not None
    assert a_batch["error"] == {"code": -32600, "message": batch_refused()}


def test_over_http_the_call_is_answered_with_its_id_and_the_refusal(tmp_path: Path) -> None:
    with serve(tmp_path, APTIX_SEMANTIC_MATCHING="false") as base:
        answer = httpx.post(f"{base}/mcp", content=CALL.encode(), headers=HEADERS)
    assert answer.status_code == 400
    assert answer.json() == REFUSED


def test_over_stdio_the_call_is_answered_with_its_id_and_the_refusal(tmp_path: Path) -> None:
    lines = [CALL, '{"jsonrpc": "2.0", "id": "last", "method": "ping"}']
    answers = stdio_answers(tmp_path, lines)
    assert answers == [REFUSED, {"jsonrpc": "2.0", "id": "last", "result": {}}]
