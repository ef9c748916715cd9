"""Lineage keeps governance, and modes apply on every surface (issue 25, DESIGN §15).

A branched child inherits its parent's active workflow, so no path through a child, a branch
or a resumed turn runs a tool the parent's workflow forbids. With a ``sessionId``, HTTP
invoke, the CLI and MCP refuse a tool outside the session's mode with the model turn's words.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
from mcp.client.client import Client

from aptix.mcp import build_mcp_server
from aptix.reasoner import ToolResultInput
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel, call, reply
from aptix.workflows.guard import not_offered_message
from tests.tenancy.conftest import HelloFromCli, session_in_workflow
from tests.tenancy.test_one_guard import WORKFLOW_ERROR

NOT_OFFERED = "The tool 'agent_hello_world' is not offered in this mode or workflow."
HELLO = {"name": "Ann"}


async def _calculation_session(runtime: Runtime, org: str = "acme", user: str = "ann") -> str:
    created = await runtime.services.sessions.create_session(org=org, user=user, mode="calculation")
    assert created.result is not None
    return created.result.id


def test_the_refusal_is_the_one_a_model_turn_gives() -> None:
    assert not_offered_message("agent_hello_world") == NOT_OFFERED


async def test_a_child_branched_in_a_turn_keeps_the_workflow_on_http_turns_and_resumes(
    keyed: Runtime, http: Callable[[str], httpx.AsyncClient]
) -> None:
    parent = await session_in_workflow(keyed)
    branch = {"mode": "general", "branch": True, "reason": "a new topic"}
    model = ScriptedModel.of(reply(None, call("agent_change_mode", branch, id="b1")), reply("Ok."))
    branched = await keyed.reasoner(model).execute(
        session_id=parent, org="acme", user="ann", instruction="Start over elsewhere"
    )
    child = branched.branched_session_id
    assert child is not None
    stored = await keyed.services.sessions.get_session(child, "acme")
    assert stored is not None
    assert (stored.mode, stored.active_workflow_id) == ("general", "guided_calculation")
    parent_now = await keyed.services.sessions.get_session(parent, "acme")
    assert parent_now is not None
    assert parent_now.active_workflow_id == "guided_calculation"

    # HTTP invoke in the child.
    answer = await http("k-ann").post(
        "/v1/tools/agent_hello_world/invoke", json={"sessionId": child, "arguments": HELLO}
    )
    assert answer.json()["successful"] is False
    assert answer.json()["errors"][0]["message"].startswith(WORKFLOW_ERROR)

    # A model turn in the child, handed off to the client and resumed: still refused.
    model = ScriptedModel.of(
        reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")),
        reply(None, call("agent_hello_world", HELLO, id="h1")),
        reply("Sorry."),
    )
    reasoner = keyed.reasoner(model)
    pending = await reasoner.execute(session_id=child, org="acme", user="ann", instruction="hi")
    assert pending.kind == "tool-only"
    resumed = await reasoner.execute(
        session_id=child,
        org="acme",
        user="ann",
        tool_results=[ToolResultInput("u1", '{"approved": true}')],
    )
    refused = next(c for c in resumed.tool_calls if c["callId"] == "h1")
    assert refused["wasExecuted"] is False
    assert refused["errorMessage"].startswith(WORKFLOW_ERROR)


async def test_a_child_made_through_mcp_or_the_manager_inherits_the_workflow(
    runtime: Runtime,
) -> None:
    parent = await session_in_workflow(runtime)
    change = {"mode": "general", "branch": True, "reason": "r", "sessionId": parent}
    async with Client(build_mcp_server(runtime, org="acme", user="ann")) as client:
        branched = await client.call_tool("agent_change_mode", change)
        child = json.loads(branched.content[0].text)["branchedSessionId"]  # type: ignore[union-attr]
        refused = await client.call_tool("agent_hello_world", {**HELLO, "sessionId": child})
    assert refused.is_error
    assert refused.content[0].text.startswith(WORKFLOW_ERROR)  # type: ignore[union-attr]
    created = await runtime.services.sessions.create_session(
        org="acme", user="ann", parent_session_id=parent
    )
    assert created.result is not None
    assert created.result.active_workflow_id == "guided_calculation"


async def test_http_invoke_refuses_a_tool_outside_the_mode(
    keyed: Runtime, http: Callable[[str], httpx.AsyncClient]
) -> None:
    session_id = await _calculation_session(keyed)
    client = http("k-ann")
    refused = await client.post(
        "/v1/tools/agent_hello_world/invoke", json={"sessionId": session_id, "arguments": HELLO}
    )
    assert refused.status_code == 200
    assert refused.json()["successful"] is False
    assert refused.json()["errors"] == [{"message": NOT_OFFERED}]
    allowed = await client.post(
        "/v1/tools/agent_calculator/invoke",
        json={"sessionId": session_id, "arguments": {"expression": "6*7"}},
    )
    assert allowed.json()["result"]["result"] == 42
    # Always-offered tools stay callable in every mode.
    modes = await client.post(
        "/v1/tools/agent_list_modes/invoke", json={"sessionId": session_id, "arguments": {}}
    )
    assert modes.json()["successful"] is True
    # Without a session no mode applies.
    free = await client.post("/v1/tools/agent_hello_world/invoke", json={"arguments": HELLO})
    assert free.json()["successful"] is True


async def test_mcp_and_a_model_turn_refuse_a_tool_outside_the_mode_alike(
    runtime: Runtime,
) -> None:
    session_id = await _calculation_session(runtime)
    async with Client(build_mcp_server(runtime, org="acme", user="ann")) as client:
        refused = await client.call_tool("agent_hello_world", {**HELLO, "sessionId": session_id})
        allowed = await client.call_tool(
            "agent_calculator", {"expression": "1+1", "sessionId": session_id}
        )
    assert refused.is_error
    assert refused.content[0].text == NOT_OFFERED  # type: ignore[union-attr]
    assert not allowed.is_error
    model = ScriptedModel.of(reply(None, call("agent_hello_world", HELLO, id="h1")), reply("No."))
    result = await runtime.reasoner(model).execute(
        session_id=session_id, org="acme", user="ann", instruction="Say hello"
    )
    [executed] = result.tool_calls
    assert executed["errorMessage"] == NOT_OFFERED


def test_the_cli_refuses_a_tool_outside_the_mode(
    hello_from_cli: HelloFromCli,
) -> None:
    result = hello_from_cli(_calculation_session)
    assert result.exit_code == 1
    assert NOT_OFFERED in result.stderr
