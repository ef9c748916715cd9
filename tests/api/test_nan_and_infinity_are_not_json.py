"""``NaN``, ``Infinity`` and ``-Infinity`` in a request body are refused as bad JSON, naming where.

Python's JSON reader takes them; RFC 8259 has no such numbers. A ``response_format`` schema
holding one was stored in the turn's JSON column, which PostgreSQL refuses (500
``internal_error``, review r5 F1), and sent on to the model, whose client could not encode it
(502 ``model_error`` blaming the endpoint, on both databases, F2). On SQLite and PostgreSQL,
with the real ``openai`` client to a scripted OpenAI-compatible server that records what it
was asked.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from aptix.api import create_app
from aptix.api.json_body import JsonBodyRoute
from aptix.runtime import Runtime
from aptix.settings import AptixSettings
from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer
from tests.api.conftest import scripted_settings

JSON = {"content-type": "application/json"}
TOKENS = ["NaN", "Infinity", "-Infinity"]
HI = b'"messages": [{"role": "user", "content": "hi"}]'


@pytest.fixture
def settings(
    database_url: str, tmp_path: Path, model_server: ScriptedOpenAIServer
) -> AptixSettings:
    """The runtime's model is ``model_server``: a test sees what reached it (nothing, refused)."""
    return scripted_settings(tmp_path, database_url, model_server)


@pytest.fixture
def client(no_model_client: httpx.AsyncClient) -> httpx.AsyncClient:
    """The HTTP API and the OpenAI routes of the app on that runtime."""
    return no_model_client


def _openai_refusal(token: str, where: str, param: str) -> dict[str, object]:
    message = f"The request body is not valid JSON: {token} is not a JSON number (at '{where}')."
    return {
        "error": {
            "code": "invalid_request_error",
            "message": message,
            "type": "invalid_request_error",
            "param": param,
        }
    }


async def _sessions(client: httpx.AsyncClient) -> list[str]:
    """The sessions on record: on PostgreSQL, other tests' too (one database a worker)."""
    listed = await client.get("/v1/sessions")
    assert listed.status_code == 200, listed.text
    return sorted(s["sessionId"] for s in listed.json())


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("strict", [b"false", b"true"])
async def test_a_response_format_schema_with_one_is_400_naming_response_format(
    client: httpx.AsyncClient, model_server: ScriptedOpenAIServer, token: str, strict: bytes
) -> None:
    body = (
        b'{"model": "aptix-general", ' + HI + b', "response_format": {"type": "json_schema", '
        b'"json_schema": {"name": "x", "strict": ' + strict + b', "schema": {"type": "object", '
        b'"properties": {"a": {"type": "number", "minimum": ' + token.encode() + b"}}}}}}"
    )
    before = await _sessions(client)
    answer = await client.post("/v1/chat/completions", content=body, headers=JSON)
    assert answer.status_code == 400, answer.text
    where = "response_format.json_schema.schema.properties.a.minimum"
    assert answer.json() == _openai_refusal(token, where, "response_format")
    assert model_server.requests == []
    assert await _sessions(client) == before  # none made


async def test_a_client_tools_parameters_with_one_is_400_naming_the_tool(
    client: httpx.AsyncClient, model_server: ScriptedOpenAIServer
) -> None:
    body = (
        b'{"model": "aptix-general", ' + HI + b', "tools": [{"type": "function", "function": '
        b'{"name": "get_weather", "parameters": {"type": "object", "properties": {"t": '
        b'{"type": "number", "minimum": NaN}}}}}]}'
    )
    before = await _sessions(client)
    answer = await client.post("/v1/chat/completions", content=body, headers=JSON)
    assert answer.status_code == 400, answer.text
    where = "tools[0].function.parameters.properties.t.minimum"
    assert answer.json() == _openai_refusal("NaN", where, "tools[0]")
    assert model_server.requests == []
    assert await _sessions(client) == before  # none made


