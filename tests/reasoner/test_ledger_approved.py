"""Calls gated by approval, through the real loop and store, on SQLite and on PostgreSQL.

A store opened after a crash stands for the restarted process (as in test_ledger_processes).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from sqlalchemy import update

import aptix
from aptix import InvokeResult
from aptix.api.routes.sessions import turn_to_json
from aptix.db.types import utc_now
from aptix.reasoner import ToolResultInput, TurnResult
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.sql_turns import SqlTurnStore
from aptix.reasoner.tables import TurnRow
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel, call, reply
from aptix.tools import AgentToolExecutionContext
from tests.databases import on_both_databases
from tests.reasoner.conftest import Died, Harness
from tests.reasoner.gated import GatedTool, register_unguarded

RUNS: list[str] = []
STARTED = asyncio.Event()
APPROVE = '{"approved": true}'
REQUEST = '{"kind": "approval_request", "prompt": "Destroy?"}'


class Destroy(GatedTool):
    """Asks first (``REQUEST``), destroys once approved."""

    TOOL_NAME = "destroy"
    TOOL_USAGE_METADATA: ClassVar[str] = "Destroys things after approval."
    DESCRIPTION: ClassVar[str] = "Destroys."
    PROMPT: ClassVar[str] = "Destroy?"

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        RUNS.append(self.TOOL_NAME)
        return InvokeResult.create('{"destroyed": true}')


class Stall(Destroy):
    """The same, but its approved run never ends: the process dies while it runs."""

    TOOL_NAME = "stall"

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        RUNS.append(self.TOOL_NAME)
        STARTED.set()
        await asyncio.sleep(3600)
        return InvokeResult.create('{"stalled": true}')


settings = pytest.fixture(on_both_databases, name="settings")


@pytest.fixture(autouse=True)
def _tools(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    global STARTED
    register_unguarded(harness, monkeypatch, Destroy, Stall)  # offered by _reasoner
    RUNS.clear()
    STARTED = asyncio.Event()  # an Event belongs to the loop of its first wait: one per test


def _process(h: Harness) -> Runtime:
    """The runtime as another process (or the same one restarted) sees it: its own store."""
    return replace(h.runtime, turns=SqlTurnStore(h.runtime.database))


def _reasoner(runtime: Runtime, model: ScriptedModel) -> aptix.AgentReasoner:
    reasoner = runtime.reasoner(model)
    reasoner._offered = lambda _w, mode_tools, _o: [*mode_tools, "destroy", "stall"]
    return reasoner


async def _execute(
    runtime: Runtime, h: Harness, model: ScriptedModel, **request: Any
) -> TurnResult:
    return await _reasoner(runtime, model).execute(
        session_id=h.session_id, org="acme", user="ann", **request
    )


async def _turn(runtime: Runtime, h: Harness) -> TurnRecord:
    [turn] = await runtime.turns.list_turns(h.session_id, "acme")
    return turn


async def _stored(runtime: Runtime, h: Harness, call_id: str, state: str) -> TurnRecord | None:
    """The session's turn once its call ``call_id`` is stored ``state`` (None after 3 s)."""
    for _ in range(60):
        turn = await _turn(runtime, h)
        if {c["callId"]: c["state"] for c in turn.tool_calls}.get(call_id) == state:
            return turn
        await asyncio.sleep(0.05)
    return None


async def test_a_crash_between_two_approved_calls_keeps_the_first_ones_outcome(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two gated calls, both approved in one resume: they run one after another. The first
    # returns, the process dies while the second runs. After the restart the first call has
    # its result and is not run again; the second, not idempotent, reads unknown.
    model = ScriptedModel()
    model.add(reply(None, call("destroy", {}, id="d1"), call("stall", {}, id="d2")))
    handed = await _execute(harness.runtime, harness, model, instruction="destroy, stall")
    assert [c["state"] for c in handed.tool_calls] == ["awaiting_approval"] * 2
    approve = [ToolResultInput("d1", APPROVE), ToolResultInput("d2", APPROVE)]
    crashing = _process(harness)
    running = asyncio.create_task(_execute(crashing, harness, model, tool_results=approve))
    await asyncio.wait_for(STARTED.wait(), 30)
    restarted = _process(harness)
    stored = await _stored(restarted, harness, "d1", "succeeded")

    async def dies(*_: Any) -> bool:
        raise Died

    # kill -9: nothing the dying process would still write reaches the database.
    for write in ("save", "settle", "heartbeat"):
        monkeypatch.setattr(crashing.turns, write, dies)
    running.cancel()
    with pytest.raises(Died):
        await asyncio.wait_for(running, 30)
    assert stored is not None, "the first approved call's outcome was not stored when it returned"
    async with harness.runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(lease_until=utc_now() - timedelta(seconds=1)))
    again = ScriptedModel()
    again.add(reply("Destroyed; the other is unknown."))
    retried = await _execute(restarted, harness, again, tool_results=approve)  # the retry
    assert retried.text == "Destroyed; the other is unknown."
    shown = {c["callId"]: c for c in (await _turn(restarted, harness)).tool_calls}
    assert (shown["d1"]["outcome"], shown["d1"]["resultJson"]) == (
        "succeeded",
        '{"destroyed": true}',
    )
    assert shown["d1"]["wasExecuted"] is True
    assert (shown["d2"]["outcome"], shown["d2"]["wasExecuted"]) == ("unknown", False)
    told = {
        m["tool_call_id"]: m["content"] for m in again.requests[-1].messages if m["role"] == "tool"
    }
    assert told["d1"] == '{"destroyed": true}'
    assert RUNS == ["destroy", "stall"]  # neither ran again


