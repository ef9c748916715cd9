"""The same ``toolResults`` posted after their resume was cancelled get the cancelled turn.

docs/http-api.md ("Turns"): results posted again after the turn answered get the turn as it
stands, ``kind`` ``cancelled`` if it was cancelled. A resume cut short by a cancel kept no
answer of its own for them, so they were refused 409 ``conflict`` ("send a new
instruction"), as results never taken are, though the approval was taken and the call ran
(review r6 F1); so were the results of a resume a failure ended. Nothing runs again either
way. On SQLite and on PostgreSQL: through the reasoner, with the cancel recorded by another
process, and over HTTP.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, ClassVar

import httpx
import pytest

import aptix
from aptix import InvokeResult
from aptix.api import create_app
from aptix.errors import LlmError
from aptix.reasoner import ToolResultInput, TurnResult
from aptix.reasoner.claims import CALLS_RAN, CALLS_RAN_REPLAYED
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.sql_turns import SqlTurnStore
from aptix.reasoner.stopping import TurnTasks
from aptix.runtime import Runtime
from aptix.testing import ScriptedModel, call, reply
from aptix.tools import AgentToolExecutionContext
from tests.databases import on_both_databases
from tests.reasoner.conftest import Harness
from tests.reasoner.gated import GatedTool, register_unguarded

RUNS: list[str] = []
STARTED = asyncio.Event()
APPROVE = [ToolResultInput("g1", '{"approved": true}')]


class Wipe(GatedTool):
    """Asks first, wipes once approved; holds until cancelled while ``slow``."""

    TOOL_NAME = "wipe"
    TOOL_USAGE_METADATA: ClassVar[str] = "Wipes after approval; not safe to run twice."
    DESCRIPTION: ClassVar[str] = "Wipes."
    PROMPT: ClassVar[str] = "Wipe?"
    slow: ClassVar[bool] = True

    async def run_approved(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        RUNS.append("wipe")
        if self.slow:
            STARTED.set()
            await asyncio.sleep(3600)
        return InvokeResult.create('{"wiped": true}')


@aptix.tool(usage="Holds a payment; not safe to run twice.")
async def hold() -> str:
    """Holds until cancelled."""
    RUNS.append("hold")
    STARTED.set()
    await asyncio.sleep(3600)
    return "held"


settings = pytest.fixture(on_both_databases, name="settings")


@pytest.fixture(autouse=True)
def _tools(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    global STARTED
    register_unguarded(harness, monkeypatch, Wipe, hold)  # offered by _offer, not by a mode
    RUNS.clear()
    STARTED = asyncio.Event()  # an Event belongs to the loop of its first wait: one per test
    Wipe.slow = True


def _process(h: Harness) -> Runtime:
    """Another process on the same database: its own turn store and its own running turns."""
    return replace(h.runtime, turns=SqlTurnStore(h.runtime.database), turn_tasks=TurnTasks())


def _offer(reasoner: aptix.AgentReasoner) -> aptix.AgentReasoner:
    reasoner._offered = lambda _w, tools, _o: [*tools, "wipe", "hold"]
    return reasoner


async def _execute(runtime: Runtime, h: Harness, model: Any, **request: Any) -> TurnResult:
    reasoner = _offer(runtime.reasoner(model))
    return await reasoner.execute(session_id=h.session_id, org="acme", user="ann", **request)


async def _turn(runtime: Runtime, h: Harness) -> TurnRecord:
    [turn] = await runtime.turns.list_turns(h.session_id, "acme")
    return turn


def _listed(result: TurnResult | dict[str, Any]) -> list[tuple[str, str]]:
    calls = result.tool_calls if isinstance(result, TurnResult) else result["toolCalls"]
    return [(c["callId"], c["outcome"]) for c in calls]


async def _handed_off(runtime: Runtime, h: Harness, model: ScriptedModel) -> None:
    model.add(reply(None, call("wipe", {}, id="g1")))
    handed = await _execute(runtime, h, model, instruction="wipe it")
    assert _listed(handed) == [("g1", "pending")]


async def _approved_then(h: Harness, model: ScriptedModel, fails: Exception) -> TurnResult:
    """The wipe handed off and approved: it runs at once, then the model's next answer raises."""
    await _handed_off(h.runtime, h, model)
    Wipe.slow = False
    model.add(fails)  # type: ignore[arg-type]  # LlmError, or a bug's exception
    return await _execute(h.runtime, h, model, tool_results=APPROVE)