@pytest.mark.parametrize("token", TOKENS)
async def test_on_the_http_api_it_is_422_invalid_request_saying_where(
    client: httpx.AsyncClient, token: str
) -> None:
    body = b'{"arguments": {"expression": "1", "x": [1, ' + token.encode() + b"]}}"
    answer = await client.post("/v1/tools/agent_calculator/invoke", content=body, headers=JSON)
    assert answer.status_code == 422, answer.text
    message = (
        f"The request body is not valid JSON: {token} is not a JSON number (at 'arguments.x[1]')."
    )
    assert answer.json() == {"error": {"code": "invalid_request", "message": message}}


async def test_the_words_inside_a_string_are_text_and_a_key_is_shown_escaped(
    client: httpx.AsyncClient, model_server: ScriptedOpenAIServer
) -> None:
    model_server.add(reply("Noted."))
    said = {"role": "user", "content": "NaN, Infinity and -Infinity are words here."}
    answer = await client.post(
        "/v1/chat/completions", json={"model": "aptix-general", "messages": [said]}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "Noted."
    # A key's own text goes into the message: a NUL in it is shown as its escape.
    body = b'{"arguments": {"a\\u0000b": NaN}}'
    refused = await client.post("/v1/tools/agent_calculator/invoke", content=body, headers=JSON)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["message"] == (
        "The request body is not valid JSON: NaN is not a JSON number (at 'arguments.a\\u0000b')."
    )


@pytest.mark.parametrize(("number", "shown"), [("1e999", "1e999"), ("-1e999", "-1e999")])
async def test_a_number_beyond_a_float_is_400_too(
    client: httpx.AsyncClient, model_server: ScriptedOpenAIServer, number: str, shown: str
) -> None:
    # JSON has 1e999, but a float reads it as infinity (review s2 F1): it was a 500.
    body = (
        b'{"model": "aptix-general", ' + HI + b', "response_format": {"type": "json_schema", '
        b'"json_schema": {"name": "x", "schema": {"type": "number", "maximum": '
        + number.encode()
        + b"}}}}"
    )
    answer = await client.post("/v1/chat/completions", content=body, headers=JSON)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == "response_format"
    assert answer.json()["error"]["message"] == (
        f"The request body is not valid JSON: {shown} is beyond the numbers Aptix reads "
        "(64-bit floats) (at 'response_format.json_schema.schema.maximum')."
    )
    assert model_server.requests == []
    digits = b"9" * 400 + b".5"
    tool = b'{"arguments": {"expression": "1", "x": ' + digits + b"}}"
    refused = await client.post("/v1/tools/agent_calculator/invoke", content=tool, headers=JSON)
    assert refused.status_code == 422, refused.text
    assert f"{'9' * 40}… is beyond the numbers" in refused.json()["error"]["message"]
    fine = b'{"arguments": {"expression": "1", "x": [1e308, -0.0, 0.5]}}'
    read = await client.post("/v1/tools/agent_calculator/invoke", content=fine, headers=JSON)
    assert read.status_code == 200, read.text


def test_every_route_of_the_app_reads_its_body_this_way(runtime: Runtime) -> None:
    app = create_app(runtime=runtime)
    # The routers' routes too: FastAPI keeps an included router whole, not its routes.
    contexts = [
        c for c in iter_route_contexts(app.routes) if isinstance(c.original_route, APIRoute)
    ]
    assert {c.path for c in contexts} >= {"/v1/chat/completions", "/v1/agent/execute", "/"}
    assert [c.path for c in contexts if not isinstance(c.original_route, JsonBodyRoute)] == []


async def test_a_constant_deep_in_a_body_is_found_without_recursion(
    client: httpx.AsyncClient,
) -> None:
    # Deep, yet within the parser's limit under any runner: an xdist worker's stack leaves
    # fewer levels than a plain run's (900 nested too deep there).
    depth = 500
    body = b'{"arguments": {"x": ' + b"[" * depth + b"-Infinity" + b"]" * depth + b"}}"
    answer = await client.post("/v1/tools/agent_calculator/invoke", content=body, headers=JSON)
    assert answer.status_code == 422, answer.text
    message = answer.json()["error"]["message"]
    assert message.startswith("The request body is not valid JSON: -Infinity is not a JSON number")
    assert "(at 'arguments.x[0][0][0]" in message
    assert message.endswith("…').")
