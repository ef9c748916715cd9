"""A turn the ledger left waiting, answered by an Aptix from before the ledger (review r4, F1).

Aptix c57b553 (schema 0008, before the ledger) kept the client's answer as a second entry of
the call: a copy of the waiting entry plus ``clientResult`` (and, for an approval it settled,
``approved`` with ``approvedResultJson``). Copying a ledger entry copied its waiting
``state`` too, and the ledger took every entry with a state as it was: the approved call that
ran read ``awaiting_approval``, not run, each call listed twice. The entries below are those
c57b553 stored on PostgreSQL in review r4's ``mix.sh 165`` (long texts shortened).
Migration 0009 now stops such a version at start-up; a process of one still running as the
database is upgraded may have answered turns so, and they read as it answered them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aptix.api import create_app
from aptix.reasoner import ledger, pre_ledger
from aptix.reasoner.record import TurnRecord
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel
from tests.reasoner.stored_turns import acme_client, acme_runtime, new_session, store_turn

ECHO = '{"content": [{"type": "text", "text": "mix"}], "structuredContent": {"result": "mix"}}'
#: As HEAD's ledger stored the two calls, waiting: an MCP call under ``approval: always``
#: and a ``request_user_approval`` hand-off.
M1 = {
    "callId": "m1",
    "name": "flaky_echo",
    "argumentsJson": '{"text": "mix"}',
    "isServerTool": True,
    "wasExecuted": False,
    "requiresClientExecution": True,
    "resultJson": json.dumps(
        {"kind": "approval_request", "action": "flaky_echo", "arguments": {"text": "mix"}}
    ),
    "errorMessage": None,
    "state": "awaiting_approval",
    "outcome": "pending",
    "idempotent": True,
    "iteration": 1,
}
U1 = {
    "callId": "u1",
    "name": "request_user_approval",
    "argumentsJson": '{"prompt": "ok?"}',
    "isServerTool": True,
    "wasExecuted": True,
    "requiresClientExecution": True,
    "resultJson": json.dumps({"kind": "approval_request", "prompt": "ok?", "action": None}),
    "errorMessage": None,
    "state": "awaiting_client",
    "outcome": "pending",
    "idempotent": True,
    "iteration": 1,
}
APPROVE = {"clientResult": '{"approved": true}', "clientError": False}
DENY = {"clientResult": '{"approved": false}', "clientError": False}
#: The two entries c57b553 appended as it accepted the answers and ran the approved call.
ANSWERED = [
    {**M1, **APPROVE, "approved": True, "approvedResultJson": ECHO},
    {**U1, "clientResult": "yes", "clientError": False},
]


def _states(calls: list[dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
    return [(c["callId"], c["state"], c["outcome"], c["wasExecuted"]) for c in calls]


def test_the_copied_answers_take_the_waiting_entries_places() -> None:
    calls = pre_ledger.stated_calls([M1, U1, *ANSWERED], waiting=False)
    assert _states(calls) == [
        ("m1", "succeeded", "succeeded", True),
        ("u1", "succeeded", "succeeded", True),
    ]
    assert calls[0]["approvedResultJson"] == ECHO
    assert calls[1]["clientResult"] == "yes"
    assert calls[0]["iteration"] == 1  # what the ledger kept of the call stays


@pytest.mark.parametrize(
    ("settled", "expected"),
    [
        ({**APPROVE, "approved": True, "approvedErrorMessage": "boom"}, "failed"),
        ({**DENY, "approved": False}, "denied"),
        (APPROVE, "unknown"),  # accepted, but that process stopped before its run was on record
        ({"clientResult": "no", "clientError": False}, "denied"),
    ],
)
def test_a_copied_approval_reads_as_it_ended(settled: dict[str, Any], expected: str) -> None:
    [call] = pre_ledger.stated_calls([M1, {**M1, **settled}], waiting=False)
    assert _states([call]) == [("m1", expected, expected, False)]
    assert call["errorMessage"]


def test_a_turn_the_copies_are_in_is_stated_before_the_ledger_writes_it() -> None:
    # c57b553 accepted the approval, then stopped before it settled it: the turn is running.
    turn = TurnRecord("t", "s", "acme", "ann", 1, "mixed versions", status="running")
    turn.tool_calls = [dict(M1), dict(U1), {**M1, **APPROVE}, {**U1, "clientResult": "yes"}]
    ledger.close_dangling(turn, "interrupted")
    assert _states(turn.tool_calls) == [
        ("m1", "unknown", "unknown", False),
        ("u1", "succeeded", "succeeded", True),
    ]


def test_the_ledger_keeps_its_own_entries_as_they_are() -> None:
    approved = {**M1, **APPROVE, "approved": True, "state": "started", "outcome": "pending"}
    assert pre_ledger.stated_calls([approved, U1], waiting=True) == [approved, U1]


@pytest.fixture
async def runtime(tmp_path: Path, database_url: str) -> AsyncIterator[Runtime]:
    async with acme_runtime(tmp_path, database_url) as opened:
        yield opened


async def _stored_turn(runtime: Runtime) -> str:
    """The session of the turn as c57b553 completed it; returns the session id."""
    session_id = await new_session(runtime)
    request = [
        {"id": c, "type": "function", "function": {"name": n, "arguments": a}}
        for c, n, a in (("m1", "flaky_echo", M1["argumentsJson"]), ("u1", U1["name"], "{}"))
    ]
    data = {
        "messages": [
            {"role": "user", "content": "mixed versions"},
            {"role": "assistant", "content": None, "tool_calls": request},
            {"role": "tool", "tool_call_id": "m1", "content": ECHO},
            {"role": "tool", "tool_call_id": "u1", "content": "yes"},
            {"role": "assistant", "content": "done after approval"},
        ],
        "pending_calls": [],
        "tool_calls": [M1, U1, *ANSWERED],
        "model_calls": [],
        "warnings": [],
        "result": None,
        "answers": {},
        "resume_key": None,
        "context_dropped": None,
        "context_summary": None,
    }
    await store_turn(
        runtime,
        session_id,
        data,
        status="completed",
        instruction="mixed versions",
        version=1,
        text="done after approval",
    )
    return session_id


async def test_the_session_lists_each_call_once_as_it_ended(runtime: Runtime) -> None:
    session_id = await _stored_turn(runtime)
    app = create_app(runtime=runtime, model=ScriptedModel())
    async with acme_client(app) as client:
        answer = await client.get(f"/v1/sessions/{session_id}")
    assert answer.status_code == 200, answer.text
    [turn] = answer.json()["turns"]
    assert turn["status"] == "completed"
    assert _states(turn["toolCalls"]) == [
        ("m1", "succeeded", "succeeded", True),
        ("u1", "succeeded", "succeeded", True),
    ]
    assert turn["toolCalls"][0]["approvedResultJson"] == ECHO
