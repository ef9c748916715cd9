"""JSON nested past Python's recursion limit, sent as text, is bad input (never a 500)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.results import as_json_text, json_value
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, reply
from tests.api.conftest import KEYS, A

DEEP = "[" * 5_000 + "]" * 5_000


def _echo(request: LlmRequest) -> LlmResponse:
    return reply("fine")


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = AptixSettings(
        data_dir=tmp_path, load_plugins=False, api_keys=KEYS, semantic_matching=False
    )
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=FunctionModel(_echo))
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test/v1", headers=A
        ) as client:
            yield client


@pytest.mark.parametrize("tool", ["agent_calculator", "agent_workflow_authoring"])
async def test_deep_arguments_text_is_a_failed_call(http: httpx.AsyncClient, tool: str) -> None:
    response = await http.post(f"/tools/{tool}/invoke", json={"arguments": DEEP})
    assert response.status_code == 200, response.text
    # The authoring tool reports its refusals inside its result (TUL-006), others as errors.
    body = response.json()
    refusal = body["errors"] or body["result"]["errors"]
    assert body["result"] is None or body["result"]["ok"] is False
    assert "JSON object" in refusal[0]["message"]


async def test_deep_arguments_in_an_earlier_assistant_message_are_read(
    http: httpx.AsyncClient,
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": DEEP}}
    messages = [
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "nothing"},
        {"role": "user", "content": "thanks"},
    ]
    response = await http.post(
        "/chat/completions", json={"model": "aptix-general", "messages": messages}
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "fine"


def test_a_deep_tool_result_is_sent_and_shown_as_text() -> None:
    assert json.loads(as_json_text(DEEP)) == DEEP
    assert json_value(DEEP) == DEEP
