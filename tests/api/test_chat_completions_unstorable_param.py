"""A NUL or lone surrogate in a chat request is refused naming the message, as other refusals.

The review found ``param: null`` and pydantic's words (``body: Value error, ...``) in the
message. Driven by the real ``openai`` client in process; a lone surrogate, which it cannot
encode, is sent as the ``\\ud800`` escape another client may send.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from aptix.api import create_app
from aptix.nul import SURROGATE_REFUSED
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel
from tests.api.conftest import A

TOOL = {"type": "function", "function": {"name": "lookup", "description": "nul \x00 here"}}


@pytest.fixture
def client(openai_client: AsyncOpenAI) -> AsyncOpenAI:
    return openai_client


CASES: list[tuple[dict[str, Any], str | None, str]] = [
    ({"messages": [{"role": "user", "content": "a \x00 b"}]}, "messages[0]", "messages[0].content"),
    (
        {"messages": [{"role": "user", "content": "hi"}], "tools": [TOOL]},
        "tools[0]",
        "tools[0].function.description",
    ),
    (
        {"messages": [{"role": "user", "content": "hi"}], "extra_body": {"user": "x\x00"}},
        "user",
        "user",
    ),
    # A NUL in a key's own name: no field can be named, and the key is shown escaped.
    (
        {"messages": [{"role": "user", "content": "hi"}], "extra_body": {"a\x00b": 1}},
        None,
        "a\\u0000b",
    ),
]


@pytest.mark.parametrize(("request_", "param", "where"), CASES)
async def test_unstorable_text_is_refused_naming_its_field(
    client: AsyncOpenAI,
    model: ScriptedModel,
    request_: dict[str, Any],
    param: str | None,
    where: str,
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="aptix-general", **request_)
    assert refused.value.code == "invalid_request_error"
    assert refused.value.param == param
    body = refused.value.body
    assert isinstance(body, dict)
    message = str(body["message"])
    assert message.startswith("Invalid request: ")
    assert message.endswith(f"(found in '{where}').")
    # Not pydantic's words: its error kind and where in its model the check ran.
    assert "Value error" not in message
    assert "body:" not in message
    assert model.requests == []


async def test_a_lone_surrogate_is_refused_naming_its_message(
    keyed_runtime: Runtime, model: ScriptedModel
) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": [{"type": "text", "text": "lone \ud800"}]},
    ]
    body = json.dumps({"model": "aptix-general", "messages": messages})  # escapes U+D800
    app = create_app(runtime=keyed_runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test/v1", headers=A) as h:
        refused = await h.post(
            "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", "messages[2]")
    assert error["message"] == (
        f"Invalid request: {SURROGATE_REFUSED} (found in 'messages[2].content[0].text')."
    )
    assert model.requests == []
