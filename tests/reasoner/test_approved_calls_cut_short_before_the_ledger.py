"""An approved call a pre-ledger Aptix left running is told to the model as the ledger reads it.

Aptix 80f59bd (the last commit before the ledger, 37c1718) accepted the user's answer to an MCP
call under an approval policy by storing it as the call's tool message and as a second entry of
the call, then ran the call, and only then replaced that message with the tool's result. Its
process killed while the call ran (review r4 F1, round 72), the turn stays ``running`` with the
approval (``{"approved": true}``) as the call's tool message. The ledger reads the call
``unknown`` (it may have run; it is not run again): the model must be told that, never the
approval as the tool's output, and a retry's answer lists the call as for a turn the ledger
wrote. The row below is the one 80f59bd stored in review r4's ``repro_f1.sh`` (its stored
answer and model call trimmed), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from aptix import InvokeResult
from aptix.api import create_app
from aptix.reasoner.call_states import APPROVED_UNRECORDED
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel, reply
from aptix.tools import AgentToolExecutionContext
from tests.reasoner.gated import GatedTool
from tests.reasoner.stored_turns import acme_client, acme_runtime, new_session, store_turn

RUNS: list[str] = []
ARGUMENTS = '{"label": "e_1796681458"}'
#: The approval request 80f59bd's MCP tool wrote (no "arguments" key).
REQUEST = json.dumps(
    {
        "kind": "approval_request",
        "prompt": "Allow 'ext_slowmark' (tool 'slowmark' of the MCP server 'ext') to run?",
        "action": "ext_slowmark",
        "details": "Arguments: " + ARGUMENTS,
        "destructive": True,
        "choices": ["approve", "reject"],
        "conversationId": "360f65c9e38b4f9cb00fd91c54085b73",
        "sessionId": "da83e003bcd74f95b6bd4518e32b4fa1",
    }
)
HAND_OFF = {
    "callId": "call_d7f6d89c",
    "name": "ext_slowmark",
    "argumentsJson": ARGUMENTS,
    "isServerTool": True,
    "wasExecuted": True,
    "requiresClientExecution": True,
    "resultJson": REQUEST,
    "errorMessage": None,
}
APPROVE = '{"approved": true}'
TOLD = {"error": APPROVED_UNRECORDED}


class SlowMark(GatedTool):
    """Stands for the MCP tool ``ext_slowmark`` under ``approval: always``."""

    TOOL_NAME = "ext_slowmark"
    TOOL_USAGE_METADATA: ClassVar[str] = "Marks slowly after approval."

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        RUNS.append(arguments_json)
        return InvokeResult.create('{"marked": true}')


@pytest.fixture
async def runtime(tmp_path: Path, database_url: str) -> AsyncIterator[Runtime]:
    RUNS.clear()
    async with acme_runtime(tmp_path, database_url, SlowMark) as opened:
        yield opened


def _old_data() -> dict[str, Any]:
    """``turns.data`` as 80f59bd stored the turn, killed while the approved call ran."""
    answered = {**HAND_OFF, "clientResult": APPROVE, "clientError": False}
    asked = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_d7f6d89c",
                "type": "function",
                "function": {"name": "ext_slowmark", "arguments": ARGUMENTS},
            }
        ],
    }
    answer = {"kind": "tool-only", "mode": "general", "text": None, "toolCalls": [HAND_OFF]}
    return {
        "messages": [
            {"role": "user", "content": "mcpslow x"},
            asked,
            {"role": "tool", "tool_call_id": "call_d7f6d89c", "content": APPROVE},
        ],
        "pending_calls": [HAND_OFF],
        "tool_calls": [{**HAND_OFF, "iteration": 1, "batchDurationMs": 0.14}, answered],
        "model_calls": [{"promptTokens": 5, "completionTokens": 5, "toolCalls": 1}],
        "warnings": [],
        "result": {**answer, "finishReason": "tool_calls", "warnings": []},
        "answers": {},
        "resume_key": "call_d7f6d89c",
        "context_dropped": None,
        "context_summary": None,
    }


async def _old_session(runtime: Runtime) -> str:
    """A session whose one turn is stored as 80f59bd left it; returns the session id."""
    session_id = await new_session(runtime)
    now = datetime.now(UTC)
    await store_turn(
        runtime,
        session_id,
        _old_data(),
        status="running",
        instruction="mcpslow x",
        version=3,
        now=now,
        # Killed: only its lease, long expired, says it is gone.
        lease=now - timedelta(minutes=5),
        owner="vm:22353:dc519ba6",
    )
    return session_id


async def _post(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    answer = await client.post("/v1/agent/execute", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["kind"] == "ok", answer.text
    return dict(answer.json())


async def _old_call(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    answer = await client.get(f"/v1/sessions/{session_id}")
    assert answer.status_code == 200, answer.text
    call: dict[str, Any] = answer.json()["turns"][0]["toolCalls"][0]
    return call


def _unknown(call: dict[str, Any]) -> None:
    assert (call["callId"], call["state"], call["outcome"]) == (
        "call_d7f6d89c",
        "unknown",
        "unknown",
    )
    assert call["wasExecuted"] is False
    assert call["errorMessage"] == APPROVED_UNRECORDED


def _told(model: ScriptedModel) -> list[Any]:
    """What each of the model's requests said the call returned."""
    return [
        json.loads(str(m["content"]))
        for request in model.requests
        for m in request.messages
        if m.get("role") == "tool" and m.get("tool_call_id") == "call_d7f6d89c"
    ]


@pytest.mark.parametrize("looked_first", [False, True])
async def test_retrying_the_approval_tells_the_model_the_call_may_have_run(
    runtime: Runtime, looked_first: bool
) -> None:
    session_id = await _old_session(runtime)
    model = ScriptedModel.of(reply("Checked."), reply("Still checked."))
    # The same approval again: the retry docs/http-api.md asks for.
    approval = {"callId": "call_d7f6d89c", "result": json.loads(APPROVE)}
    body = {"sessionId": session_id, "toolResults": [approval]}
    async with acme_client(create_app(runtime=runtime, model=model)) as client:
        if looked_first:  # as review r4 did: the session read before the retry
            _unknown(await _old_call(client, session_id))
        retried = await _post(client, body)
        await _post(client, {"sessionId": session_id, "instruction": "and now?"})
        _unknown(await _old_call(client, session_id))
    assert RUNS == []
    assert _told(model) == [TOLD, TOLD]
    # The answer lists the call as a retry of a turn the ledger wrote does: unknown, not run.
    [listed] = retried["toolCalls"]
    _unknown(listed)
    model.assert_complete()


async def test_later_turns_tell_the_model_the_call_may_have_run(runtime: Runtime) -> None:
    session_id = await _old_session(runtime)
    model = ScriptedModel.of(reply("Hello."), reply("Hello again."))
    async with acme_client(create_app(runtime=runtime, model=model)) as client:
        await _post(client, {"sessionId": session_id, "instruction": "hello again"})
        await _post(client, {"sessionId": session_id, "instruction": "and now?"})
        _unknown(await _old_call(client, session_id))
    assert RUNS == []
    assert _told(model) == [TOLD, TOLD]
    model.assert_complete()
