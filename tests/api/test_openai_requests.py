"""``POST /v1/chat/completions`` refuses a malformed request with a 400 that says what is wrong."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply
from tests.api.conftest import KEYS, A


def _echo(request: LlmRequest) -> LlmResponse:
    return reply(f"echo: {request.messages[-1]['content']}")


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, api_keys=KEYS, semantic_matching=False
    )
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=FunctionModel(_echo))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test/v1", headers=A
        ) as client:
            yield client


async def _refused(http: httpx.AsyncClient, **body: Any) -> str:
    response = await http.post("/chat/completions", json={"model": "aptix-general", **body})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    message: str = error["message"]
    return message


def _tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("part", [{"type": "text"}, {"type": "text", "text": 5}])
async def test_a_text_part_without_text_says_so(http: httpx.AsyncClient, part: Any) -> None:
    message = await _refused(http, messages=[{"role": "user", "content": [part]}])
    assert message == "messages[0]: A content part of type 'text' has no 'text' string."


@pytest.mark.parametrize(
    ("part", "told"),
    [
        ({"type": "image_url", "image_url": {"url": "x"}}, "type 'image_url' are not supported"),
        ({"type": "text"}, "type 'text' has no 'text' string"),
    ],
)
async def test_an_unreadable_part_in_an_earlier_message_is_a_400(
    http: httpx.AsyncClient, part: Any, told: str
) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [part]},
        {"role": "assistant", "content": "seen"},
        {"role": "user", "content": "and now?"},
    ]
    message = await _refused(http, messages=messages)
    assert message.startswith("messages[1]: "), message
    assert told in message


@pytest.mark.parametrize(
    ("names", "told"),
    [
        (("a", "a"), "The request lists the client tool 'a' twice;"),
        (
            ("get_weather", "GET_WEATHER"),
            "The request lists the client tool 'GET_WEATHER' twice (as 'get_weather' and "
            "'GET_WEATHER');",
        ),
    ],
)
async def test_a_client_tool_listed_twice_is_named_as_a_duplicate(
    http: httpx.AsyncClient, names: tuple[str, str], told: str
) -> None:
    message = await _refused(http, messages=HI, tools=[_tool(n) for n in names])
    assert message.startswith(told), message
    assert "deployment" not in message


async def test_a_client_tool_named_like_a_server_tool_is_a_clash(
    http: httpx.AsyncClient,
) -> None:
    message = await _refused(http, messages=HI, tools=[_tool("Agent_Calculator")])
    assert "has the name of a tool this deployment already has" in message


async def test_text_parts_with_text_are_read(http: httpx.AsyncClient) -> None:
    content = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    response = await http.post(
        "/chat/completions",
        json={"model": "aptix-general", "messages": [{"role": "user", "content": content}]},
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "echo: one\ntwo"
