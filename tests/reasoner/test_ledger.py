"""The ledger: calls on record before they act, true outcomes on every ending, at most once."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any, ClassVar

import httpx
import pytest
from sqlalchemy import update

import aptix
from aptix import AgentTool, InvokeResult
from aptix.api import create_app
from aptix.api.routes.sessions import turn_to_json
from aptix.db.types import utc_now
from aptix.errors import LlmError
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner import ToolResultInput, TurnResult, stopping
from aptix.reasoner.call_states import CANCELLED_RUNNING, LATE_ANSWER, SHUT_DOWN_RUNNING
from aptix.reasoner.claims import INTERRUPTED, Lease
from aptix.reasoner.tables import TurnRow
from aptix.testing import FunctionModel, ScriptedModel, call, reply
from aptix.tools import AgentToolExecutionContext, function_schema
from aptix.tools.args import ToolArgs
from tests.reasoner.conftest import Died, Harness

RUNS: list[str] = []
KEYS: list[str | None] = []


class _Args(ToolArgs):
    pass


class Destroy(AgentTool):
    """Like an MCP tool under an approval policy: asks first, acts once approved."""

    TOOL_NAME = "destroy"
    TOOL_USAGE_METADATA: ClassVar[str] = "Destroys things after approval."
    is_fully_executed_on_server: ClassVar[bool] = False
    die: ClassVar[bool] = False

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        return function_schema(cls.TOOL_NAME, "Destroys.", _Args)

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        return InvokeResult.create('{"kind": "approval_request", "prompt": "Destroy?"}')

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        RUNS.append(self.TOOL_NAME)
        KEYS.append(context.idempotency_key)
        if self.die:
            raise Died
        return InvokeResult.create('{"destroyed": true}')


class Tidy(Destroy):
    """The same, declared idempotent: it may run again after a crash."""

    TOOL_NAME = "tidy"
    TOOL_ANNOTATIONS: ClassVar[dict[str, Any] | None] = {"idempotentHint": True}


PAY_STARTED = asyncio.Event()


@aptix.tool(usage="Pays an invoice.")
async def pay(invoice: int) -> str:
    """Pays an invoice.

    Args:
        invoice: The invoice number.
    """
    RUNS.append(f"pay {invoice}")
    return f"paid {invoice}"


@aptix.tool(usage="Takes its time.")
async def slow() -> str:
    """Waits until cancelled."""
    PAY_STARTED.set()
    await asyncio.sleep(60)
    return "late"


@aptix.tool(usage="Holds a payment; not safe to run twice.")
async def hold() -> str:
    """Waits until cancelled."""
    RUNS.append("hold")
    PAY_STARTED.set()
    await asyncio.sleep(60)
    return "held"


@aptix.tool(usage="Checks a balance; safe to run again.", idempotent=True)
async def recheck() -> str:
    """Slow the first time (until cancelled), quick after."""
    RUNS.append("recheck")
    if RUNS.count("recheck") == 1:
        PAY_STARTED.set()
        await asyncio.sleep(60)
    return "checked"


@pytest.fixture(autouse=True)
def _tools(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    # The test tools are offered by _reasoner, not by a mode: the mode guard stays out.
    monkeypatch.setattr(harness.runtime.executor, "_guard", None)
    global PAY_STARTED
    RUNS.clear()
    KEYS.clear()
    PAY_STARTED = asyncio.Event()  # an Event belongs to the loop of its first wait: one per test
    Destroy.die = Tidy.die = False
    for tool in (Destroy, Tidy, pay, slow, hold, recheck):
        harness.runtime.registry.register(tool)


def _reasoner(
    h: Harness, model: ScriptedModel | FunctionModel | None = None
) -> aptix.AgentReasoner:
    from dataclasses import replace

    tools = ["destroy", "tidy", "pay", "slow", "hold", "recheck", "request_user_approval"]
    settings = h.runtime.settings
    runtime = replace(h.runtime, settings=settings)
    reasoner = runtime.reasoner(model or h.model)
    reasoner._offered = lambda _w, mode_tools, _o: [*mode_tools, *tools]
    return reasoner


async def _ask(h: Harness, text: str, model: ScriptedModel | None = None) -> TurnResult:
    return await _reasoner(h, model).execute(
        session_id=h.session_id, org="acme", user="ann", instruction=text
    )


async def _resume(h: Harness, results: list[ToolResultInput]) -> TurnResult:
    return await _reasoner(h).execute(
        session_id=h.session_id, org="acme", user="ann", tool_results=results
    )


async def _expire_leases(h: Harness) -> None:
    async with h.runtime.database.transaction() as tx:
        await tx.execute(update(TurnRow).values(lease_until=utc_now() - timedelta(seconds=1)))


APPROVE = '{"approved": true}'


@pytest.mark.parametrize(
    ("tool", "runs", "outcome"), [("destroy", 0, "unknown"), ("tidy", 1, "succeeded")]
)
async def test_an_approved_call_cut_short_by_a_crash_runs_again_only_when_idempotent(
    harness: Harness, tool: str, runs: int, outcome: str
) -> None:
    harness.model.add(reply(None, call(tool, {}, id="d1")))
    handed = await _ask(harness, "destroy it")
    [pending] = handed.tool_calls
    assert (pending["state"], pending["outcome"]) == ("awaiting_approval", "pending")
    approve = [ToolResultInput("d1", APPROVE)]
    # The claim accepting the approval stores the call as started before it runs; the
    # process then dies (the prepared turn never runs: whether the call ran is unknown).
    await _reasoner(harness).prepare(
        session_id=harness.session_id, org="acme", user="ann", tool_results=approve
    )
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert [c["state"] for c in turn.tool_calls] == ["started"]
    await _expire_leases(harness)
    harness.model.add(reply("Reported."))
    retried = await _resume(harness, approve)  # the documented retry
    assert retried.text == "Reported."
    assert len(RUNS) == runs
    assert KEYS in ([], [f"{turn.id}:d1"])  # the call's idempotency key
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    [entry] = turn.tool_calls  # listed once
    assert entry["outcome"] == outcome
    # The ledger's own mark of a lost call stays in the ledger; clients read the outcome.
    assert entry.get("lost", False) is (outcome == "unknown")
    [shown] = turn_to_json(turn)["toolCalls"]
    assert "lost" not in shown
    assert shown["outcome"] == outcome
    told = [m for m in harness.model.requests[-1].messages if m["role"] == "tool"]
    if outcome == "unknown":
        assert "not run again" in json.loads(told[-1]["content"])["error"]
    else:
        assert told[-1]["content"] == '{"destroyed": true}'
    again = await _resume(harness, approve)  # posted once more: the stored answer
    assert again.text == "Reported."
    assert len(RUNS) == runs


async def test_an_approved_call_whose_model_call_died_is_not_run_again(harness: Harness) -> None:
    harness.model.add(reply(None, call("destroy", {}, id="d1")))
    await _ask(harness, "destroy it")
    approve = [ToolResultInput("d1", APPROVE)]
    harness.model.add(Died())  # type: ignore[arg-type]
    with pytest.raises(Died):
        await _resume(harness, approve)
    assert RUNS == ["destroy"]
    await _expire_leases(harness)
    harness.model.add(reply("Done."))
    await _resume(harness, approve)
    assert RUNS == ["destroy"]
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert [c["outcome"] for c in turn.tool_calls] == ["succeeded"]


async def test_a_denied_call_runs_nothing_and_reads_denied(harness: Harness) -> None:
    harness.model.add(reply(None, call("destroy", {}, id="d1")), reply("Not done."))
    await _ask(harness, "destroy it")
    await _resume(harness, [ToolResultInput("d1", '{"approved": false}')])
    assert RUNS == []
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert [(c["callId"], c["outcome"]) for c in turn.tool_calls] == [("d1", "denied")]


async def test_a_cancelled_turn_keeps_the_call_that_finished_and_says_how_the_other_ended(
    harness: Harness,
) -> None:
    model = ScriptedModel()
    model.add(reply(None, call("pay", {"invoice": 42}, id="p1"), call("slow", {}, id="s1")))
    reasoner = _reasoner(harness, model)
    running = asyncio.create_task(
        reasoner.execute(
            session_id=harness.session_id, org="acme", user="ann", instruction="pay, wait"
        )
    )
    await asyncio.wait_for(PAY_STARTED.wait(), 30)
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    # What POST /v1/sessions/{id}/turns/{turnId}/cancel does.
    await harness.runtime.turns.cancel(harness.session_id, "acme", turn.id)
    assert await asyncio.wait_for(reasoner.stop(turn.id), 30)
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    shown = {c["callId"]: c for c in turn.tool_calls}
    assert (shown["p1"]["outcome"], shown["p1"]["resultJson"]) == ("succeeded", '"paid 42"')
    # Stopped mid-run, it may have partly taken effect: its outcome is unknown (DESIGN §14).
    assert (shown["s1"]["outcome"], shown["s1"]["errorMessage"]) == ("unknown", CANCELLED_RUNNING)
    assert turn.status == "cancelled"
    answer = await asyncio.wait_for(running, 30)
    assert answer.kind == "cancelled"
    assert {c["callId"]: c["outcome"] for c in answer.tool_calls}["p1"] == "succeeded"
    assert RUNS == ["pay 42"]


async def test_a_cancel_over_http_stops_a_turn_that_another_reasoner_of_the_runtime_runs(
    harness: Harness,
) -> None:
    # The app answering the cancel has its own reasoner; the turn runs on the test's. Both sit
    # on one runtime, so the turn runs in this process and must be stopped, not left to run
    # its slow call to the end while the answer reads both calls as "unknown".
    model = ScriptedModel()
    model.add(reply(None, call("pay", {"invoice": 42}, id="p1"), call("slow", {}, id="s1")))
    app = create_app(runtime=harness.runtime, model=ScriptedModel())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]  # keyless: local
        running = asyncio.create_task(
            _reasoner(harness, model).execute(
                session_id=sid, org="local", user="local", instruction="pay, wait"
            )
        )
        await asyncio.wait_for(PAY_STARTED.wait(), 30)
        [turn] = await harness.runtime.turns.list_turns(sid, "local")
        started = time.monotonic()
        answer = await asyncio.wait_for(
            client.post(f"/v1/sessions/{sid}/turns/{turn.id}/cancel"), 30
        )
        waited = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    assert waited < 5  # stopped at once (the slow call would take 60 s), within the 5 s bound
    shown = {c["callId"]: c for c in answer.json()["toolCalls"]}
    assert (shown["p1"]["outcome"], shown["p1"]["resultJson"]) == ("succeeded", '"paid 42"')
    assert (shown["s1"]["outcome"], shown["s1"]["errorMessage"]) == ("unknown", CANCELLED_RUNNING)
    assert "lost" not in shown["s1"]
    assert answer.json()["status"] == "cancelled"
    assert (await asyncio.wait_for(running, 2)).kind == "cancelled"
    [stored] = await harness.runtime.turns.list_turns(sid, "local")
    assert (stored.status, [c["outcome"] for c in stored.tool_calls]) == (
        "cancelled",
        ["succeeded", shown["s1"]["outcome"]],
    )
    assert RUNS == ["pay 42"]


async def test_every_ended_turn_is_replayed_to_the_model_with_its_calls_and_outcomes(
    harness: Harness,
) -> None:
    harness.model.add(reply(None, call("pay", {"invoice": 42}, id="p1")), LlmError("down"))
    failed = await _ask(harness, "pay invoice 42")
    assert failed.kind == "error"
    harness.model.add(reply("Already paid."))
    await _ask(harness, "did you pay invoice 42? if not, pay it")
    messages = harness.model.requests[-1].messages
    assert {"role": "user", "content": "pay invoice 42"} in messages
    [told] = [m for m in messages if m["role"] == "tool"]
    assert (told["tool_call_id"], told["content"]) == ("p1", '"paid 42"')
    assert RUNS == ["pay 42"]


async def test_a_call_started_when_the_process_died_is_unknown_and_told_so(
    harness: Harness,
) -> None:
    harness.model.add(reply(None, call("pay", {"invoice": 7}, id="p1")), Died())  # type: ignore[arg-type]
    with pytest.raises(Died):
        await _ask(harness, "pay 7")
    # The model call after the batch died: the outcome was stored with the batch.
    await _expire_leases(harness)
    harness.model.add(reply("ok"))
    await _ask(harness, "again?")
    [first, _] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert first.status == "interrupted"
    assert [c["outcome"] for c in first.tool_calls] == ["succeeded"]


async def test_a_model_reusing_a_call_id_in_one_turn_gets_both_calls_answered(
    harness: Harness,
) -> None:
    ask = {"prompt": "Go?"}
    model = ScriptedModel()
    model.add(
        reply(None, call("request_user_approval", ask, id="same")),
        reply(None, call("request_user_approval", ask, id="same")),
        reply("Both answered."),
        reply("Free."),
    )
    app = create_app(runtime=harness.runtime, model=model)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]
        first = (
            await client.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "go"})
        ).json()
        [one] = first["toolCalls"]
        answer = {"sessionId": sid, "toolResults": [{"callId": one["callId"], "result": "yes"}]}
        second = (await client.post("/v1/agent/execute", json=answer)).json()
        [two] = second["toolCalls"]
        assert two["callId"] != "same"
        assert two["modelCallId"] == "same"
        answer = {"sessionId": sid, "toolResults": [{"callId": two["callId"], "result": "yes"}]}
        third = (await client.post("/v1/agent/execute", json=answer)).json()
        assert third["text"] == "Both answered."
        nxt = await client.post("/v1/agent/execute", json={"sessionId": sid, "instruction": "x"})
        assert nxt.status_code != 409


async def test_a_process_that_lost_its_turn_adds_its_outcome_and_never_undoes_the_takeover(
    harness: Harness,
) -> None:
    # kill -STOP on the process resuming an approved call: its lease runs out, the client's
    # retry on another process takes the turn over and finishes it. When the first process
    # wakes and finishes the call it had started, the other run's answer stands, and the
    # record learns how the call really ended.
    harness.model.add(reply(None, call("destroy", {}, id="d1")))
    await _ask(harness, "destroy it")
    approve = [ToolResultInput("d1", APPROVE)]
    stopped = _reasoner(harness, ScriptedModel())
    prepared = await stopped.prepare(
        session_id=harness.session_id, org="acme", user="ann", tool_results=approve
    )
    await _expire_leases(harness)
    elsewhere = _reasoner(harness)
    elsewhere._lease = Lease(owner="elsewhere:1:b")
    harness.model.add(reply("Reported."))
    retried = await elsewhere.execute(
        session_id=harness.session_id, org="acme", user="ann", tool_results=approve
    )
    assert (retried.kind, retried.text) == ("ok", "Reported.")
    assert RUNS == []  # not idempotent: the retry did not run it, and told the model so
    woke = await stopped.run(prepared)
    assert RUNS == ["destroy"]  # it had started before the process stopped
    assert (woke.kind, woke.text) == ("ok", "Reported.")  # the turn as it stands
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert (turn.status, turn.text, turn.warnings) == ("completed", "Reported.", [INTERRUPTED])
    [entry] = turn.tool_calls
    assert (entry["outcome"], entry["resultJson"]) == ("succeeded", '{"destroyed": true}')
    again = await _resume(harness, approve)  # the same results once more: the stored answer
    assert (again.text, RUNS) == ("Reported.", ["destroy"])


async def test_a_turn_cut_short_by_the_servers_shutdown_is_left_as_a_crash_leaves_it(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past its graceful drain uvicorn cancels the requests still running. Nobody cancelled
    # the turn: it must not read "cancelled" (a retried resume would then be refused), but
    # be taken over at once by the next claim, its stopped call saying why.
    model = ScriptedModel()
    model.add(reply(None, call("slow", {}, id="s1")))
    running = asyncio.create_task(_ask(harness, "wait", model))
    await asyncio.wait_for(PAY_STARTED.wait(), 30)
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})
    stopping.stop_process()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert turn.status == "running"
    assert turn.lease_until is not None
    assert turn.lease_until <= utc_now()
    [entry] = turn.tool_calls
    # As kill -9 leaves it: unknown and lost (the next claim does not run it again).
    assert (entry["outcome"], entry["errorMessage"]) == ("unknown", SHUT_DOWN_RUNNING)
    assert entry["lost"] is True
    assert entry["isServerTool"] is True  # it never finished, but it is the server's tool
    harness.model.add(reply("Back."))
    assert (await _ask(harness, "are you there?")).text == "Back."  # no wait for the lease
    [first, _] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert (first.status, first.warnings) == ("interrupted", [INTERRUPTED])


@pytest.mark.parametrize(
    ("tool", "runs", "outcome"), [("hold", 1, "unknown"), ("recheck", 2, "succeeded")]
)
async def test_a_resume_cut_short_by_the_shutdown_is_retried_as_after_a_crash(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, tool: str, runs: int, outcome: str
) -> None:
    # SIGTERM past the drain stops the call the resume runs; the client retries its resume.
    # As after kill -9, the call runs again only when its tool is idempotent.
    harness.model.add(reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")))
    await _ask(harness, "check, once approved")
    approve = [ToolResultInput("u1", APPROVE)]
    model = ScriptedModel()
    model.add(reply(None, call(tool, {}, id="c1")))
    running = asyncio.create_task(
        _reasoner(harness, model).execute(
            session_id=harness.session_id, org="acme", user="ann", tool_results=approve
        )
    )
    await asyncio.wait_for(PAY_STARTED.wait(), 30)
    monkeypatch.setattr(stopping, "_PROCESS", {"stopping": False})
    stopping.stop_process()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    stopping._PROCESS["stopping"] = False  # the restarted server
    harness.model.add(reply("Reported."))
    retried = await _resume(harness, approve)
    assert retried.text == "Reported."
    ran = list(RUNS)
    assert ran == [tool] * runs
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    entry = {c["callId"]: c for c in turn.tool_calls}["c1"]
    assert entry["outcome"] == outcome
    told = {
        m["tool_call_id"]: m["content"]
        for m in harness.model.requests[-1].messages
        if m["role"] == "tool"
    }
    if outcome == "unknown":
        assert json.loads(told["c1"]) == {"error": SHUT_DOWN_RUNNING}
    else:
        assert told["c1"] == '"checked"'


async def test_a_call_the_model_asked_for_after_a_cancel_elsewhere_never_ran_and_says_so(
    harness: Harness,
) -> None:
    # Another process cancels the turn while the model thinks here. The model then asks for
    # a call: its "started" cannot be stored, so it never runs, and the record must not
    # claim the server stopped while it ran. The answer came after the cancel: it is not
    # the turn's, so neither is the call it asked for (review r7 F1); a warning says so.
    asked, answer = asyncio.Event(), asyncio.Event()

    async def slow_model(request: LlmRequest) -> LlmResponse:
        asked.set()
        await answer.wait()
        return reply(None, call("pay", {"invoice": 9}, id="p9"))

    reasoner = _reasoner(harness, FunctionModel(slow_model))
    running = asyncio.create_task(
        reasoner.execute(session_id=harness.session_id, org="acme", user="ann", instruction="pay")
    )
    await asyncio.wait_for(asked.wait(), 30)
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    await harness.runtime.turns.cancel(harness.session_id, "acme", turn.id)  # as 8622 would
    answer.set()
    result = await asyncio.wait_for(running, 30)
    assert result.kind == "cancelled"
    assert RUNS == []
    assert result.tool_calls == ()
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert turn.status == "cancelled"
    assert turn.tool_calls == []
    assert LATE_ANSWER.format(status="cancelled") in turn.warnings


async def test_a_retried_resume_lists_the_calls_its_crashed_attempt_ran(harness: Harness) -> None:
    # The first resume dies after running the approved call and the model's next one; the
    # client only ever reads the retry's answer, which must say both calls ran.
    harness.model.add(reply(None, call("destroy", {}, id="d1")))
    await _ask(harness, "destroy it, then pay 3")
    approve = [ToolResultInput("d1", APPROVE)]
    harness.model.add(reply(None, call("pay", {"invoice": 3}, id="p3")), Died())  # type: ignore[arg-type]
    with pytest.raises(Died):
        await _resume(harness, approve)
    await _expire_leases(harness)
    harness.model.add(reply("Done."))
    retried = await _resume(harness, approve)
    assert retried.text == "Done."
    assert RUNS == ["destroy", "pay 3"]  # neither ran again
    shown = {c["callId"]: c["outcome"] for c in retried.tool_calls}
    assert shown == {"d1": "succeeded", "p3": "succeeded"}
