"""One context, one guard: a workflow's permittedTools hold on every surface (issue 14 #2)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from mcp.client.client import Client

from aptix.mcp import build_mcp_server
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel, call, reply
from tests.tenancy.conftest import HelloFromCli, session_in_workflow

WORKFLOW_ERROR = (
    "Workflow error: the tool 'agent_hello_world' is not permitted while workflow "
    "'guided_calculation' is active. Permitted tools: agent_calculator, agent_change_mode, "
    "agent_list_modes, agent_workflow_registry, agent_workflow_run, request_user_approval."
)


async def test_http_invoke_with_the_session_refuses_an_unpermitted_tool(
    keyed: Runtime, http: Callable[[str], httpx.AsyncClient]
) -> None:
    session_id = await session_in_workflow(keyed)
    body = {"sessionId": session_id, "arguments": {"name": "Ann"}}
    answer = await http("k-ann").post("/v1/tools/agent_hello_world/invoke", json=body)
    assert answer.status_code == 200
    assert answer.json()["successful"] is False
    assert answer.json()["errors"][0]["message"].startswith(WORKFLOW_ERROR)
    permitted = await http("k-ann").post(
        "/v1/tools/agent_calculator/invoke",
        json={"sessionId": session_id, "arguments": {"expression": "6*7"}},
    )
    assert permitted.json()["result"]["result"] == 42


async def test_mcp_with_the_session_refuses_an_unpermitted_tool(runtime: Runtime) -> None:
    session_id = await session_in_workflow(runtime)
    async with Client(build_mcp_server(runtime, org="acme", user="ann")) as client:
        refused = await client.call_tool(
            "agent_hello_world", {"name": "Ann", "sessionId": session_id}
        )
        allowed = await client.call_tool(
            "agent_calculator", {"expression": "1+1", "sessionId": session_id}
        )
    assert refused.is_error
    assert refused.content[0].text.startswith(WORKFLOW_ERROR)  # type: ignore[union-attr]
    assert not allowed.is_error


def test_cli_with_the_session_refuses_an_unpermitted_tool(
    hello_from_cli: HelloFromCli,
) -> None:
    result = hello_from_cli(session_in_workflow)
    assert result.exit_code == 1
    assert "Workflow error" in result.stderr
    assert "'guided_calculation'" in result.stderr


async def test_inside_a_turn_the_model_sees_the_workflow_error(runtime: Runtime) -> None:
    session_id = await session_in_workflow(runtime)
    model = ScriptedModel.of(
        reply(None, call("agent_hello_world", {"name": "Ann"}, id="c1")), reply("Sorry.")
    )
    result = await runtime.reasoner(model).execute(
        session_id=session_id, org="acme", user="ann", instruction="Say hello"
    )
    assert result.text == "Sorry."
    [executed] = result.tool_calls
    assert executed["errorMessage"].startswith(WORKFLOW_ERROR)
    tool_message = model.requests[1].messages[-1]
    assert json.loads(tool_message["content"])["error"].startswith(WORKFLOW_ERROR)


async def test_mcp_checks_the_user_not_only_the_org(runtime: Runtime) -> None:
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    sid = created.result.id
    change = {"mode": "calculation", "branch": True, "reason": "r", "sessionId": sid}
    async with Client(build_mcp_server(runtime, org="acme", user="amy")) as client:
        refused = await client.call_tool("agent_change_mode", change)
    assert refused.is_error
    assert refused.content[0].text == f"Unknown session '{sid}'."  # type: ignore[union-attr]
    session = await runtime.services.sessions.get_session(sid, "acme")
    assert session is not None
    assert session.mode == "general"
    assert await runtime.services.sessions.list_children(sid, "acme") == []


async def test_a_turn_refuses_a_session_of_another_user(runtime: Runtime) -> None:
    from aptix.errors import NotFoundError

    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    with pytest.raises(NotFoundError):
        await runtime.reasoner(ScriptedModel()).execute(
            session_id=created.result.id, org="acme", user="amy", instruction="hi"
        )


async def test_a_branch_that_fails_leaves_the_session_as_it_was(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14 #5: the mode change and the child are one transaction, so the error is true."""
    import aptix.sessions.sql

    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    sid = created.result.id
    # The child collides with its parent's id: its insert fails after the mode was set.
    monkeypatch.setattr(aptix.sessions.sql, "new_session_id", lambda: sid)
    context = await runtime.session_context(org="acme", user="ann", role="user", session_id=sid)
    change = {"mode": "calculation", "branch": True, "reason": "numbers"}
    outcome = await runtime.executor.invoke("agent_change_mode", json.dumps(change), context)
    assert outcome.error_message == "ModeChangeTool failed to change the session mode."
    session = await runtime.services.sessions.get_session(sid, "acme")
    assert session is not None
    assert (session.mode, session.mode_history) == ("general", ())
    assert await runtime.services.sessions.list_children(sid, "acme") == []


async def test_a_branch_changes_the_mode_and_creates_the_child_together(runtime: Runtime) -> None:
    created = await runtime.services.sessions.create_session(org="acme", user="ann")
    assert created.result is not None
    sid = created.result.id
    context = await runtime.session_context(org="acme", user="ann", role="user", session_id=sid)
    change = {"mode": "calculation", "branch": True, "reason": "numbers"}
    outcome = await runtime.executor.invoke("agent_change_mode", json.dumps(change), context)
    child_id = json.loads(outcome.result or "")["branchedSessionId"]
    session = await runtime.services.sessions.get_session(sid, "acme")
    assert session is not None
    assert session.mode == "calculation"
    [child] = await runtime.services.sessions.list_children(sid, "acme")
    assert (child.id, child.mode, child.user) == (child_id, "calculation", "ann")
