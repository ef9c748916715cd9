"""A number JSON cannot write back is refused wherever it sits in a tool's arguments.

Round 71 refused ``1e999``, ``NaN`` and ``Infinity`` in a float argument of a ``ToolArgs``
model, but a model nested in the arguments keeps pydantic's default and took them: over MCP,
whose reader takes ``1e999`` (HTTP refuses the body first), the tool got infinity. Now the
arguments of every tool, class or function, are refused naming the number's place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

import aptix
from aptix import ToolArgs, parse_arguments
from aptix.testing import RecordingLogger
from aptix.tools.context import AgentToolExecutionContext
from tests.mcp.over_stdio import stdio_answers

CONTEXT = AgentToolExecutionContext(org="acme", user="ann", conversation_id="c")


class _Point(BaseModel):
    x: float = 0.0
    tags: dict[str, Any] = {}


class _Shape(ToolArgs):
    point: _Point | None = Field(None, description="A point.")
    points: list[_Point] = Field(default_factory=list, description="More points.")
    extra: dict[str, Any] = Field(default_factory=dict, description="Anything.")


@aptix.tool(usage="Call this to test.")
async def shape(point: _Point) -> dict[str, Any]:
    """Tests.

    Args:
        point: A point.
    """
    return {"x": point.x}


CASES = [
    ('{"point": {"x": 1e999}}', "point.x"),
    ('{"point": {"x": -1e999}}', "point.x"),
    ('{"point": {"x": NaN}}', "point.x"),
    ('{"point": {"x": Infinity}}', "point.x"),
    ('{"points": [{"x": 1}, {"x": -Infinity}]}', "points.1.x"),
    ('{"point": {"tags": {"deep": [1e400]}}}', "point.tags.deep.0"),
    ('{"extra": {"Weight": 2E+999}}', "extra.Weight"),
    ('{"extra": {"long": %s.5}}' % ("9" * 400), "extra.long"),
]


@pytest.mark.parametrize(("text", "place"), CASES)
def test_a_class_tools_arguments_are_refused_naming_the_place(text: str, place: str) -> None:
    parsed = parse_arguments(_Shape, text)
    assert parsed.error_message == f"Invalid arguments: '{place}': input should be a finite number."


@pytest.mark.parametrize(
    "text",
    [
        '{"point": {"x": 1e308}}',
        '{"point": {"x": -0.0, "tags": {"note": "NaN and Infinity and 1e999 as text"}}}',
        '{"points": [{"x": 5e-324}], "extra": {"big": 99999999999999999999999}}',
    ],
)
def test_finite_numbers_and_words_that_look_like_others_are_read(text: str) -> None:
    parsed = parse_arguments(_Shape, text)
    assert parsed.error_message is None


@pytest.mark.parametrize(
    "text",
    ['{"point": {"x": 1}, "ignored": NaN}', '{"point": {"x": 1, "junk": 1e999}}'],
)
def test_a_key_the_tool_ignores_is_no_matter(text: str) -> None:
    # Review s4 F2: the check read the text, so a key no field takes failed the call.
    parsed = parse_arguments(_Shape, text)
    assert parsed.error_message is None
    assert parsed.result is not None
    assert parsed.result.point == _Point(x=1)


def test_keys_are_named_as_sent() -> None:
    parsed = parse_arguments(_Shape, '{"Points": [{"X": 2}, {"X": NaN}]}')
    assert (
        parsed.error_message == "Invalid arguments: 'Points.1.X': input should be a finite number."
    )


async def test_a_function_tool_refuses_it_too() -> None:
    tool = shape(RecordingLogger())
    refused = await tool.execute('{"point": {"x": 1e999}}', CONTEXT)
    assert refused.error_message == "Invalid arguments: 'point.x': input should be a finite number."
    ran = await tool.execute('{"point": {"x": 2.5}}', CONTEXT)
    assert json.loads(ran.result or "") == {"x": 2.5}


def test_over_mcp_stdio_the_tool_is_not_run(tmp_path: Path) -> None:
    module = tmp_path / "shape_tools.py"
    module.write_text(
        "from pydantic import BaseModel\nimport aptix\n\n\n"
        "class Point(BaseModel):\n    x: float = 0.0\n\n\n"
        "@aptix.tool(usage='Call this to test.')\n"
        "async def shape(point: Point) -> dict:\n"
        "    '''Tests.\n\n    Args:\n        point: A point.\n    '''\n"
        "    return {'x': point.x}\n"
    )
    call = (
        '{"jsonrpc": "2.0", "id": %d, "method": "tools/call",'
        ' "params": {"name": "shape", "arguments": {"point": {"x": %s}}}}'
    )
    initialize = (
        '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion":'
        ' "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}'
    )
    lines = [initialize, '{"jsonrpc": "2.0", "method": "notifications/initialized"}']
    calls = [call % (2, "1e999"), call % (3, "2.5")]
    answers = stdio_answers(tmp_path, [*lines, *calls], APTIX_TOOL_MODULES=str(module))
    answers = sorted(answers, key=lambda answer: answer["id"])[1:]  # as they finish
    assert answers[0]["result"]["isError"] is True
    assert answers[0]["result"]["content"][0]["text"] == (
        "Invalid arguments: 'point.x': input should be a finite number."
    )
    assert answers[1]["result"]["isError"] is False
    assert answers[1]["result"]["structuredContent"] == {"x": 2.5}
