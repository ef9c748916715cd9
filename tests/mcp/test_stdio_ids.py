"""``aptix mcp`` answers a message whose id is neither a string nor an integer, as /mcp does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aptix.mcp.messages import problem, refusal
from tests.mcp.over_stdio import stdio_answers

BAD_IDS = ['{"a": 1}', "1.5", "true", "null", "[1]"]


def _ping(message_id: str) -> str:
    return f'{{"jsonrpc": "2.0", "id": {message_id}, "method": "ping"}}'


def test_a_message_with_an_unusable_id_is_answered_over_stdio(tmp_path: Path) -> None:
    answers = stdio_answers(tmp_path, [_ping(i) for i in BAD_IDS] + [_ping('"last"')])
    for answer in answers[:-1]:
        assert answer == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message."},
        }
    assert answers[-1] == {"jsonrpc": "2.0", "id": "last", "result": {}}


@pytest.mark.parametrize("message_id", BAD_IDS)
def test_the_check_is_the_one_http_applies(message_id: str) -> None:
    answer = refusal(_ping(message_id).encode())
    assert answer is not None
    assert answer["id"] is None
    assert answer["error"] == {
        "code": -32600,
        "message": "Invalid Request: not a JSON-RPC 2.0 message.",
    }
    assert refusal(_ping("7").encode()) is None
    assert refusal(_ping('"x"').encode()) is None


@pytest.mark.parametrize(
    ("message", "code"),
    [
        # JSON-RPC 2.0 allows positional params; MCP names them: invalid params, not "no message".
        ({"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": [{"name": "x"}]}, -32602),
        ({"jsonrpc": "2.0", "id": "14", "method": "tools/list", "params": "x"}, -32602),
        ({"id": 15, "method": "ping"}, -32600),
        ({"jsonrpc": "1.0", "id": 16, "method": "ping"}, -32600),
        ({"jsonrpc": "2.0", "id": 17, "method": 5}, -32600),
        ({"jsonrpc": "2.0", "id": 18}, -32600),
    ],
)
def test_a_refused_request_with_a_readable_id_is_answered_with_it(
    message: dict[str, object], code: int
) -> None:
    # Stdio (problem) and /mcp (refusal) answer alike: the client's waiting call gets it.
    answer = refusal(json.dumps(message).encode())
    assert answer is not None
    assert answer["id"] == message["id"]
    assert answer["error"]["code"] == code  # type: ignore[index]
    found = problem(json.dumps(message))
    assert found is not None
    assert (found.code, found.request_id) == (code, message["id"])


def test_a_malformed_response_is_still_answered_without_its_id() -> None:
    # Its id names a request of the server's: answering with it would answer the wrong call.
    answer = refusal(b'{"jsonrpc": "2.0", "id": 3, "result": 5}')
    assert answer is not None
    assert answer["id"] is None