async def test_the_results_again_after_a_cancel_stopped_their_resume_get_the_cancelled_turn(
    harness: Harness,
) -> None:
    runtime, model = harness.runtime, ScriptedModel()
    await _handed_off(runtime, harness, model)
    running = asyncio.create_task(_execute(runtime, harness, model, tool_results=APPROVE))
    await asyncio.wait_for(STARTED.wait(), 30)
    turn = await _turn(runtime, harness)
    # What POST /v1/sessions/{id}/turns/{turnId}/cancel does in the process running it.
    await runtime.turns.cancel(harness.session_id, "acme", turn.id)
    assert await asyncio.wait_for(runtime.turn_tasks.stop(turn.id), 30)
    answered = await asyncio.wait_for(running, 30)
    assert (answered.kind, _listed(answered)) == ("cancelled", [("g1", "unknown")])
    for results in (APPROVE, [ToolResultInput("g1", '{"approved": false}')]):
        again = await _execute(runtime, harness, model, tool_results=results)
        assert again.to_wire() == answered.to_wire()  # the first results accepted win
    assert RUNS == ["wipe"]
    assert (await _turn(runtime, harness)).status == "cancelled"


async def test_the_results_again_after_another_process_cancelled_their_resume_list_its_calls(
    harness: Harness,
) -> None:
    # The cancel is on record before the process running the resume has seen it, then after:
    # both times the answer is the cancelled resume's, listing the approval it ran and the
    # call the model asked for since (stopped: unknown).
    here, there = _process(harness), _process(harness)
    model = ScriptedModel()
    await _handed_off(here, harness, model)
    Wipe.slow = False
    model.add(reply(None, call("hold", {}, id="h1")))
    running = asyncio.create_task(_execute(here, harness, model, tool_results=APPROVE))
    await asyncio.wait_for(STARTED.wait(), 30)
    turn = await _turn(there, harness)
    await there.turns.cancel(harness.session_id, "acme", turn.id)
    calls = [("g1", "succeeded"), ("h1", "unknown")]
    before = await _execute(there, harness, ScriptedModel(), tool_results=APPROVE)
    assert (before.kind, _listed(before), before.text) == ("cancelled", calls, None)
    assert here.turn_tasks.cancel(turn.id)  # what its heartbeat does once it sees the cancel
    answered = await asyncio.wait_for(running, 30)
    assert (answered.kind, _listed(answered)) == ("cancelled", calls)
    after = await _execute(there, harness, ScriptedModel(), tool_results=APPROVE)
    assert (after.kind, _listed(after)) == ("cancelled", calls)
    assert RUNS == ["wipe", "hold"]


async def test_the_results_of_a_failed_attempt_again_after_a_cancel_get_the_cancelled_turn(
    harness: Harness,
) -> None:
    # The model failed after the approved call ran: the turn waited for the same results
    # again (they continue from what is stored), then it was cancelled.
    runtime, model = harness.runtime, ScriptedModel()
    failed = await _approved_then(harness, model, LlmError("down"))
    assert (failed.kind, _listed(failed)) == ("error", [("g1", "succeeded")])
    turn = await _turn(runtime, harness)
    assert turn.status == "pending"
    await runtime.turns.cancel(harness.session_id, "acme", turn.id)
    again = await _execute(runtime, harness, model, tool_results=APPROVE)
    assert (again.kind, _listed(again)) == ("cancelled", [("g1", "succeeded")])
    assert RUNS == ["wipe"]


