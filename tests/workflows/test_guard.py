from __future__ import annotations

import dataclasses

from aptix.testing import RecordingLogger
from aptix.tools import AgentToolCall, AgentToolExecutor, AgentToolRegistry
from aptix.tools.builtin.calculator import CalculatorTool
from aptix.tools.builtin.hello_world import HelloWorldTool
from aptix.tools.builtin.workflow_registry import WorkflowRegistryTool
from aptix.workflows.guard import offered_tools, permitted_tools, workflow_guard
from aptix.workflows.registry import WorkflowRegistry


def executor(registry: WorkflowRegistry, logger: RecordingLogger) -> AgentToolExecutor:
    tools = AgentToolRegistry(logger)
    tools.register(HelloWorldTool)
    tools.register(CalculatorTool)
    tools.register(WorkflowRegistryTool, lambda: WorkflowRegistryTool(registry, logger))
    return AgentToolExecutor(tools, logger, guard=workflow_guard(registry))


async def test_without_an_active_workflow_every_tool_runs(registry, logger, context) -> None:
    done = await executor(registry, logger).execute(
        AgentToolCall("c1", "agent_hello_world", '{"name": "Ann"}'), context
    )
    assert done.was_executed


async def test_permitted_and_always_offered_tools_run_in_a_workflow(
    registry, logger, context
) -> None:
    in_workflow = dataclasses.replace(context, active_workflow_id="create_report")
    run = executor(registry, logger)
    calc = await run.execute(
        AgentToolCall("c1", "agent_calculator", '{"expression": "1+1"}'), in_workflow
    )
    listing = await run.execute(
        AgentToolCall("c2", "agent_workflow_registry", '{"operation": "list_workflows"}'),
        in_workflow,
    )
    assert calc.was_executed
    assert listing.was_executed


async def test_other_tools_are_refused_with_a_workflow_error(registry, logger, context) -> None:
    in_workflow = dataclasses.replace(context, active_workflow_id="create_report")
    done = await executor(registry, logger).execute(
        AgentToolCall("c1", "agent_hello_world", '{"name": "Ann"}'), in_workflow
    )
    assert not done.was_executed
    assert done.error_message is not None
    assert done.error_message.startswith(
        "Workflow error: the tool 'agent_hello_world' is not permitted while workflow "
        "'create_report' is active. Permitted tools: agent_calculator, agent_change_mode,"
    )


def test_a_vanished_workflow_leaves_only_the_always_offered_tools(registry) -> None:
    assert "agent_calculator" not in permitted_tools(registry, "gone")
    assert "agent_workflow_run" in permitted_tools(registry, "gone")
    assert permitted_tools(registry, None) == frozenset()


def test_offered_tools_narrow_the_mode_tools_to_the_workflow(registry) -> None:
    mode_tools = ["agent_hello_world", "agent_workflow_registry", "agent_list_modes"]
    assert offered_tools(registry, None, mode_tools) == mode_tools
    offered = offered_tools(registry, "create_report", mode_tools)
    assert offered[:2] == ["agent_workflow_registry", "agent_list_modes"]
    assert "agent_calculator" in offered
    assert "agent_hello_world" not in offered
