"""Caps on what an MCP server's tools bring into every request (issue 20)."""

from __future__ import annotations

import types as pytypes
from typing import Any

import pytest
from mcp import types

from aptix.reasoner.context import ContextBudget, ContextOverflowError, EstimatedTokens
from aptix.tools.mcp_source.tool import (
    MAX_DESCRIPTION_CHARS,
    MAX_PROPERTY_DESCRIPTION_CHARS,
    make_mcp_tool,
)

CONNECTION: Any = pytypes.SimpleNamespace(name="huge")


def _remote(description: str, properties: dict[str, Any]) -> types.Tool:
    return types.Tool(
        name="big",
        description=description,
        input_schema={"type": "object", "properties": properties},
    )


def test_huge_descriptions_are_cut_with_a_warning_naming_server_and_tool() -> None:
    warnings: list[str] = []
    remote = _remote("d" * 2_000_000, {"q": {"type": "string", "description": "p" * 50_000}})
    tool = make_mcp_tool(CONNECTION, remote, "huge_big", "never", warnings.append)
    schema = tool.schema()
    assert len(schema["description"]) == MAX_DESCRIPTION_CHARS
    prop = schema["parameters"]["properties"]["q"]
    assert len(prop["description"]) == MAX_PROPERTY_DESCRIPTION_CHARS
    assert len(warnings) == 2
    assert all(w.startswith("MCP server 'huge', tool 'big':") for w in warnings)
    assert "2000000 characters; cut to 4000" in warnings[1]


def test_a_schema_over_the_cap_is_refused_naming_server_and_tool() -> None:
    properties = {f"p{i}": {"type": "string", "enum": ["x" * 100] * 50} for i in range(20)}
    with pytest.raises(ValueError, match=r"MCP server 'huge', tool 'big': its input schema has"):
        make_mcp_tool(CONNECTION, _remote("fine", properties), "huge_big", "never")


def test_a_turn_that_does_not_fit_names_the_tool_schemas_taking_the_room() -> None:
    remote = _remote("d" * 3_900, {"q": {"type": "string", "description": "p" * 900}})
    tool = make_mcp_tool(CONNECTION, remote, "huge_big", "never")
    small = {"type": "function", "name": "small", "description": "s", "parameters": {}}
    budget = ContextBudget(800, counter=EstimatedTokens())
    system = {"role": "system", "content": "You help."}
    with pytest.raises(ContextOverflowError) as caught:
        budget.fit(system, [], [{"role": "user", "content": "hi"}], [small, tool.schema()])
    message = str(caught.value)
    assert "The tool schemas take about" in message
    assert "the largest: 'huge_big'" in message
    assert "Shorten the instruction" not in message
    with pytest.raises(ContextOverflowError, match="Shorten the instruction"):
        budget.fit(system, [], [{"role": "user", "content": "word " * 2_000}], [small])
