"""Turns that last: resume safety, checkpoints, leases, cancellation, one turn per session."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from datetime import timedelta

import pytest
from sqlalchemy import update

from aptix.db.types import utc_now
from aptix.errors import LlmError, NotFoundError, SessionBusyError, TurnError
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner import AgentReasoner, ToolResultInput, TurnResult
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.tables import TurnRow
from aptix.testing import FunctionModel, ScriptedModel, call, reply
from tests.reasoner.conftest import Harness

APPROVE = [ToolResultInput("u1", '{"approved": true}')]


async def _ask(h: Harness, instruction: str = "do it") -> TurnResult:
    return await h.reasoner.execute(
        session_id=h.session_id, org="acme", user="ann", instruction=instruction
    )


async def _resume(h: Harness, results: list[ToolResultInput] = APPROVE) -> TurnResult:
    return await h.reasoner.execute(
        session_id=h.session_id, org="acme", user="ann", tool_results=results
    )


async def _awaiting_approval(h: Harness) -> TurnResult:
    """A turn whose model asked for approval (call ``u1``): it waits for the client's answer."""
    h.model.add(reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")))
    return await _ask(h)


async def _approved_resume_completes(h: Harness) -> TurnResult:
    """Resume with the approval: the turn completes, the model told of it exactly once."""
    h.model.add(reply("Done, as approved."))
    retried = await _resume(h)
    assert (retried.kind, retried.text) == ("ok", "Done, as approved.")
    tool_messages = [m for m in h.model.requests[-1].messages if m["role"] == "tool"]
    assert tool_messages == [
        {"role": "tool", "tool_call_id": "u1", "content": '{"approved": true}'}
    ]
    return retried


async def _turns(h: Harness):  # type: ignore[no-untyped-def]
    return await h.runtime.turns.list_turns(h.session_id, "acme")


class Gate:
    """A model that waits at ``entered`` until the test opens ``release``."""

    def __init__(self, *answers: LlmResponse) -> None:
        self.answers = list(answers)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.requests: list[LlmRequest] = []

    async def answer(self, request: LlmRequest) -> LlmResponse:
        self.requests.append(request)
        if len(self.answers) == 1:  # the last answer waits
            self.entered.set()
            await self.release.wait()
        return self.answers.pop(0)

    async def start(
        self, harness: Harness, instruction: str
    ) -> tuple[AgentReasoner, asyncio.Task[TurnResult]]:
        """A turn of ``harness``'s session on this model, run in a task until it waits here."""
        reasoner = harness.runtime.reasoner(FunctionModel(self.answer))
        task = asyncio.create_task(
            reasoner.execute(
                session_id=harness.session_id, org="acme", user="ann", instruction=instruction
            )
        )
        await self.entered.wait()
        return reasoner, task


# --- resume safety -------------------------------------------------------------------------


async def test_a_model_error_during_a_resume_keeps_the_results_and_the_retry_completes(
    harness: Harness,
) -> None:
    await _awaiting_approval(harness)
    harness.model.add(LlmError("The model endpoint answered 500."))
    failed = await _resume(harness)
    assert (failed.kind, failed.error) == ("error", "The model endpoint answered 500.")
    [turn] = await _turns(harness)
    assert turn.status == "pending"  # retryable, not finished with the error
    assert {"role": "tool", "tool_call_id": "u1", "content": '{"approved": true}'} in (
        turn.messages
    )
    retried = await _approved_resume_completes(harness)
    # Posting it once more replays the answer; nothing runs again.
    assert await _resume(harness) == retried
    assert len(harness.model.requests) == 3
    # The approval stays in the transcript of the next turn.
    harness.model.add(reply("Anything else?"))
    await _ask(harness, "thanks")
    assert {"role": "tool", "tool_call_id": "u1", "content": '{"approved": true}'} in (
        harness.model.requests[-1].messages
    )


async def test_a_retry_after_a_failed_resume_uses_the_results_first_accepted(
    harness: Harness,
) -> None:
    await _awaiting_approval(harness)
    harness.model.add(LlmError("boom"))
    await _resume(harness, [ToolResultInput("u1", "first")])
    harness.model.add(reply("ok"))
    await _resume(harness, [ToolResultInput("u1", "second")])
    contents = [m["content"] for m in harness.model.requests[-1].messages if m["role"] == "tool"]
    assert contents == ["first"]


async def test_a_call_id_reused_in_a_later_turn_is_a_new_call(harness: Harness) -> None:
    approval = call("request_user_approval", {"prompt": "Go?"}, id="u1")
    harness.model.add(reply(None, approval), reply("First done."))
    await _ask(harness, "first")
    first = await _resume(harness)
    assert first.text == "First done."
    harness.model.add(reply(None, approval), reply("Second done."))  # the same id again
    handed = await _ask(harness, "second")
    assert handed.kind == "tool-only"
    second = await _resume(harness)
    assert (second.kind, second.text) == ("ok", "Second done.")
    assert second.turn_id != first.turn_id
    assert [t.status for t in await _turns(harness)] == ["completed", "completed"]
    harness.model.add(reply("Still usable."))
    assert (await _ask(harness, "third")).text == "Still usable."
    harness.model.assert_complete()


async def test_a_process_that_died_during_a_resume_leaves_it_retryable(harness: Harness) -> None:
    await _awaiting_approval(harness)

    class Died(BaseException):
        """Stands in for kill -9: nothing after the model call runs."""

    harness.model.add(Died())  # type: ignore[arg-type]
    with pytest.raises(Died):
        await _resume(harness)
    [turn] = await _turns(harness)
    assert turn.status == "running"
    await _expire_leases(harness)
    harness.model.add(reply("Done after the restart."))
    retried = await _resume(harness)
    assert (retried.kind, retried.text) == ("ok", "Done after the restart.")
    assert [m for m in harness.model.requests[-1].messages if m["role"] == "tool"] == [
        {"role": "tool", "tool_call_id": "u1", "content": '{"approved": true}'}
    ]


# --- checkpoints, leases, interruption -----------------------------------------------------


async def test_a_tool_batch_is_on_record_while_the_model_is_still_thinking(
    harness: Harness,
) -> None:
    gate = Gate(reply(None, call("agent_calculator", {"expression": "6*7"}, id="c1")), reply("42"))
    _, task = await gate.start(harness, "6*7")
    [turn] = await _turns(harness)
    assert turn.status == "running"
    assert [c["callId"] for c in turn.tool_calls] == ["c1"]
    assert turn.messages[-1]["role"] == "tool"
    assert turn.lease_until is not None
    assert turn.lease_until > utc_now()
    gate.release.set()
    assert (await task).text == "42"


async def test_a_turn_whose_process_died_is_interrupted_and_blocks_nothing(
    harness: Harness,
) -> None:
    class Died(BaseException):
        pass

    harness.model.add(reply(None, call("agent_calculator", {"expression": "1+1"}, id="c1")), Died())  # type: ignore[arg-type]
    with pytest.raises(Died):
        await _ask(harness, "add")
    with pytest.raises(SessionBusyError):  # its lease is still live: it may be running elsewhere
        await _ask(harness, "next")
    await _expire_leases(harness)
    harness.model.add(reply("Next one works."))
    assert (await _ask(harness, "next")).text == "Next one works."
    first, second = await _turns(harness)
    assert first.status == "interrupted"
    assert [c["callId"] for c in first.tool_calls] == ["c1"]
    assert "Interrupted" in first.warnings[0]
    assert second.status == "completed"
    assert len(harness.model.requests) == 3  # the calculator did not run again


async def test_the_start_up_sweep_marks_expired_turns_interrupted(harness: Harness) -> None:
    class Died(BaseException):
        pass

    harness.model.add(Died())  # type: ignore[arg-type]
    with pytest.raises(Died):
        await _ask(harness)
    assert await harness.runtime.turns.sweep() == 0  # live lease, live process
    await _expire_leases(harness)
    assert await harness.runtime.turns.sweep() == 1
    [turn] = await _turns(harness)
    assert turn.status == "interrupted"


async def test_a_dead_owner_on_this_host_is_interrupted_without_waiting_for_the_lease(
    harness: Harness,
) -> None:
    class Died(BaseException):
        pass

    harness.model.add(Died())  # type: ignore[arg-type]
    with pytest.raises(Died):
        await _ask(harness)
    from aptix.reasoner.claims import OWNER

    host = OWNER.split(":")[0]
    async with harness.runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(owner=f"{host}:{2**22 + 12345}:dead"))
    assert await harness.runtime.turns.sweep() == 1


