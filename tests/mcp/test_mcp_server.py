"""MCP through the ``mcp`` package's own client: in memory, over stdio and over HTTP."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from mcp import StdioServerParameters
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from aptix.mcp import build_mcp_server
from aptix.mcp.server import INVALID_CURSOR
from aptix.runtime import Runtime
from tests.api.live import serve


async def test_lists_only_server_final_tools_with_usage_text(runtime: Runtime) -> None:
    async with Client(build_mcp_server(runtime)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert "agent_calculator" in tools
    assert "request_user_approval" not in tools
    calculator = tools["agent_calculator"]
    assert "exact arithmetic result" in (calculator.description or "")
    assert calculator.input_schema["required"] == ["expression"]


async def test_calls_run_through_the_executor(runtime: Runtime) -> None:
    async with Client(build_mcp_server(runtime)) as client:
        calculated = await client.call_tool("agent_calculator", {"expression": "2*(3+4)"})
        modes = await client.call_tool("agent_list_modes", {"includeExamples": True})
    assert not calculated.is_error
    assert json.loads(calculated.content[0].text)["result"] == 14  # type: ignore[union-attr]
    assert calculated.structured_content["result"] == 14  # type: ignore[index]
    keys = [m["key"] for m in json.loads(modes.content[0].text)["modes"]]  # type: ignore[union-attr]
    assert keys[0] == "general"


async def test_bad_arguments_and_unknown_tools_are_error_results(runtime: Runtime) -> None:
    async with Client(build_mcp_server(runtime)) as client:
        empty = await client.call_tool("agent_calculator", {"expression": ""})
        unknown = await client.call_tool("request_user_approval", {"prompt": "x"})
    assert empty.is_error
    assert empty.content[0].text == "CalculatorTool requires a non-empty 'expression' string."  # type: ignore[union-attr]
    assert unknown.is_error


async def test_session_rules_apply(runtime: Runtime) -> None:
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    change = {"mode": "calculation", "branch": False, "reason": "r", "sessionId": created.result.id}
    async with Client(build_mcp_server(runtime, org="globex", user="eve")) as client:
        refused = await client.call_tool("agent_change_mode", change)
    assert refused.is_error
    async with Client(build_mcp_server(runtime, org="acme", user="ann")) as client:
        changed = await client.call_tool("agent_change_mode", change)
    assert not changed.is_error


async def test_aptix_mcp_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "aptix", "mcp"],
        env={**os.environ, "APTIX_DATA_DIR": str(tmp_path), "APTIX_SEMANTIC_MATCHING": "false"},
    )
    async with Client(params) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("agent_hello_world", {"name": "Ann"})
    assert "agent_hello_world" in names
    assert "Hello, Ann!" in result.content[0].text  # type: ignore[union-attr]


async def test_mcp_over_http_on_the_served_app(tmp_path: Path) -> None:
    with serve(tmp_path, APTIX_SEMANTIC_MATCHING="false") as base:
        async with Client(f"{base}/mcp") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("agent_calculator", {"expression": "1+1"})
    assert "agent_list_modes" in names
    assert json.loads(result.content[0].text)["result"] == 2  # type: ignore[union-attr]


async def test_listing_carries_title_annotations_output_schema_and_session_id(
    runtime: Runtime,
) -> None:
    async with Client(build_mcp_server(runtime)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        greeted = await client.call_tool("agent_hello_world", {"name": "Ann"})
    calculator = tools["agent_calculator"]
    assert calculator.title == "Calculator"
    assert calculator.annotations is not None
    assert calculator.annotations.read_only_hint is True
    authoring = tools["agent_workflow_authoring"].annotations
    assert authoring is not None
    assert authoring.destructive_hint is True
    for tool in tools.values():
        assert tool.input_schema["properties"]["sessionId"]["type"] == "string"
        assert "sessionId" not in tool.input_schema["required"]
    hello = tools["agent_hello_world"]
    assert hello.output_schema is not None
    assert set(hello.output_schema["properties"]) == {"message", "conversationId", "sessionId"}
    assert greeted.structured_content is not None
    assert greeted.structured_content["message"] == "Hello, Ann! Welcome to Aptix."


async def test_a_cursor_is_refused_as_invalid_params_since_none_is_ever_handed_out(
    runtime: Runtime,
) -> None:
    async with Client(build_mcp_server(runtime)) as client:
        listed = await client.list_tools()
        with pytest.raises(MCPError) as refused:
            await client.list_tools(cursor="garbage")
    assert listed.next_cursor is None
    assert refused.value.code == -32602
    assert refused.value.message == INVALID_CURSOR
