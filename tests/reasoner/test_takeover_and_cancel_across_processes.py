"""A turn taken over, or cancelled, by another process while a call of it runs here.

Two runtimes on one database, each with its own ``SqlTurnStore`` and its own running turns,
stand for two ``aptix serve`` processes (tests/reasoner/test_two_serve_processes.py does
the same with real ones); on SQLite and on PostgreSQL. A process that takes over its own
turn runs on one runtime, with the SQL store and with the in-memory one.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from sqlalchemy import update

import aptix
from aptix import AgentTool, InvokeResult
from aptix.db.types import utc_now
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner import InMemoryTurnStore, ToolResultInput, TurnResult
from aptix.reasoner.call_states import CANCELLED_RUNNING
from aptix.reasoner.claims import Lease
from aptix.reasoner.endings import TAKEN_OVER
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.sql_turns import SqlTurnStore
from aptix.reasoner.stopping import TurnTasks
from aptix.reasoner.tables import TurnRow
from aptix.runtime import Runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, ScriptedModel, call, reply
from aptix.tools import AgentToolExecutionContext, function_schema
from aptix.tools.args import ToolArgs
from tests.reasoner.conftest import Harness

RUNS: list[str] = []
STARTED = asyncio.Event()
RELEASE = asyncio.Event()
APPROVE = [ToolResultInput("g1", '{"approved": true}')]


class _Args(ToolArgs):
    pass


class Charge(AgentTool):
    """Like an MCP tool under an approval policy: asks first, then charges once approved."""

    TOOL_NAME = "charge"
    TOOL_USAGE_METADATA: ClassVar[str] = "Charges a card after approval; not safe to run twice."
    is_fully_executed_on_server: ClassVar[bool] = False

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Charges.", _Args)

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.create('{"kind": "approval_request", "prompt": "Charge?"}')

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        RUNS.append("charge")
        STARTED.set()
        await RELEASE.wait()
        return InvokeResult.create('{"charged": true}')


@aptix.tool(usage="Writes slowly; not safe to run twice.")
async def slow_write() -> str:
    """Writes, then waits far longer than the test lets it."""
    RUNS.append("start")
    STARTED.set()
    await asyncio.sleep(60)
    RUNS.append("end")
    return "written"


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
    for tool in (Charge, slow_write):
        harness.runtime.registry.register(tool)


def _process(h: Harness) -> Runtime:
    """Another process on the same database: its own turn store and its own running turns."""
    return replace(h.runtime, turns=SqlTurnStore(h.runtime.database), turn_tasks=TurnTasks())


def _reasoner(runtime: Runtime, model: Any, lease: float = 30.0) -> aptix.AgentReasoner:
    reasoner = runtime.reasoner(model)
    reasoner._offered = lambda _w, mode_tools, _o: [*mode_tools, "charge", "slow_write"]
    reasoner._lease = Lease(lease)
    return reasoner


async def _execute(
    runtime: Runtime, h: Harness, model: Any, lease: float = 30.0, **request: Any
) -> TurnResult:
    return await _reasoner(runtime, model, lease).execute(
        session_id=h.session_id, org="acme", user="ann", **request
    )


async def _expire(runtime: Runtime) -> None:
    """The running turn's lease runs out now, as when its process is frozen past it."""
    past = utc_now() - timedelta(seconds=1)
    if isinstance(runtime.turns, InMemoryTurnStore):
        for turns in runtime.turns._turns.values():  # no public way to freeze a process
            for stored in turns:
                stored.lease_until = past
        return
    async with runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(lease_until=past))


async def _turn(runtime: Runtime, h: Harness) -> TurnRecord:
    [turn] = await runtime.turns.list_turns(h.session_id, "acme")
    return turn


def _call(turn: TurnRecord | TurnResult, call_id: str) -> dict[str, Any]:
    [found] = [c for c in turn.tool_calls if c["callId"] == call_id]
    return found