# --- one turn per session, cancellation ----------------------------------------------------


async def test_a_second_request_while_a_turn_runs_is_busy(harness: Harness) -> None:
    gate = Gate(reply("slow answer"))
    _, task = await gate.start(harness, "a")
    with pytest.raises(SessionBusyError, match="is running turn"):
        await _ask(harness, "b")
    with pytest.raises(SessionBusyError):
        await _resume(harness)
    gate.release.set()
    assert (await task).text == "slow answer"
    assert len(await _turns(harness)) == 1


async def test_concurrent_instructions_run_one_turn_at_a_time(harness: Harness) -> None:
    async def answer(request: LlmRequest) -> LlmResponse:
        await asyncio.sleep(0.01)
        return reply("ok")

    reasoner = harness.runtime.reasoner(FunctionModel(answer))
    outcomes = await asyncio.gather(
        *(
            reasoner.execute(
                session_id=harness.session_id, org="acme", user="ann", instruction=str(i)
            )
            for i in range(10)
        ),
        return_exceptions=True,
    )
    ok = [o for o in outcomes if isinstance(o, TurnResult)]
    busy = [o for o in outcomes if isinstance(o, SessionBusyError)]
    assert len(ok) + len(busy) == 10
    assert len(ok) >= 1
    assert [t.seq for t in await _turns(harness)] == list(range(1, len(ok) + 1))


