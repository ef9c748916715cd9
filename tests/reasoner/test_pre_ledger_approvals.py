"""Approvals stored before the ledger read as approvals after the upgrade (DESIGN §14).

Aptix e0c7c07 to 5d4c253 kept an MCP call under an approval policy as a client hand-off:
``wasExecuted`` and ``requiresClientExecution`` set, its approval request as ``resultJson``
and no ``state``. The client's answer went into a second entry of the call, and the settled
approval beside it. The rows below are written as those versions wrote them, on SQLite and
on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from pydantic import Field

from aptix import AgentTool, InvokeResult
from aptix.api import create_app
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel, reply
from aptix.tools import AgentToolExecutionContext, function_schema
from aptix.tools.args import ToolArgs
from tests.reasoner.stored_turns import acme_client, acme_runtime, new_session, store_turn

RUNS: list[str] = []
TURN = "5dbbcf058509482f9141cc27c2033e76"
ARGUMENTS = '{"note": "approved-once"}'
#: The request as the MCP tool of those versions wrote it (it had no "arguments" key).
REQUEST = json.dumps(
    {
        "kind": "approval_request",
        "prompt": "Allow 'ext_record' (tool 'record' of the MCP server 'ext') to run?",
        "action": "ext_record",
        "details": "Arguments: " + ARGUMENTS,
        "destructive": True,
        "choices": ["approve", "reject"],
        "conversationId": TURN,
        "sessionId": "s",
    }
)
HAND_OFF = {
    "callId": "call_1",
    "name": "ext_record",
    "argumentsJson": ARGUMENTS,
    "isServerTool": True,
    "wasExecuted": True,
    "requiresClientExecution": True,
    "resultJson": REQUEST,
    "errorMessage": None,
}
APPROVE = '{"approved": true}'


class _Args(ToolArgs):
    note: str | None = Field(None, description="The note to record.")


class Record(AgentTool):
    """Stands for the MCP tool ``ext_record`` under ``approval: always``."""

    TOOL_NAME = "ext_record"
    TOOL_USAGE_METADATA: ClassVar[str] = "Records a note after approval."
    is_fully_executed_on_server: ClassVar[bool] = False

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Records.", _Args)

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.create(REQUEST)

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        RUNS.append(arguments_json)
        return InvokeResult.create('{"recorded": true}')


@pytest.fixture
async def runtime(tmp_path: Path, database_url: str) -> AsyncIterator[Runtime]:
    RUNS.clear()
    async with acme_runtime(tmp_path, database_url, Record) as opened:
        yield opened


async def _old_turn(runtime: Runtime, status: str, tool_calls: list[dict[str, Any]]) -> str:
    """A session whose one turn is stored as 5d4c253 stored it; returns the session id."""
    session_id = await new_session(runtime)
    pending = [HAND_OFF] if status == "pending" else []
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "please record"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "ext_record", "arguments": ARGUMENTS},
                }
            ],
        },
    ]
    if status != "pending":
        messages += [
            {"role": "tool", "tool_call_id": "call_1", "content": "{}"},
            {"role": "assistant", "content": "done"},
        ]
    data: dict[str, Any] = {
        "messages": messages,
        "pending_calls": pending,
        "tool_calls": tool_calls,
        "model_calls": [],
        "warnings": [],
        "result": None,
        "answers": {},
        "resume_key": None,
        "context_dropped": None,
        "context_summary": None,
    }
    await store_turn(
        runtime, session_id, data, status=status, instruction="please record", version=1
    )
    return session_id


async def _turn(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    answer = await client.get(f"/v1/sessions/{session_id}")
    assert answer.status_code == 200, answer.text
    [turn] = answer.json()["turns"]
    return dict(turn)


async def _answer(client: httpx.AsyncClient, session_id: str, result: Any) -> dict[str, Any]:
    body = {"sessionId": session_id, "toolResults": [{"callId": "call_1", "result": result}]}
    answer = await client.post("/v1/agent/execute", json=body)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _state(call: dict[str, Any]) -> tuple[str, str, bool]:
    return call["state"], call["outcome"], call["wasExecuted"]


async def test_an_old_pending_approval_waits_as_an_approval(runtime: Runtime) -> None:
    session_id = await _old_turn(runtime, "pending", [{**HAND_OFF, "iteration": 1}])
    async with acme_client(create_app(runtime=runtime, model=ScriptedModel())) as client:
        turn = await _turn(client, session_id)
    assert turn["status"] == "pending"
    [call] = turn["toolCalls"]
    assert _state(call) == ("awaiting_approval", "pending", False)
    [waiting] = turn["pendingCalls"]
    assert _state(waiting) == ("awaiting_approval", "pending", False)


async def test_approving_an_old_pending_approval_runs_the_tool_once(runtime: Runtime) -> None:
    session_id = await _old_turn(runtime, "pending", [{**HAND_OFF, "iteration": 1}])
    model = ScriptedModel()
    model.add(reply("recorded"))
    async with acme_client(create_app(runtime=runtime, model=model)) as client:
        first = await _answer(client, session_id, {"approved": True})
        again = await _answer(client, session_id, {"approved": True})
        turn = await _turn(client, session_id)
    assert RUNS == [ARGUMENTS]
    assert first["kind"] == "ok"
    [ran] = first["toolCalls"]
    assert (ran["callId"], *_state(ran)) == ("call_1", "succeeded", "succeeded", True)
    assert again == first
    [call] = turn["toolCalls"]
    assert _state(call) == ("succeeded", "succeeded", True)
    assert call["approvedResultJson"] == '{"recorded": true}'


async def test_denying_an_old_pending_approval_runs_nothing(runtime: Runtime) -> None:
    session_id = await _old_turn(runtime, "pending", [{**HAND_OFF, "iteration": 1}])
    model = ScriptedModel()
    model.add(reply("not recorded"))
    async with acme_client(create_app(runtime=runtime, model=model)) as client:
        await _answer(client, session_id, {"approved": False})
        turn = await _turn(client, session_id)
    assert RUNS == []
    [call] = turn["toolCalls"]
    assert _state(call) == ("denied", "denied", False)
    assert call["errorMessage"] == "The user did not approve 'ext_record'; it was not run."


@pytest.mark.parametrize(
    ("settled", "expected"),
    [
        ({"approved": True, "approvedResultJson": '{"recorded": true}'}, "succeeded"),
        ({"approved": True, "approvedErrorMessage": "The tool failed."}, "failed"),
        ({"approved": False}, "denied"),
        ({}, "unknown"),  # answered, but the run never made it to the record
    ],
)
async def test_an_old_answered_approval_reads_as_it_ended(
    runtime: Runtime, settled: dict[str, Any], expected: str
) -> None:
    answered = {**HAND_OFF, "clientResult": APPROVE, "clientError": False, **settled}
    if "approved" in settled and not settled["approved"]:
        answered["clientResult"] = '{"approved": false}'
    session_id = await _old_turn(runtime, "completed", [{**HAND_OFF, "iteration": 1}, answered])
    async with acme_client(create_app(runtime=runtime, model=ScriptedModel())) as client:
        turn = await _turn(client, session_id)
    # One call, one entry: the answer replaces the hand-off it answered.
    [call] = turn["toolCalls"]
    assert (call["state"], call["outcome"]) == (expected, expected)
    assert call["wasExecuted"] is (expected == "succeeded")
    if expected != "succeeded":
        assert call["errorMessage"]
