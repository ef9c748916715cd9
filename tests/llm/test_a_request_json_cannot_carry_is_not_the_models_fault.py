"""A request of Aptix's own that JSON cannot carry is never blamed on the model endpoint.

The ``openai`` client encodes the request strictly: ``NaN`` in a tool's schema or the answer's
format raised a ``ValueError`` inside the call, which the client's broad net for unreadable
answers turned into "The model endpoint sent a response Aptix cannot read" (a 502
``model_error`` over HTTP, review r5 F2). The endpoint was never asked. The real ``openai``
client against the scripted server, which records every request it gets.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from aptix.llm.openai_client import OpenAiLlmClient
from aptix.llm.types import LlmRequest
from aptix.testing import reply
from aptix.testing.server import ScriptedOpenAIServer

HI: Any = ({"role": "user", "content": "Hi"},)


def _tool(minimum: float) -> dict[str, Any]:
    number = {"type": "number", "minimum": minimum}
    parameters = {"type": "object", "properties": {"t": number}}
    return {"type": "function", "name": "t", "description": "T.", "parameters": parameters}


def _format(maximum: float) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"a": {"type": "number", "maximum": maximum}}}
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    ("request_", "where"),
    [
        (LlmRequest(HI, tools=(_tool(1), _tool(math.nan))), "tools[1]"),
        (LlmRequest(HI, response_format=_format(math.inf)), "response_format"),
        # Text no UTF-8 encoder takes is no more the endpoint's doing.
        (LlmRequest(HI, tools=({**_tool(1), "description": "\ud800"},)), "tools[0]"),
    ],
)
async def test_it_is_an_error_of_the_request_naming_the_part(
    server: ScriptedOpenAIServer, api: str, request_: LlmRequest, where: str
) -> None:
    client = OpenAiLlmClient(base_url=server.base_url, api_key=None, model="m", api=api)
    try:
        with pytest.raises(ValueError, match="cannot be sent as JSON") as refused:
            await client.complete(request_)
    finally:
        await client.close()
    assert f"The request to the model cannot be sent as JSON: {where} " in str(refused.value)
    assert "endpoint" not in str(refused.value)
    assert server.requests == []


async def test_a_request_json_can_carry_is_sent(server: ScriptedOpenAIServer) -> None:
    server.add(reply("Fine."))
    client = OpenAiLlmClient(base_url=server.base_url, api_key=None, model="m")
    try:
        answer = await client.complete(
            LlmRequest(HI, tools=(_tool(1.5),), response_format=_format(1e308))
        )
    finally:
        await client.close()
    assert answer.text == "Fine."
    assert len(server.requests) == 1