async def test_cancelling_the_task_marks_the_turn_cancelled(harness: Harness) -> None:
    gate = Gate(reply(None, call("agent_calculator", {"expression": "2+2"}, id="c1")), reply("4"))
    _, task = await gate.start(harness, "2+2")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [turn] = await _turns(harness)
    assert turn.status == "cancelled"
    assert [c["callId"] for c in turn.tool_calls] == ["c1"]  # executed calls stay recorded
    harness.model.add(reply("fresh"))
    assert (await _ask(harness, "again")).text == "fresh"


async def test_cancel_through_the_store_stops_a_turn_running_here(harness: Harness) -> None:
    gate = Gate(reply("never seen"))
    reasoner, task = await gate.start(harness, "a")
    [running] = await _turns(harness)
    cancelled = await harness.runtime.turns.cancel(harness.session_id, "acme", running.id)
    assert cancelled.status == "cancelled"
    assert reasoner.cancel(running.id)
    result = await task
    assert result.kind == "cancelled"
    [turn] = await _turns(harness)
    assert turn.status == "cancelled"
    with pytest.raises(TurnError, match="already finished") as raised:
        await harness.runtime.turns.cancel(harness.session_id, "acme", running.id)
    assert raised.value.code == "turn_finished"
    with pytest.raises(NotFoundError):
        await harness.runtime.turns.cancel(harness.session_id, "globex", running.id)


async def test_a_turn_cancelled_elsewhere_stops_at_its_next_checkpoint(harness: Harness) -> None:
    harness.model.add(reply(None, call("agent_calculator", {"expression": "1+2"}, id="c1")))
    started, proceed = asyncio.Event(), asyncio.Event()
    original = harness.runtime.executor.execute

    async def held(c, ctx):  # type: ignore[no-untyped-def]
        started.set()
        await proceed.wait()
        return await original(c, ctx)

    harness.runtime.executor.execute = held  # type: ignore[method-assign]
    task = asyncio.create_task(_ask(harness, "go"))
    await started.wait()
    [running] = await _turns(harness)
    await harness.runtime.turns.cancel(harness.session_id, "acme", running.id)  # no local cancel
    proceed.set()
    result = await task
    assert result.kind == "cancelled"
    assert len(harness.model.requests) == 1  # the model was not asked again
    [turn] = await _turns(harness)
    assert turn.status == "cancelled"


async def _expire_leases(h: Harness) -> None:
    async with h.runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(lease_until=utc_now() - timedelta(seconds=1)))


async def test_recent_history_is_bounded(harness: Harness) -> None:
    from dataclasses import replace

    settings = harness.runtime.settings.model_copy(update={"history_turns": 3})
    reasoner = replace(harness.runtime, settings=settings).reasoner(harness.model)
    for i in range(6):
        harness.model.add(reply(f"answer {i}"))
        await reasoner.execute(
            session_id=harness.session_id, org="acme", user="ann", instruction=f"q{i}"
        )
    users = [m["content"] for m in harness.model.requests[-1].messages if m["role"] == "user"]
    assert users == ["q2", "q3", "q4", "q5"]
    assert json.dumps(users)  # plain strings


