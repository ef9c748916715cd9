"""A request's client tools clash with each other or with the deployment: each is told apart."""

from __future__ import annotations

import pytest

from aptix.errors import ToolContractError
from aptix.testing import RecordingLogger
from aptix.tools.builtin.hello_world import HelloWorldTool
from aptix.tools.client import ClientToolSpec, client_tool_classes
from aptix.tools.registry import AgentToolRegistry


def _registry() -> AgentToolRegistry:
    registry = AgentToolRegistry(RecordingLogger())
    registry.register(HelloWorldTool)
    return registry


def _with(*names: str) -> AgentToolRegistry:
    specs = [ClientToolSpec(name, "the client's") for name in names]
    return _registry().with_client_tools(client_tool_classes(specs))


def test_the_same_client_tool_twice_is_a_duplicate_in_the_request() -> None:
    with pytest.raises(ToolContractError) as refused:
        _with("a", "a")
    assert str(refused.value) == (
        "The request lists the client tool 'a' twice; names are compared case-insensitively, "
        "so list each tool once."
    )


def test_names_differing_only_in_case_are_the_same_tool() -> None:
    with pytest.raises(ToolContractError) as refused:
        _with("get_weather", "GET_WEATHER")
    message = str(refused.value)
    assert message.startswith(
        "The request lists the client tool 'GET_WEATHER' twice (as 'get_weather' and 'GET_WEATHER')"
    )
    assert "deployment" not in message


def test_a_real_clash_with_the_deployment_keeps_its_message() -> None:
    with pytest.raises(ToolContractError, match="this deployment already has"):
        _with("get_weather", "agent_hello_world")


def test_distinct_client_tools_are_all_offered() -> None:
    registry = _with("get_weather", "get_time")
    assert registry.has_tool("get_weather")
    assert registry.has_tool("GET_TIME")
    assert registry.has_tool("agent_hello_world")
