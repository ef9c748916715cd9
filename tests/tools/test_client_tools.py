"""Tools a client declares for one request: offered, handed back, and still under the guard."""

from __future__ import annotations

import pytest

from aptix.errors import ToolContractError
from aptix.testing import RecordingLogger
from aptix.tools.base import AgentTool
from aptix.tools.builtin.hello_world import HelloWorldTool
from aptix.tools.client import ClientToolSpec, client_tool_classes
from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
from aptix.tools.executor import AgentToolExecutor
from aptix.tools.registry import AgentToolRegistry

WEATHER = ClientToolSpec(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}},
)


def _executor(refuse: str | None = None) -> AgentToolExecutor:
    logger = RecordingLogger()
    registry = AgentToolRegistry(logger)
    registry.register(HelloWorldTool)

    def guard(tool: AgentTool, context: AgentToolExecutionContext) -> str | None:
        return refuse

    return AgentToolExecutor(registry, logger, guard=guard)


async def test_a_client_tool_is_handed_back_with_its_arguments() -> None:
    base = _executor(refuse="not offered in this mode")
    executor = base.with_client_tools(client_tool_classes([WEATHER]))
    call = await executor.execute(
        AgentToolCall("c1", "get_weather", '{"city": "Oslo"}'), AgentToolExecutionContext()
    )
    assert call.requires_client_execution
    assert call.result_json == '{"city": "Oslo"}'
    assert not base.registry.has_tool("get_weather")  # only this request's executor knows it


async def test_while_a_workflow_is_active_its_guard_decides() -> None:
    executor = _executor(refuse="not permitted by the workflow").with_client_tools(
        client_tool_classes([WEATHER])
    )
    context = AgentToolExecutionContext(active_workflow_id="release")
    call = await executor.execute(AgentToolCall("c1", "get_weather", "{}"), context)
    assert call.error_message is not None
    assert "not permitted by the workflow" in call.error_message


async def test_arguments_that_are_not_an_object_fail_readably() -> None:
    executor = _executor().with_client_tools(client_tool_classes([WEATHER]))
    call = await executor.execute(
        AgentToolCall("c1", "get_weather", "[1]"), AgentToolExecutionContext()
    )
    assert call.error_message is not None
    assert "must be a JSON object" in call.error_message


def test_a_client_tool_cannot_shadow_a_server_tool() -> None:
    with pytest.raises(ToolContractError, match="already has"):
        _executor().with_client_tools(
            client_tool_classes([ClientToolSpec("AGENT_HELLO_WORLD", "mine")])
        )
