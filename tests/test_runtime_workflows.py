from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.tools import AgentToolCall


def settings(tmp_path: Path, **extra: object) -> AptixSettings:
    return AptixSettings(data_dir=tmp_path, semantic_matching=False, load_plugins=False, **extra)


async def test_the_runtime_serves_the_builtin_workflows_and_their_tools(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path)) as runtime:
        assert runtime.workflows is not None
        assert runtime.workflows.registry.get("author_workflow") is not None
        for name in ("agent_workflow_registry", "agent_workflow_authoring"):
            assert runtime.registry.has_tool(name)


async def test_the_runtime_executor_enforces_permitted_tools(tmp_path: Path) -> None:
    async with open_runtime(settings(tmp_path)) as runtime:
        context = dataclasses.replace(
            runtime.tool_context(), active_workflow_id="guided_calculation"
        )
        refused = await runtime.executor.execute(
            AgentToolCall("c1", "agent_hello_world", '{"name": "Ann"}'), context
        )
        allowed = await runtime.executor.execute(
            AgentToolCall("c2", "agent_calculator", '{"expression": "6*7"}'), context
        )
    assert refused.error_message is not None
    assert refused.error_message.startswith("Workflow error:")
    assert allowed.was_executed


async def test_a_broken_workflows_path_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("workflowId: bad\nversion: nope\n", encoding="utf-8")
    from aptix.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"bad.yaml \(workflow 'bad', field 'version'\)"):
        async with open_runtime(settings(tmp_path, workflows_path=tmp_path)):
            pass
