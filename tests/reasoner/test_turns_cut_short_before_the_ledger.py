"""A turn a pre-ledger Aptix left during a batch reads its calls as lost (review r4 F1, F2).

Aptix 80f59bd (the last commit before the ledger, 37c1718) stored the model's message with its
calls, then ran the batch, and added the calls' entries and tool messages only once the whole
batch had returned. A turn that version left mid-batch (its process killed: ``running``; stopped
or cancelled: ``cancelled``; swept: ``interrupted``) keeps the message with no entry and no
result for those calls, though they may have run. The rows below are written as 80f59bd wrote
them, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from aptix.api import create_app
from aptix.llm.types import Message
from aptix.reasoner.call_states import CANCELLED_ELSEWHERE, UNKNOWN
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel, reply
from tests.reasoner.stored_turns import acme_client, acme_runtime, new_session, store_turn

#: 80f59bd's warnings: its cancel (a SIGTERM's 30 s running out, or a user's) and its sweep.
OLD_CANCELLED = "Cancelled before it finished."
OLD_INTERRUPTED = (
    "Interrupted: the process running this turn stopped before it finished; "
    "its executed tool calls are recorded and were not run again."
)


@pytest.fixture
async def runtime(tmp_path: Path, database_url: str) -> AsyncIterator[Runtime]:
    async with acme_runtime(tmp_path, database_url) as opened:
        yield opened


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _old_data(status: str, *, earlier: bool) -> dict[str, Any]:
    """``turns.data`` as 80f59bd stored a turn whose last batch (c2, c3) had not returned."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "pay, then wait"}]
    entries: list[dict[str, Any]] = []
    if earlier:  # a batch that returned: its entry (no state) and its tool message
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [_call("c1", "calc", "{}")]},
            {"role": "tool", "tool_call_id": "c1", "content": "5"},
        ]
        entries.append(
            {
                "callId": "c1",
                "name": "calc",
                "argumentsJson": "{}",
                "isServerTool": True,
                "wasExecuted": True,
                "requiresClientExecution": False,
                "resultJson": "5",
                "errorMessage": None,
                "iteration": 1,
                "batchDurationMs": 1.5,
            }
        )
    messages.append(
        {
            "role": "assistant",
            "content": "Paying now.",
            "tool_calls": [
                _call("c2", "pay", '{"amount": 5}'),
                _call("c3", "slow_wait", "{}"),
            ],
        }
    )
    result = None
    if status == "cancelled":  # 80f59bd's cancelled(): the answer lists the calls that returned
        result = {"kind": "cancelled", "toolCalls": entries[:], "warnings": [OLD_CANCELLED]}
    warnings = {"cancelled": [OLD_CANCELLED], "interrupted": [OLD_INTERRUPTED]}
    return {
        "messages": messages,
        "pending_calls": [],
        "tool_calls": entries,
        "model_calls": [{"promptTokens": 10, "completionTokens": 5, "toolCalls": 2}],
        "warnings": warnings.get(status, []),
        "result": result,
        "answers": {},
        "resume_key": None,
        "context_dropped": None,
        "context_summary": None,
    }


async def _old_session(runtime: Runtime, status: str, *, earlier: bool) -> str:
    """A session whose one turn is stored as 80f59bd stored it; returns the session id."""
    session_id = await new_session(runtime)
    now = datetime.now(UTC)
    running = status == "running"
    await store_turn(
        runtime,
        session_id,
        _old_data(status, earlier=earlier),
        status=status,
        instruction="pay, then wait",
        version=2,
        text="Paying now.",
        now=now,
        # Killed on another machine: only its lease, long expired, says it is gone.
        lease=now - timedelta(minutes=5) if running else None,
        owner="elsewhere:4242:0badc0de" if running else None,
    )
    return session_id


