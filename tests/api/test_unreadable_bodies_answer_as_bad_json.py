"""A body JSON cannot read is answered as bad JSON, whatever stopped the reading.

A body that was not UTF-8, nested too deep or held a number too long to convert got
FastAPI's generic 400 ``bad_request`` "There was an error parsing the body", where any other
bad JSON gets 422 ``invalid_request`` (400 ``invalid_request_error`` on the OpenAI routes).
"""

from __future__ import annotations

import httpx
import pytest

JSON = {"content-type": "application/json"}

#: Each body, and what the answer adds to "The request body is not valid JSON".
UNREADABLE = [
    pytest.param(b'{"instruction": "caf\xe9"}', "it is not valid UTF-8", id="not-utf-8"),
    pytest.param(
        b'{"instruction": "hi", "x": ' + b"[" * 4000 + b"]" * 4000 + b"}",
        "it nests too deep",
        id="too-deep",
    ),
    pytest.param(
        b'{"instruction": "hi", "x": ' + b"9" * 5000 + b"}",
        "it has a number too long to read",
        id="long-integer",
    ),
]


@pytest.mark.parametrize("path", ["/v1/agent/execute", "/v1/sessions"])
async def test_a_json_syntax_error_is_the_answer_the_others_match(
    path: str, client: httpx.AsyncClient
) -> None:
    control = await client.post(path, content=b'{"instruction": "hi"', headers=JSON)
    assert control.status_code == 422
    assert control.json() == {
        "error": {"code": "invalid_request", "message": "The request body is not valid JSON."}
    }


@pytest.mark.parametrize(("body", "why"), UNREADABLE)
@pytest.mark.parametrize("path", ["/v1/agent/execute", "/v1/sessions"])
async def test_an_unreadable_body_is_422_invalid_request_saying_why(
    path: str, body: bytes, why: str, client: httpx.AsyncClient
) -> None:
    answer = await client.post(path, content=body, headers=JSON)
    assert answer.status_code == 422, answer.text
    assert answer.json() == {
        "error": {
            "code": "invalid_request",
            "message": f"The request body is not valid JSON: {why}.",
        }
    }


@pytest.mark.parametrize(("body", "why"), UNREADABLE)
async def test_on_chat_completions_it_is_400_invalid_request_error(
    body: bytes, why: str, client: httpx.AsyncClient
) -> None:
    answer = await client.post("/v1/chat/completions", content=body, headers=JSON)
    assert answer.status_code == 400, answer.text
    assert answer.json() == {
        "error": {
            "code": "invalid_request_error",
            "message": f"The request body is not valid JSON: {why}.",
            "type": "invalid_request_error",
            "param": None,
        }
    }
