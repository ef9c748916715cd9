"""Two tools of one MCP server whose names differ only in case: the second is left out, told so.

The warning said the registry's words for a Python tool module imported twice ("name it by
its module ... APTIX_TOOL_MODULES"), after an ERROR line of the same words: neither applies to
a server's listing (review r6 F4).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aptix import AgentToolRegistry, ToolContractError
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import RecordingLogger
from aptix.tools.builtin.calculator import CalculatorTool
from tests.tools.mcp_servers import listed_server

_EMPTY = {"type": "object", "properties": {}}


async def _left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tools: str
) -> tuple[list[str], list[str]]:
    """The server's tools offered and the warnings leaving tools out; no words for modules."""
    server = listed_server(tmp_path, tools)
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, mcp_servers={"cs": server})
    async with open_runtime(settings) as runtime:
        offered = [t for t in runtime.registry.registered_tools if t.lower().startswith("cs_")]
    logged = capsys.readouterr().err
    assert "imported twice" not in logged
    assert "APTIX_TOOL_MODULES" not in logged
    assert "AgentToolRegistry_Register" not in logged  # no ERROR line from the registry
    return offered, [line for line in logged.splitlines() if "is left out" in line]


async def test_a_tool_named_as_another_but_for_case_is_left_out_with_advice_for_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = [
        {"name": "Wipe", "inputSchema": _EMPTY},
        {"name": "wipe", "inputSchema": _EMPTY, "annotations": {"readOnlyHint": True}},
    ]
    offered, warnings = await _left_out(tmp_path, capsys, json.dumps(tools))
    assert offered == ["cs_Wipe"]
    assert len(warnings) == 1, warnings
    assert "WARNING" in warnings[0]
    assert (
        "MCP server 'cs': tool 'wipe' is left out: its name 'cs_wipe' is that of the server's "
        "tool 'Wipe', offered as 'cs_Wipe' (tool names are compared case-insensitively"
    ) in warnings[0]
    assert "rename one in the server's own configuration" in warnings[0]


async def test_a_tool_listed_twice_is_offered_once_told_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = [{"name": "dup", "inputSchema": _EMPTY}, {"name": "dup", "inputSchema": _EMPTY}]
    offered, warnings = await _left_out(tmp_path, capsys, json.dumps(tools))
    assert offered == ["cs_dup"]
    assert len(warnings) == 1, warnings
    assert "MCP server 'cs': tool 'dup' is left out: the server lists it twice" in warnings[0]


class _First(CalculatorTool):
    """One class of this module that takes the calculator's name."""


class _Second(CalculatorTool):
    """Another class of the same module, with the same name."""


def test_two_classes_of_one_module_with_one_name_are_not_told_imported_twice() -> None:
    registry = AgentToolRegistry(RecordingLogger())
    registry.register(_First)
    with pytest.raises(ToolContractError) as raised:
        registry.register(_Second)
    assert "is already registered as 'agent_calculator'" in str(raised.value)
    assert "imported twice" not in str(raised.value)