async def test_the_results_again_after_a_failure_ended_their_resume_get_its_error(
    harness: Harness,
) -> None:
    # A bug (or the database) ended the resume after its approved call ran: the turn is
    # over, and the results posted again get how it ended, not "unknown call id".
    runtime, model = harness.runtime, ScriptedModel()
    ended = await _approved_then(harness, model, RuntimeError("a bug in the model adapter"))
    assert (ended.kind, ended.error_code, _listed(ended)) == (
        "error",
        "internal_error",
        [("g1", "succeeded")],
    )
    again = await _execute(runtime, harness, model, tool_results=APPROVE)
    # Said to the repeat: it ran nothing, where the first answer warned that sending the
    # request again would run its calls again (review s1 F2).
    assert ended.error is not None
    assert CALLS_RAN in ended.error
    assert again.error == ended.error.replace(CALLS_RAN, CALLS_RAN_REPLAYED)
    assert replace(again, error=ended.error, warnings=ended.warnings) == ended
    assert RUNS == ["wipe"]
    assert (await _turn(runtime, harness)).status == "error"


@asynccontextmanager
async def _asked_to_wipe(h: Harness) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app on the harness's runtime, whose model first asks for the wipe (g1)."""
    model = ScriptedModel()
    model.add(reply(None, call("wipe", {}, id="g1")))
    app = create_app(runtime=h.runtime, model=model)
    _offer(app.state.reasoner)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def _approved_then_cancelled_over_http(
    client: httpx.AsyncClient, path: str, asked: dict[str, Any], approve: dict[str, Any]
) -> httpx.Response:
    """Post ``approve`` (the wipe starts), cancel the turn over HTTP; the approval's answer."""
    running = asyncio.create_task(client.post(path, json=approve))
    await asyncio.wait_for(STARTED.wait(), 30)
    sid, turn_id = asked["sessionId"], asked["turnId"]
    cancelled = await client.post(f"/v1/sessions/{sid}/turns/{turn_id}/cancel")
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "cancelled")
    return await asyncio.wait_for(running, 30)


async def test_the_same_results_over_http_answer_200_cancelled(harness: Harness) -> None:
    # The reviewer's sequence: approve, cancel while the wipe runs, post the approval again.
    async with _asked_to_wipe(harness) as client:
        sid = (await client.post("/v1/sessions", json={})).json()["sessionId"]  # keyless: local
        execute = "/v1/agent/execute"
        asked = (await client.post(execute, json={"sessionId": sid, "instruction": "wipe"})).json()
        results = [{"callId": "g1", "result": {"approved": True}}]
        approve = {"sessionId": sid, "toolResults": results}
        answered = await _approved_then_cancelled_over_http(client, execute, asked, approve)
        assert (answered.status_code, answered.json()["kind"]) == (200, "cancelled")
        again = await client.post(execute, json=approve)
        streamed = await client.post(execute, json={**approve, "stream": True})
    assert again.status_code == 200, again.text
    assert again.json() == answered.json()
    assert _listed(again.json()) == [("g1", "unknown")]
    assert streamed.status_code == 200, streamed.text
    assert f"event: turn_finished\r\ndata: {json.dumps(answered.json())}" in streamed.text
    assert RUNS == ["wipe"]


async def test_the_same_tool_message_on_the_openai_endpoint_is_already_posted(
    harness: Harness,
) -> None:
    # /v1/chat/completions shares the reasoner: the tool message posted again is the repeat
    # its page describes (409 tool_results_already_posted), not a conflict over a cancel.
    async with _asked_to_wipe(harness) as client:
        path = "/v1/chat/completions"
        messages: list[dict[str, Any]] = [{"role": "user", "content": "wipe"}]
        first = await client.post(path, json={"model": "aptix-general", "messages": messages})
        handed = first.json()
        messages += [
            handed["choices"][0]["message"],
            {"role": "tool", "tool_call_id": "g1", "content": json.dumps({"approved": True})},
        ]
        approve = {"model": "aptix-general", "messages": messages}
        answered = await _approved_then_cancelled_over_http(client, path, handed["aptix"], approve)
        assert answered.status_code == 200, answered.text
        again = await client.post(path, json=approve)
    assert again.status_code == 409, again.text
    assert again.json()["error"]["code"] == "tool_results_already_posted"
    assert RUNS == ["wipe"]