async def test_a_gated_call_reads_not_executed_until_its_approved_run(harness: Harness) -> None:
    model = ScriptedModel()
    model.add(reply(None, call("destroy", {}, id="d1"), call("stall", {}, id="d2")))
    handed = await _execute(harness.runtime, harness, model, instruction="destroy, stall")
    # Only the question was prepared: nothing ran yet, in the answer and on record.
    assert [(c["state"], c["wasExecuted"]) for c in handed.tool_calls] == [
        ("awaiting_approval", False)
    ] * 2
    assert [c["wasExecuted"] for c in (await _turn(harness.runtime, harness)).tool_calls] == [
        False,
        False,
    ]
    model.add(reply("Destroyed only."))
    results = [ToolResultInput("d1", APPROVE), ToolResultInput("d2", '{"approved": false}')]
    await _execute(harness.runtime, harness, model, tool_results=results)
    turn = await _turn(harness.runtime, harness)
    stored = {c["callId"]: c for c in turn.tool_calls}
    shown = {c["callId"]: c for c in turn_to_json(turn)["toolCalls"]}  # GET /v1/sessions/{id}
    for calls in (stored, shown):
        assert (calls["d1"]["outcome"], calls["d1"]["wasExecuted"]) == ("succeeded", True)
        assert (calls["d2"]["outcome"], calls["d2"]["wasExecuted"]) == ("denied", False)
    assert RUNS == ["destroy"]


async def test_a_gated_call_whose_approved_run_was_cut_short_reads_unknown(
    harness: Harness,
) -> None:
    # Approved and on record as started, then the process died: unknown, and never run
    # again (not idempotent). It did not complete (wasExecuted, AGN-005); its outcome says
    # it may have taken effect.
    model = ScriptedModel()
    model.add(reply(None, call("destroy", {}, id="d1")))
    await _execute(harness.runtime, harness, model, instruction="destroy")
    approve = [ToolResultInput("d1", APPROVE)]
    await _reasoner(harness.runtime, model).prepare(
        session_id=harness.session_id, org="acme", user="ann", tool_results=approve
    )
    async with harness.runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(lease_until=utc_now() - timedelta(seconds=1)))
    model.add(reply("Not known."))
    await _execute(_process(harness), harness, model, tool_results=approve)
    turn = await _turn(harness.runtime, harness)
    [entry] = turn.tool_calls
    [shown] = turn_to_json(turn)["toolCalls"]  # GET /v1/sessions/{id}
    assert (entry["outcome"], entry["wasExecuted"]) == ("unknown", False)
    assert (shown["outcome"], shown["wasExecuted"]) == ("unknown", False)
    assert RUNS == []


async def test_a_denied_call_stored_by_an_earlier_version_reads_not_executed(
    harness: Harness,
) -> None:
    model = ScriptedModel()
    model.add(reply(None, call("destroy", {}, id="d1")), reply("Not done."))
    await _execute(harness.runtime, harness, model, instruction="destroy")
    denied = [ToolResultInput("d1", '{"approved": false}')]
    await _execute(harness.runtime, harness, model, tool_results=denied)
    turn = await _turn(harness.runtime, harness)
    # As earlier versions stored it: the question's preparation counted as the run.
    data = {"tool_calls": [{**turn.tool_calls[0], "wasExecuted": True}]}
    async with harness.runtime.database.transaction() as tx:
        row = await tx.get(TurnRow, turn.id)
        assert row is not None
        row.data = {**row.data, **data}
    [shown] = turn_to_json(await _turn(_process(harness), harness))["toolCalls"]
    assert (shown["outcome"], shown["wasExecuted"], shown["resultJson"]) == (
        "denied",
        False,
        REQUEST,
    )
    assert RUNS == []
