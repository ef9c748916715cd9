"""A tool the ``mcp`` SDK cannot read is left out alone; the server's other tools are offered.

The SDK reads a page of tools as one, so one such tool hid every tool of its server, with a
warning that named neither the tool nor the problem, or, nested past the SDK's JSON parser,
as "not JSON" and "no answer" (review r6 F2, F3).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.tools import AgentToolCall
from tests.tools.mcp_servers import listed_server

_GOOD = {
    "name": "good",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}


def _nested_schema(depth: int) -> str:
    """A tool whose one property nests ``depth`` arrays, as text (json.dumps recurses)."""
    items = '{"type": "array", "items": ' * depth + '{"type": "string"}' + "}" * depth
    return (
        '{"name": "bad", "description": "deep", "inputSchema": '
        f'{{"type": "object", "properties": {{"a": {items}}}}}}}'
    )


async def _offered(tmp_path: Path, tools: str) -> tuple[list[str], str, str | None]:
    """The server's tools offered, the log, and how a call of the good one ended."""
    server = listed_server(tmp_path, tools, timeout_seconds=5)
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers={"ob": server})
    async with open_runtime(settings) as runtime:
        offered = [t for t in runtime.registry.registered_tools if t.startswith("ob_")]
        call = AgentToolCall("c-good", "ob_good", "{}")
        good = await runtime.executor.execute(call, runtime.tool_context())
    return offered, good.outcome or "", good.error_message


@pytest.mark.parametrize("depth", [250, 5_000])  # past pydantic's parser; past json.loads too
async def test_a_tool_nested_past_the_sdks_parser_is_left_out_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    tools = f"[{json.dumps(_GOOD)}, {_nested_schema(depth)}]"
    offered, outcome, error = await _offered(tmp_path, tools)
    assert offered == ["ob_good"]
    assert outcome == "succeeded", error
    logged = capsys.readouterr().err
    left_out = [line for line in logged.splitlines() if "is left out" in line]
    assert len(left_out) == 1, left_out
    assert (
        "MCP server 'ob': tool 'bad' is left out: its listing nests deeper than the MCP SDK"
        in (left_out[0])
    )
    assert "not JSON" not in logged
    assert "answers no call" not in logged
    assert "failed while listing its tools" not in logged


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (
            {"name": "bad", "inputSchema": {"type": "array"}},
            "(inputSchema.type: Input should be 'object', not \"array\")",
        ),
        ({"name": "bad"}, "(inputSchema: Field required)"),
        ({"name": "bad", "inputSchema": None}, "(inputSchema: Input should be a valid dictionary"),
        (
            {"name": "bad", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": 3}},
            "(annotations.readOnlyHint: Input should be a valid boolean",
        ),
    ],
    ids=["array-schema", "no-schema", "null-schema", "non-bool-hint"],
)
async def test_a_tool_the_sdk_refuses_is_left_out_alone_naming_it_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, Any], why: str
) -> None:
    offered, outcome, error = await _offered(tmp_path, json.dumps([_GOOD, bad]))
    assert offered == ["ob_good"]
    assert outcome == "succeeded", error
    logged = capsys.readouterr().err
    left_out = [line for line in logged.splitlines() if "is left out" in line]
    assert len(left_out) == 1, left_out
    expected = "MCP server 'ob': tool 'bad' is left out: the MCP SDK cannot read its listing "
    assert expected + why in left_out[0], left_out[0]
    assert "failed while listing its tools" not in logged


async def test_a_listed_tool_with_no_name_is_told_by_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nameless = {"inputSchema": {"type": "object"}}
    offered, outcome, error = await _offered(tmp_path, json.dumps([_GOOD, nameless]))
    assert offered == ["ob_good"]
    assert outcome == "succeeded", error
    logged = capsys.readouterr().err
    assert (
        "MCP server 'ob': tool '#2' is left out: the MCP SDK cannot read its listing (name: "
        in (logged)
    )
