"""Every built-in tool takes a boolean argument as JSON ``true`` or ``false`` only.

Review r5 F4 (round 73): ``agent_list_modes`` read ``includeExamples`` as pydantic's lax
bool, so ``"yes"``, ``"on"`` or ``1`` were true and ``"off"`` or ``"0"`` false, while
``agent_change_mode`` refused such a ``branch``; ``request_user_approval``'s ``destructive``
was as lax. Each schema says ``"type": "boolean"``: anything else is now a failed result
naming the argument and what it takes (``branch`` keeps TUL-007 §3.4's words).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aptix.runtime import BUILTIN_TOOLS
from aptix.testing import RecordingLogger
from aptix.tools import AgentToolExecutionContext
from aptix.tools.args import parse_arguments
from aptix.tools.builtin.base import BuiltinTool
from aptix.tools.builtin.list_modes import ListModesTool
from aptix.tools.builtin.user_approval import UserApprovalTool
from tests.tools.test_list_modes import FakeCatalog

NOT_BOOLEANS: list[Any] = ["yes", "on", "1", "true", "off", "0", "false", 1, 0, 1.0, [], {}]


def _flags() -> list[tuple[type[BuiltinTool[Any, Any]], str]]:
    """Each built-in tool with a boolean argument, and that argument's name."""
    found = []
    for tool in BUILTIN_TOOLS:
        properties = tool.schema()["parameters"]["properties"]
        found += [(tool, name) for name, prop in properties.items() if prop["type"] == "boolean"]
    return found  # type: ignore[return-value]


def test_the_builtin_tools_have_these_flags() -> None:
    # A new flag is checked by the test below without a word here; this only says it ran.
    names = {(tool.TOOL_NAME, name) for tool, name in _flags()}
    assert {
        ("agent_list_modes", "includeExamples"),
        ("agent_change_mode", "branch"),
        ("request_user_approval", "destructive"),
    } <= names


@pytest.mark.parametrize("value", NOT_BOOLEANS, ids=repr)
def test_no_builtin_tool_reads_another_value_as_a_boolean(value: Any) -> None:
    for tool, name in _flags():
        parsed = parse_arguments(tool._args_model, json.dumps({name: value}))
        if parsed.result is not None:  # left unset, for the tool to refuse in its own words
            assert parsed.result.model_dump(by_alias=True)[name] is None, tool.TOOL_NAME
        else:
            assert parsed.error_message == (
                f"Invalid arguments: '{name}': input should be true or false."
            ), tool.TOOL_NAME


@pytest.mark.parametrize("value", ["yes", "on", 1, "off", "0"])
async def test_list_modes_refuses_a_flag_that_is_not_a_boolean(
    value: Any, logger: RecordingLogger, context: AgentToolExecutionContext
) -> None:
    catalog = FakeCatalog()
    tool = ListModesTool(catalog, logger)  # type: ignore[arg-type]
    told = await tool.execute(json.dumps({"IncludeExamples": value}), context)
    assert told.result is None
    # Named as the schema spells it, as every argument error is.
    assert told.error_message == (
        "Invalid arguments: 'includeExamples': input should be true or false."
    )
    assert catalog.calls == 0


@pytest.mark.parametrize(("value", "examples"), [(True, True), (False, False), (None, False)])
async def test_list_modes_reads_true_false_and_null(
    value: bool | None,
    examples: bool,
    logger: RecordingLogger,
    context: AgentToolExecutionContext,
) -> None:
    tool = ListModesTool(FakeCatalog(), logger)  # type: ignore[arg-type]
    told = await tool.execute(json.dumps({"includeExamples": value}), context)
    [mode] = json.loads(told.result or "")["modes"]
    assert (mode["exampleUtterances"] is not None) is examples


@pytest.mark.parametrize("value", ["yes", "true", 1])
async def test_user_approval_refuses_a_destructive_that_is_not_a_boolean(
    value: Any, context: AgentToolExecutionContext
) -> None:
    arguments = json.dumps({"prompt": "Delete the report?", "destructive": value})
    told = await UserApprovalTool(RecordingLogger()).execute(arguments, context)
    assert told.error_message == "Invalid arguments: 'destructive': input should be true or false."
