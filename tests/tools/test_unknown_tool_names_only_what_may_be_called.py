"""An unknown tool name is answered without pointing at tools the call may not use (DESIGN §6)."""

from __future__ import annotations

import json
from pathlib import Path

from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import RecordingLogger, ScriptedModel, call, reply
from aptix.tools import AgentToolCall, AgentToolExecutionContext, AgentToolExecutor
from aptix.tools.builtin.hello_world import HelloWorldTool
from aptix.tools.registry import AgentToolRegistry


async def test_a_model_in_a_workflow_is_not_told_of_tools_it_is_not_offered(
    tmp_path: Path,
) -> None:
    settings = AptixSettings(data_dir=tmp_path, load_plugins=False, semantic_matching=False)
    async with open_runtime(settings) as runtime:
        sessions = runtime.services.sessions
        created = await sessions.create_session(org="local", user="local", mode="calculation")
        assert created.result is not None
        session_id = created.result.id
        await sessions.set_active_workflow(session_id, "guided_calculation", "local", "local")
        model = ScriptedModel.of(reply(None, call("agent_hello", {"name": "Ann"})), reply("ok"))
        await runtime.reasoner(model).execute(
            session_id=session_id, org="local", user="local", instruction="hi"
        )
        registered = runtime.registry.registered_tools
    offered = {t.get("name") or t["function"]["name"] for t in model.requests[0].tools}
    told = next(m["content"] for m in model.requests[1].messages if m["role"] == "tool")
    error = json.loads(told)["error"]
    assert error.startswith("Unknown tool 'agent_hello'.")
    not_offered = [name for name in registered if name not in offered]
    assert "agent_hello_world" in not_offered  # the typo's near miss, which the workflow refuses
    assert [name for name in not_offered if name in error] == []


async def test_a_call_in_a_session_names_no_registered_tools() -> None:
    registry = AgentToolRegistry(RecordingLogger())
    registry.register(HelloWorldTool)
    executor = AgentToolExecutor(registry, RecordingLogger())
    context = AgentToolExecutionContext(session_id="s1", org="acme", user="ann", mode="general")
    done = await executor.execute(AgentToolCall("c1", "agent_hello", "{}"), context)
    assert done.outcome == "failed"
    assert done.error_message == (
        "Unknown tool 'agent_hello'. Call one of the tools this session's mode or workflow offers."
    )


async def test_a_call_outside_any_session_still_lists_the_registered_tools() -> None:
    # No mode or workflow narrows such a call (aptix tools call without --session-id): every
    # registered tool may be called, so naming them all is the truth and a help.
    registry = AgentToolRegistry(RecordingLogger())
    registry.register(HelloWorldTool)
    executor = AgentToolExecutor(registry, RecordingLogger())
    done = await executor.execute(
        AgentToolCall("c1", "agent_hello", "{}"), AgentToolExecutionContext(org="acme")
    )
    assert done.error_message == "Unknown tool 'agent_hello'. Registered tools: agent_hello_world."