async def test_a_call_that_ends_after_another_process_took_the_turn_over_keeps_its_outcome(
    harness: Harness,
) -> None:
    # Process A runs an approved charge; its lease runs out (as when it is frozen), and the
    # client posts the same approval to process B, which takes the turn over (the charge is
    # unknown there and not run again) and calls its model. Then A's charge returns.
    here, there = _process(harness), _process(harness)
    first = ScriptedModel()
    first.add(reply(None, call("charge", {}, id="g1")), reply("A's answer"))
    handed = await _execute(here, harness, first, instruction="charge it")
    assert handed.kind == "tool-only"
    running_here = asyncio.create_task(_execute(here, harness, first, tool_results=APPROVE))
    await asyncio.wait_for(STARTED.wait(), 30)
    async with harness.runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(lease_until=utc_now() - timedelta(seconds=1)))
    asked, answer = asyncio.Event(), asyncio.Event()

    async def held(request: LlmRequest) -> LlmResponse:
        asked.set()
        await answer.wait()
        return reply("B's answer")

    running_there = asyncio.create_task(
        _execute(there, harness, FunctionModel(held), tool_results=APPROVE)
    )
    await asyncio.wait_for(asked.wait(), 30)
    assert _call(await _turn(there, harness), "g1")["outcome"] == "unknown"

    RELEASE.set()  # A's charge returns while B runs the turn
    result_here = await asyncio.wait_for(running_here, 30)
    # A tells its client what happened, not a cancel nobody asked for, with the true outcome.
    assert (result_here.kind, result_here.error) == ("error", TAKEN_OVER)
    charged = _call(result_here, "g1")
    assert (charged["outcome"], charged["resultJson"]) == ("succeeded", '{"charged": true}')
    # Written down at once, while B still runs the turn.
    stored = await _turn(there, harness)
    assert stored.status == "running"
    assert (_call(stored, "g1")["outcome"], _call(stored, "g1")["resultJson"]) == (
        "succeeded",
        '{"charged": true}',
    )

    answer.set()
    result_there = await asyncio.wait_for(running_there, 30)
    assert (result_there.kind, result_there.text) == ("ok", "B's answer")
    assert _call(result_there, "g1")["outcome"] == "succeeded"  # B's answer says it too
    final = await _turn(here, harness)
    assert (final.status, _call(final, "g1")["outcome"]) == ("completed", "succeeded")
    assert final.result is not None
    assert [c["outcome"] for c in final.result["toolCalls"]] == ["succeeded"]
    assert RUNS == ["charge"]


async def test_a_cancel_sent_to_another_process_stops_the_running_call_within_a_third_of_the_lease(
    harness: Harness,
) -> None:
    lease = 1.5
    here, there = _process(harness), _process(harness)
    model = ScriptedModel()
    model.add(reply(None, call("slow_write", {}, id="w1")), reply("went on"))
    running = asyncio.create_task(_execute(here, harness, model, lease, instruction="write"))
    await asyncio.wait_for(STARTED.wait(), 30)
    turn = await _turn(there, harness)
    cancelled = await there.turns.cancel(harness.session_id, "acme", turn.id)
    asked = time.monotonic()
    assert cancelled.status == "cancelled"

    result = await asyncio.wait_for(running, lease / 3 + 3)
    assert time.monotonic() - asked < lease / 3 + 2
    assert result.kind == "cancelled"
    assert RUNS == ["start"]  # stopped, never finished
    stopped = _call(result, "w1")
    assert (stopped["outcome"], stopped["errorMessage"]) == ("unknown", CANCELLED_RUNNING)
    stored = await _turn(there, harness)
    assert stored.status == "cancelled"
    assert (_call(stored, "w1")["outcome"], _call(stored, "w1")["errorMessage"]) == (
        "unknown",
        CANCELLED_RUNNING,
    )
    assert len(model.requests) == 1  # the model was not asked again


async def test_a_turn_cancelled_twice_in_its_process_still_answers_cancelled(
    harness: Harness,
) -> None:
    # Its heartbeat may see a cancel another process recorded just as a cancel sent here
    # stops it: the second must not cut short the ending the first began.
    here = _process(harness)
    model = ScriptedModel()
    model.add(reply(None, call("slow_write", {}, id="w1")))
    running = asyncio.create_task(_execute(here, harness, model, instruction="write"))
    await asyncio.wait_for(STARTED.wait(), 30)
    turn = await _turn(here, harness)
    assert here.turn_tasks.cancel(turn.id)
    assert here.turn_tasks.cancel(turn.id)
    result = await asyncio.wait_for(running, 10)
    assert result.kind == "cancelled"
    assert _call(result, "w1")["outcome"] == "unknown"


def _charged(turn: TurnRecord | TurnResult | dict[str, Any]) -> tuple[str, str | None]:
    calls = turn["toolCalls"] if isinstance(turn, dict) else turn.tool_calls
    [found] = [c for c in calls if c["callId"] == "g1"]
    return found["outcome"], found.get("resultJson")


CHARGED = ("succeeded", '{"charged": true}')