async def test_history_stays_whole_when_two_processes_take_turns(harness: Harness) -> None:
    from dataclasses import replace

    from aptix.reasoner.sql_turns import SqlTurnStore

    if not isinstance(harness.runtime.turns, SqlTurnStore):
        pytest.fail("this test needs the SQL turn store")
    settings = harness.runtime.settings.model_copy(update={"history_turns": 4})
    # Two stores on one database stand for two processes, each with its own cached windows.
    here, there = (
        replace(harness.runtime, settings=settings, turns=SqlTurnStore(harness.runtime.database))
        for _ in range(2)
    )
    gate = ScriptedModel()
    approvals = [call("request_user_approval", {"prompt": "Go?"}, id="u1")]
    for i in range(7):
        runtime = here if i % 3 else there
        gate.add(reply(None, *approvals) if i == 4 else reply(f"answer {i}"))
        result = await runtime.reasoner(gate).execute(
            session_id=harness.session_id, org="acme", user="ann", instruction=f"q{i}"
        )
        if i == 4:  # paused for the client, then resumed by the other process
            assert result.kind == "tool-only", result
            gate.add(reply("approved answer"))
            await there.reasoner(gate).execute(
                session_id=harness.session_id, org="acme", user="ann", tool_results=APPROVE
            )
    users = [m["content"] for m in gate.requests[-1].messages if m["role"] == "user"]
    assert users == ["q2", "q3", "q4", "q5", "q6"]
    answers = [m["content"] for m in gate.requests[-1].messages if m["role"] == "assistant"]
    assert answers == ["answer 2", "answer 3", None, "approved answer", "answer 5"]


async def test_a_turn_in_a_long_session_reads_only_the_newest_turn(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aptix.reasoner import sql_turns

    if not isinstance(harness.runtime.turns, sql_turns.SqlTurnStore):
        pytest.fail("this test needs the SQL turn store")
    decoded = 0
    to_record = sql_turns._to_record

    def counting(row):  # type: ignore[no-untyped-def]
        nonlocal decoded
        decoded += 1
        return to_record(row)

    monkeypatch.setattr(sql_turns, "_to_record", counting)
    per_turn = []
    for i in range(30):
        harness.model.add(reply(f"answer {i}"))
        decoded = 0
        await _ask(harness, f"q{i}")
        per_turn.append(decoded)
    assert per_turn == [0] + [1] * 29
    users = [m["content"] for m in harness.model.requests[-1].messages if m["role"] == "user"]
    assert users == [f"q{i}" for i in range(30)]  # the whole history (50 turns) is still sent


async def _slow_claims(h: Harness, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Make the claim's SQLite transaction take 0.3 s on its worker thread; set once it started.

    Only the claim: another component's transaction (a registry check, say) may reach the
    worker first, and cancelling the caller then would test nothing (no claim, no turn).
    """
    import time

    database = h.runtime.database
    if database.sync_engine is None:
        pytest.fail("this test needs the SQLite worker thread")
    loop_event = asyncio.Event()
    loop = asyncio.get_running_loop()
    run = database._run

    def slow(fn):  # type: ignore[no-untyped-def]
        if ".claim." in fn.__qualname__:
            loop.call_soon_threadsafe(loop_event.set)
            time.sleep(0.3)
        return run(fn)

    monkeypatch.setattr(database, "_run", slow)
    return loop_event


async def _cancel_during_claim(
    h: Harness, monkeypatch: pytest.MonkeyPatch, request: Awaitable[TurnResult]
) -> TurnRecord:
    """Cancel ``request`` while its claim runs on the worker thread; the session's one turn."""
    began = await _slow_claims(h, monkeypatch)
    task = asyncio.ensure_future(request)
    await began.wait()
    task.cancel()  # the worker thread still commits the claim
    with pytest.raises(asyncio.CancelledError):
        await task
    monkeypatch.undo()
    [turn] = await _turns(h)
    return turn


async def test_a_caller_cancelled_during_its_claim_leaves_the_session_free(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn = await _cancel_during_claim(harness, monkeypatch, _ask(harness, "first"))
    assert turn.status == "interrupted"
    harness.model.add(reply("Second done."))
    assert (await _ask(harness, "second")).text == "Second done."  # not session_busy


async def test_a_resume_cancelled_during_its_claim_is_retried_with_its_results(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _awaiting_approval(harness)
    turn = await _cancel_during_claim(harness, monkeypatch, _resume(harness))
    assert turn.status == "interrupted"
    await _approved_resume_completes(harness)
