"""A number too long to read (over 4,300 digits) is refused in words, with the request's id.

JSON sets no limit on digits; the SDK's parser and Python's stop at 4,300. Such a request
was answered "-32700 the line is not JSON" with id null (review r5 F3), so the SDK's waiting
call never got its answer. Now it is answered like a lone surrogate: with its own id,
naming the number's place, on stdio and over HTTP alike.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import StdioServerParameters
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from aptix.mcp.messages import TOO_DEEP, refusal
from tests.api.live import serve
from tests.mcp.over_stdio import mcp_env, stdio_answers

LONG = "9" * 5000
CALL = (
    '{"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": "agent_calculator",'
    f' "arguments": {{"expression": "1", "x": {LONG}}}}}}}'
)
TOO_LONG = "the number at '{}' is too long to read (more than 4,300 digits)."
REFUSED = {
    "jsonrpc": "2.0",
    "id": 41,
    "error": {
        "code": -32602,
        "message": "Invalid params: " + TOO_LONG.format("params.arguments.x"),
    },
}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def test_the_call_is_valid_json_answered_with_its_id_naming_the_number() -> None:
    assert refusal(CALL.encode()) == REFUSED


@pytest.mark.parametrize(
    "number", [LONG, "-" + LONG, LONG + ".5", LONG + "e5"], ids=["int", "negative", "dot", "exp"]
)
def test_every_way_of_writing_it_is_read_so(number: str) -> None:
    call = CALL.replace(LONG, number)
    assert refusal(call) == REFUSED


@pytest.mark.parametrize(
    ("message", "answer"),
    [
        # Outside params: no parameter is wrong, the request is.
        (
            f'{{"jsonrpc": "2.0", "id": "a", "method": "ping", "x": {LONG}}}',
            {"id": "a", "code": -32600, "message": "Invalid Request: " + TOO_LONG.format("x")},
        ),
        # The id itself: it cannot be read, so it is not answered with.
        (
            f'{{"jsonrpc": "2.0", "id": {LONG}, "method": "ping"}}',
            {"id": None, "code": -32600, "message": "Invalid Request: " + TOO_LONG.format("id")},
        ),
        # Not a message, long number or not: refused as one.
        (
            f'{{"jsonrpc": "2.0", "id": 3, "method": 5, "params": {{"x": {LONG}}}}}',
            {"id": 3, "code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message."},
        ),
    ],
)
def test_where_the_number_is_decides_the_answer(message: str, answer: dict[str, Any]) -> None:
    expected = {"code": answer["code"], "message": answer["message"]}
    assert refusal(message) == {"jsonrpc": "2.0", "id": answer["id"], "error": expected}


def test_digits_up_to_the_limit_are_read_and_bad_json_is_still_not_json() -> None:
    assert refusal(CALL.replace(LONG, "9" * 4300)) is None
    assert refusal(CALL.replace(LONG, LONG + ",")) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: the body is not JSON."},
    }


@pytest.mark.parametrize("head", ['"\\ud800"', LONG], ids=["lone-surrogate", "long-number"])
def test_deep_json_after_it_is_too_deep_not_a_recursion_error(head: str) -> None:
    # The SDK's parser stops at the first problem; Python's reads the rest, 500 levels deep.
    deep = "[" * 500 + "]" * 500
    message = (
        f'{{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {{"a": {head}, "b": {deep}}}}}'
    )
    answer = refusal(message)
    assert answer is not None
    assert answer["id"] is None
    assert answer["error"] == {"code": -32600, "message": TOO_DEEP}


def test_over_http_the_call_is_answered_with_its_id(tmp_path: Path) -> None:
    with serve(tmp_path, APTIX_SEMANTIC_MATCHING="false") as base:
        answer = httpx.post(f"{base}/mcp", content=CALL.encode(), headers=HEADERS)
    assert answer.status_code == 400
    assert answer.json() == REFUSED


def test_over_stdio_the_call_and_one_in_a_batch_are_answered_with_their_ids(
    tmp_path: Path,
) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-03-26",  # the version with batches
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    in_batch = CALL.replace('"id": 41', '"id": 42')
    lines = [
        json.dumps(initialize),
        CALL,
        f'[{in_batch}, {{"jsonrpc": "2.0", "id": 43, "method": "ping"}}]',
        '{"jsonrpc": "2.0", "id": "last", "method": "ping"}',
    ]
    answers = stdio_answers(tmp_path, lines)
    # JSON-RPC answers in any order, and the refusal is written as its line is read: it may
    # come before the session answers initialize (5 runs in 40 did).
    singles = {answer["id"]: answer for answer in answers if isinstance(answer, dict)}
    [batch] = [answer for answer in answers if isinstance(answer, list)]
    assert set(singles) == {0, 41, "last"}
    assert singles[41] == REFUSED
    assert sorted(batch, key=lambda answer: answer["id"]) == [
        {**REFUSED, "id": 42},
        {"jsonrpc": "2.0", "id": 43, "result": {}},
    ]
    assert singles["last"] == {"jsonrpc": "2.0", "id": "last", "result": {}}


async def test_the_official_client_gets_the_refusal_instead_of_waiting(tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "aptix", "mcp"])
    params.env = mcp_env(tmp_path)
    # Unanswered, the call would wait forever: the test gives up instead.
    with anyio.fail_after(60):
        async with Client(params) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("agent_calculator", {"expression": "1", "x": 10**5000})
            after = await client.call_tool("agent_calculator", {"expression": "1+1"})
    assert refused.value.code == -32602
    assert refused.value.message == REFUSED["error"]["message"]  # type: ignore[index]
    assert not after.is_error
