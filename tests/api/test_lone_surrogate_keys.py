"""A lone surrogate or a NUL in an object key is refused like one in a value, on every route.

Review r4 F6: the refusal's message named the key as it was, and writing a message holding a
lone surrogate failed (500). The key is named with the character escaped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from aptix.api import create_app
from aptix.nul import find_nul, find_surrogate
from aptix.runtime import Runtime
from aptix.testing.models import ScriptedModel
from tests.api.conftest import A

USER = '"model": "aptix-general", "messages": [{"role": "user", "content": "hi"}]'


@pytest.fixture
async def http(keyed_runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime=keyed_runtime, model=ScriptedModel([]))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://test/v1", headers=A
    ) as client:
        yield client


async def _post(http: httpx.AsyncClient, path: str, raw: str) -> httpx.Response:
    return await http.post(path, content=raw, headers={"content-type": "application/json"})


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        (
            '"response_format": {"type": "json_schema", "json_schema": {"name": "K", "schema":'
            ' {"type": "object", "properties": {"\\ud800": {"type": "integer"}}}}}',
            "response_format.json_schema.schema.properties.\\ud800",
        ),
        (
            '"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type":'
            ' "object", "properties": {"\\udfff": {"type": "string"}}}}}]',
            "tools[0].function.parameters.properties.\\udfff",
        ),
        ('"metadata": {"a\\ud800b": "x"}', "metadata.a\\ud800b"),
        ('"metadata": {"a\\u0000b": "x"}', "metadata.a\\u0000b"),
    ],
)
async def test_chat_completions_refuses_an_unstorable_key_with_a_400(
    http: httpx.AsyncClient, extra: str, where: str
) -> None:
    answer = await _post(http, "/chat/completions", "{" + USER + ", " + extra + "}")
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert f"(found in '{where}')" in error["message"]


@pytest.mark.parametrize(
    "raw",
    ['{"instruction": "hi", "\\ud800": 1}', '{"instruction": "hi", "x\\u0000": 1}'],
)
async def test_agent_execute_refuses_an_unstorable_key(http: httpx.AsyncClient, raw: str) -> None:
    answer = await _post(http, "/agent/execute", raw)
    assert answer.status_code == 422, answer.text
    message = answer.json()["error"]["message"]
    assert "are not accepted in text" in message
    assert "\\ud800" in message or "\\u0000" in message
    assert "\x00" not in message


def test_the_location_escapes_the_key() -> None:
    assert find_surrogate({"a": [{"k\udfff": 1}]}) == "a[0].k\\udfff"
    assert find_nul({"a": {"b\x00": 1}}) == "a.b\\u0000"
    assert find_surrogate({"a": {"b": "\ud800"}}) == "a.b"
