"""``wasExecuted`` is AGN-005's: the tool completed successfully; ``outcome`` says the rest.

A call cut off by a crash did not complete: it reads ``wasExecuted: false`` with ``outcome:
unknown`` and a message that it may have taken effect and was not run again (DESIGN §14
added ``outcome`` for exactly this). A call refused before it started reads ``failed``. On
SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

import aptix
from aptix.api.routes.sessions import turn_to_json
from aptix.db.types import utc_now
from aptix.reasoner.sql_turns import SqlTurnStore
from aptix.reasoner.tables import TurnRow
from aptix.settings import AptixSettings
from aptix.testing import ScriptedModel, call, reply
from tests.reasoner.conftest import Harness

STARTED = asyncio.Event()


@aptix.tool(usage="Sends a letter; not safe to run twice.")
async def send_letter(to: str) -> str:
    """Starts sending, and the process dies before it returns.

    Args:
        to: The addressee.
    """
    STARTED.set()
    await asyncio.sleep(3600)
    return f"sent to {to}"


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> AptixSettings:
    return AptixSettings(data_dir=tmp_path, database_url=database_url, load_plugins=False)


async def test_a_call_a_crash_cut_off_reads_not_completed_and_its_outcome_unknown(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    global STARTED
    STARTED = asyncio.Event()
    monkeypatch.setattr(harness.runtime.executor, "_guard", None)
    harness.runtime.registry.register(send_letter)
    model = ScriptedModel()
    model.add(
        reply(
            None,
            call("agent_calculator", {"expression": "1+1"}, id="c1"),
            call("send_letter", {"to": "Ann"}, id="s1"),
        )
    )
    dying = harness.runtime.reasoner(model)
    dying._offered = lambda _w, tools, _o: [*tools, "send_letter"]
    running = asyncio.create_task(
        dying.execute(session_id=harness.session_id, org="acme", user="ann", instruction="go")
    )
    await asyncio.wait_for(STARTED.wait(), 30)
    # kill -9: the process stops renewing its lease; another process takes the session over.
    async with harness.runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(lease_until=utc_now() - timedelta(seconds=1)))
    other = replace(harness.runtime, turns=SqlTurnStore(harness.runtime.database))
    nxt = ScriptedModel()
    nxt.add(reply("Noted."))
    try:
        await other.reasoner(nxt).execute(
            session_id=harness.session_id, org="acme", user="ann", instruction="did it go?"
        )
        first, _ = await other.turns.list_turns(harness.session_id, "acme")
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert first.status == "interrupted"
    shown = {c["callId"]: c for c in turn_to_json(first)["toolCalls"]}  # GET /v1/sessions/{id}
    assert (shown["c1"]["outcome"], shown["c1"]["wasExecuted"]) == ("succeeded", True)
    assert (shown["s1"]["outcome"], shown["s1"]["wasExecuted"]) == ("unknown", False)
    assert "check whether it took effect" in shown["s1"]["errorMessage"]


async def test_a_call_refused_before_it_started_reads_not_executed(harness: Harness) -> None:
    harness.model.add(reply(None, call("not_offered_tool", {}, id="x1")), reply("No."))
    answer = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="go"
    )
    [refused] = answer.tool_calls
    assert (refused["outcome"], refused["wasExecuted"]) == ("failed", False)