async def _turns(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    answer = await client.get(f"/v1/sessions/{session_id}")
    assert answer.status_code == 200, answer.text
    turns: list[dict[str, Any]] = answer.json()["turns"]
    return turns


async def _instruct(client: httpx.AsyncClient, session_id: str, instruction: str) -> None:
    answer = await client.post(
        "/v1/agent/execute", json={"sessionId": session_id, "instruction": instruction}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["kind"] == "ok", answer.text


def _unanswered(messages: Sequence[Message]) -> list[str]:
    """The call ids of ``messages`` not followed by their tool message (a model answers 400)."""
    missing: list[str] = []
    for at, message in enumerate(messages):
        asked = [c["id"] for c in message.get("tool_calls") or ()]
        answered = set()
        for later in messages[at + 1 :]:
            if later.get("role") != "tool":
                break
            answered.add(later.get("tool_call_id"))
        missing += [i for i in asked if i not in answered]
    return missing


def _told(messages: Sequence[Message]) -> dict[str, Any]:
    return {m["tool_call_id"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}


def _lost(calls: list[dict[str, Any]], why: str) -> None:
    """c2 and c3 read lost: unknown, not shown as run, the message saying it."""
    shown = {c["callId"]: c for c in calls}
    for call_id, name in (("c2", "pay"), ("c3", "slow_wait")):
        call = shown[call_id]
        assert (call["name"], call["state"], call["outcome"]) == (name, "unknown", "unknown")
        assert call["wasExecuted"] is False
        # The server's executor ran every call of the old batch (review r1 F4, round 70).
        assert call["isServerTool"] is True
        assert call["errorMessage"] == why
    assert "lost" not in shown["c2"]


@pytest.mark.parametrize("earlier", [False, True])
async def test_a_turn_killed_mid_batch_reads_its_calls_lost(
    runtime: Runtime, earlier: bool
) -> None:
    # F1: the new build sweeps the dead turn when the session's next instruction comes.
    session_id = await _old_session(runtime, "running", earlier=earlier)
    model = ScriptedModel.of(reply("Noted."), reply("Still noted."))
    async with acme_client(create_app(runtime=runtime, model=model)) as client:
        await _instruct(client, session_id, "what happened?")
        await _instruct(client, session_id, "and now?")
        old, _, _ = await _turns(client, session_id)
    assert old["status"] == "interrupted"
    _lost(old["toolCalls"], UNKNOWN)
    assert [c["callId"] for c in old["toolCalls"]] == ["c1", "c2", "c3"][0 if earlier else 1 :]
    if earlier:
        assert (old["toolCalls"][0]["state"], old["toolCalls"][0]["resultJson"]) == (
            "succeeded",
            "5",
        )
    for request in model.requests:
        assert _unanswered(request.messages) == []
        told = _told(request.messages)
        assert told["c2"] == told["c3"] == {"error": UNKNOWN}
    model.assert_complete()


@pytest.mark.parametrize(
    ("status", "why"), [("cancelled", CANCELLED_ELSEWHERE), ("interrupted", UNKNOWN)]
)
@pytest.mark.parametrize("earlier", [False, True])
async def test_a_turn_ended_mid_batch_reads_its_calls_lost_and_replays_whole(
    runtime: Runtime, status: str, why: str, earlier: bool
) -> None:
    # F2: stopped (or cancelled, or swept) by 80f59bd itself, then read by this version.
    session_id = await _old_session(runtime, status, earlier=earlier)
    model = ScriptedModel.of(reply("Noted."), reply("Still noted."))
    async with acme_client(create_app(runtime=runtime, model=model)) as client:
        [before] = await _turns(client, session_id)
        await _instruct(client, session_id, "what happened?")
        await _instruct(client, session_id, "and now?")
        after, _, _ = await _turns(client, session_id)
    for old in (before, after):
        assert old["status"] == status
        _lost(old["toolCalls"], why)
    for request in model.requests:
        # Every call the old turn asked for has its result, right after the model's message.
        assert _unanswered(request.messages) == []
        told = _told(request.messages)
        assert told["c2"] == told["c3"] == {"error": why}
        if earlier:
            assert told["c1"] == 5
    model.assert_complete()
