"""Client tools may not take names under an MCP server's prefix.

``<prefix>_*`` in a mode or workflow stands for that server's tools and no others
(docs/mcp-servers.md): a client tool named ``annot_evil`` passed a workflow permitting only
``annot_*`` and was handed back to the client as if it were the server's.
"""

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
from aptix.testing import FunctionModel, call, reply
from tests.api.conftest import KEYS, A
from tests.tools.mcp_servers import flaky_server


def _calls_the_named_tool(request: LlmRequest) -> LlmResponse:
    """Calls the tool the user names (``CALL <name>``), else answers."""
    text = str(request.messages[-1]["content"])
    if text.startswith("CALL "):
        return reply(None, call(text.split()[1], {}, id="c1"))
    return reply("done")


def _tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": {}}},
    }


@pytest.fixture
def model() -> FunctionModel:
    return FunctionModel(_calls_the_named_tool)


@pytest.fixture
async def http(tmp_path: Path, model: FunctionModel) -> AsyncIterator[httpx.AsyncClient]:
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        api_keys=KEYS,
        mcp_servers={"annot": flaky_server()},
    )
    async with open_runtime(settings) as runtime:
        app = create_app(runtime=runtime, model=model)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test/v1", headers=A
        ) as c:
            yield c


async def _complete(http: httpx.AsyncClient, name: str) -> httpx.Response:
    return await http.post(
        "/chat/completions",
        json={
            "model": "aptix-general",
            "messages": [{"role": "user", "content": f"CALL {name}"}],
            "tools": [_tool(name)],
        },
    )


@pytest.mark.parametrize("name", ["annot_evil", "ANNOT_Evil"])
async def test_a_client_tool_under_an_mcp_prefix_is_refused(
    http: httpx.AsyncClient, model: FunctionModel, name: str
) -> None:
    response = await _complete(http, name)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"] == (
        f"The client tool {name!r} falls under 'annot_*', the tool names of the MCP server "
        "'annot' (compared case-insensitively); rename it."
    )
    assert model.requests == []  # refused before any turn


async def test_other_client_tools_are_still_handed_back(http: httpx.AsyncClient) -> None:
    response = await _complete(http, "annotate_locally")  # 'annot' without the '_'
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["finish_reason"] == "tool_calls"