async def _taken_over_then_charged(
    h: Harness, here: Runtime, there: Runtime
) -> tuple[TurnRecord, asyncio.Task[TurnResult], asyncio.Future[Exception | None]]:
    """A charge approved on ``here`` returns after ``there`` took the turn over.

    ``there``'s run then waits on its model until the returned future is given what the
    model does: answer (None) or raise. The turn, as stored once ``here`` settled the
    charge's outcome into it, is returned with that run.
    """
    first = ScriptedModel()
    first.add(reply(None, call("charge", {}, id="g1")))
    handed = await _execute(here, h, first, instruction="charge it")
    assert handed.kind == "tool-only"
    running_here = asyncio.create_task(_execute(here, h, first, tool_results=APPROVE))
    await asyncio.wait_for(STARTED.wait(), 30)
    await _expire(here)
    asked = asyncio.Event()
    answer: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    async def held(request: LlmRequest) -> LlmResponse:
        asked.set()
        failure = await asyncio.shield(answer)  # a cancel of the run leaves it set-able
        if failure is not None:
            raise failure
        return reply("B's answer")

    running_there = asyncio.create_task(
        _execute(there, h, FunctionModel(held), tool_results=APPROVE)
    )
    await asyncio.wait_for(asked.wait(), 30)
    RELEASE.set()  # here's charge returns while there runs the turn
    result_here = await asyncio.wait_for(running_here, 30)
    assert (result_here.kind, result_here.error) == ("error", TAKEN_OVER)
    assert _charged(result_here) == CHARGED
    stored = await _turn(there, h)
    assert (stored.status, _charged(stored)) == ("running", CHARGED)
    return stored, running_there, answer


@pytest.mark.parametrize(
    ("ending", "status"),
    [
        ("cancelled_in_its_process", "cancelled"),
        ("cancelled_elsewhere", "cancelled"),
        ("interrupted", "interrupted"),
        ("broken", "error"),
        ("completed", "completed"),
    ],
)
async def test_an_outcome_settled_into_a_taken_over_turn_survives_every_ending(
    harness: Harness, ending: str, status: str
) -> None:
    # Process A's charge succeeded after B took the turn over, and A wrote so into B's open
    # turn; B's copy still reads it unknown. Whichever way B's run then ends before its next
    # save, the known outcome stands in the record and in B's answer (the cancel of B's turn
    # wrote B's stale "unknown" over it, and a client told to check before retrying might
    # charge again).
    here, there = _process(harness), _process(harness)
    stored, running_there, answer = await _taken_over_then_charged(harness, here, there)
    if ending == "cancelled_in_its_process":  # as the cancel route sent to B does
        await there.turns.cancel(harness.session_id, "acme", stored.id)
        assert await there.turn_tasks.stop(stored.id)
    elif ending == "cancelled_elsewhere":  # B reads it at its next save
        await here.turns.cancel(harness.session_id, "acme", stored.id)
    elif ending == "interrupted":  # B frozen past its lease, and swept
        await _expire(here)
        assert await here.turns.sweep() == 1
    answer.set_result(RuntimeError("the model's client broke") if ending == "broken" else None)
    if ending == "broken":
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(running_there, 30)
    else:
        result_there = await asyncio.wait_for(running_there, 30)
        assert _charged(result_there) == CHARGED
    final = await _turn(here, harness)
    assert (final.status, _charged(final)) == (status, CHARGED)
    if final.result is not None:  # the answer a read or a retried resume gives
        assert _charged(final.result) == CHARGED
    assert RUNS == ["charge"]


@pytest.mark.parametrize("store", ["sql", "memory"])
async def test_a_cancel_stops_a_run_that_took_over_a_turn_of_its_own_process(
    harness: Harness, store: str
) -> None:
    # The lease of run 1 ran out and the same resume, retried on the same process, took the
    # turn over as run 2. Run 1's ending unregistered run 2 (runs were kept by turn id), so
    # the cancel route found nothing to stop and run 2 went on with its model.
    here = _process(harness)
    if store == "memory":
        here = replace(here, turns=InMemoryTurnStore(harness.runtime.services.sessions))
    stored, run_2, answer = await _taken_over_then_charged(harness, here, here)
    await here.turns.cancel(harness.session_id, "acme", stored.id)
    try:
        assert await here.turn_tasks.stop(stored.id)
        result = await asyncio.wait_for(run_2, 10)
    finally:  # run 2 ends before the runtime closes, stopped or not
        if not answer.done():
            answer.set_result(None)
        await asyncio.wait((run_2,), timeout=10)
    assert result.kind == "cancelled"
    assert _charged(result) == CHARGED
    final = await _turn(here, harness)
    assert (final.status, _charged(final)) == ("cancelled", CHARGED)
    assert RUNS == ["charge"]
