"""The ledger across processes and crashes, on SQLite and on PostgreSQL.

Two ``SqlTurnStore`` instances on one database stand for two processes, each with its own
cached windows; a store opened after a crash stands for the restarted process.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

import aptix
from aptix.db.types import utc_now
from aptix.reasoner.call_states import UNKNOWN
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.sql_turns import SqlTurnStore
from aptix.reasoner.tables import TurnRow
from aptix.runtime import Runtime
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, call, reply
from tests.reasoner.conftest import Died, Harness

RUNS: list[str] = []
STARTED = asyncio.Event()
RELEASE = asyncio.Event()


@aptix.tool(usage="Wires money; not safe to run twice.")
async def wire(amount: int) -> str:
    """Wires money once the test releases it.

    Args:
        amount: How much.
    """
    RUNS.append(f"wire {amount}")
    STARTED.set()
    await RELEASE.wait()
    return f"wired {amount}"


@aptix.tool(usage="Charges a card; not safe to run twice.")
async def charge(amount: int) -> str:
    """Charges at once.

    Args:
        amount: How much.
    """
    RUNS.append(f"charge {amount}")
    return f"charged {amount}"


@aptix.tool(usage="Looks a price up; safe to run again.", idempotent=True)
async def lookup() -> str:
    """Slow: the process dies while it runs."""
    RUNS.append("lookup")
    STARTED.set()
    await RELEASE.wait()
    raise Died


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> AptixSettings:
    """Each test on a fresh SQLite file and on PostgreSQL."""
    return AptixSettings(data_dir=tmp_path, database_url=database_url, load_plugins=False)


@pytest.fixture(autouse=True)
def _tools(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    global STARTED, RELEASE
    # The test tools are offered by _reasoner, not by a mode: the mode guard stays out.
    monkeypatch.setattr(harness.runtime.executor, "_guard", None)
    RUNS.clear()
    STARTED, RELEASE = asyncio.Event(), asyncio.Event()  # an Event belongs to its first loop
    for tool in (wire, charge, lookup):
        harness.runtime.registry.register(tool)


def _process(h: Harness) -> Runtime:
    """The runtime as another process (or the same one restarted) sees it: its own store."""
    return replace(h.runtime, turns=SqlTurnStore(h.runtime.database))


def _reasoner(runtime: Runtime, model: ScriptedModel) -> aptix.AgentReasoner:
    reasoner = runtime.reasoner(model)
    reasoner._offered = lambda _w, mode_tools, _o: [*mode_tools, "wire", "charge", "lookup"]
    return reasoner


async def _ask(runtime: Runtime, h: Harness, text: str, model: ScriptedModel) -> str | None:
    result = await _reasoner(runtime, model).execute(
        session_id=h.session_id, org="acme", user="ann", instruction=text
    )
    return result.text


def _told(model: ScriptedModel) -> dict[str, str]:
    """The tool messages of the model's last request, by call id."""
    messages = model.requests[-1].messages
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


async def test_a_turn_settled_by_its_process_is_replayed_fresh_by_another_process(
    harness: Harness,
) -> None:
    # P1 runs the turn's slow call; P2 cancels the turn (the call reads unknown there), then
    # runs a turn of its own. P1's call then ends: P1 writes its real outcome into the
    # cancelled turn. P2's next request must tell the model that outcome, not "unknown".
    here, there = _process(harness), _process(harness)
    first = ScriptedModel()
    first.add(reply(None, call("wire", {"amount": 5}, id="w1")))
    running = asyncio.create_task(_ask(here, harness, "wire 5", first))
    await asyncio.wait_for(STARTED.wait(), 30)
    [turn] = await there.turns.list_turns(harness.session_id, "acme")
    cancelled = await there.turns.cancel(harness.session_id, "acme", turn.id)
    assert [c["outcome"] for c in cancelled.tool_calls] == ["unknown"]
    model = ScriptedModel()
    model.add(reply("B answer"), reply("C answer"))
    assert await _ask(there, harness, "B", model) == "B answer"
    assert json.loads(_told(model)["w1"])["error"]  # not known yet anywhere
    RELEASE.set()
    await asyncio.wait_for(running, 30)
    [settled, _] = await here.turns.list_turns(harness.session_id, "acme")
    assert (settled.status, settled.tool_calls[0]["outcome"]) == ("cancelled", "succeeded")
    assert await _ask(there, harness, "C", model) == "C answer"
    assert _told(model)["w1"] == '"wired 5"'
    assert RUNS == ["wire 5"]


async def _stored(runtime: Runtime, h: Harness, call_id: str, state: str) -> TurnRecord | None:
    """The session's turn once its call ``call_id`` is stored ``state`` (None after 3 s)."""
    for _ in range(60):
        [turn] = await runtime.turns.list_turns(h.session_id, "acme")
        if {c["callId"]: c["state"] for c in turn.tool_calls}.get(call_id) == state:
            return turn
        await asyncio.sleep(0.05)
    return None


async def test_a_crash_part_way_through_a_batch_keeps_the_outcomes_already_returned(
    harness: Harness,
) -> None:
    # One response asks for a slow call and a fast one; the fast one returns, then the
    # process dies. After the restart the fast call has its result, and the model reads it.
    crashing = _process(harness)
    model = ScriptedModel()
    model.add(reply(None, call("lookup", {}, id="l1"), call("charge", {"amount": 3}, id="c1")))
    running = asyncio.create_task(_ask(crashing, harness, "look up, charge 3", model))
    await asyncio.wait_for(STARTED.wait(), 30)
    restarted = _process(harness)
    stored = await _stored(restarted, harness, "c1", "succeeded")
    RELEASE.set()  # the slow call "crashes" the process
    with pytest.raises(Died):
        await asyncio.wait_for(running, 30)
    assert stored is not None, "the fast call's outcome was not stored when it returned"
    async with harness.runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(lease_until=utc_now() - timedelta(seconds=1)))
    again = ScriptedModel()
    again.add(reply("It was charged."))
    assert await _ask(restarted, harness, "did you charge?", again) == "It was charged."
    first, _ = await restarted.turns.list_turns(harness.session_id, "acme")
    assert first.status == "interrupted"
    shown = {c["callId"]: c for c in first.tool_calls}
    assert (shown["c1"]["outcome"], shown["c1"]["resultJson"]) == ("succeeded", '"charged 3"')
    assert shown["l1"]["outcome"] == "unknown"
    told = _told(again)
    assert told["c1"] == '"charged 3"'
    assert json.loads(told["l1"]) == {"error": UNKNOWN}
    assert RUNS == ["lookup", "charge 3"]
