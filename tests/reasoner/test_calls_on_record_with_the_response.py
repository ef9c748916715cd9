"""A model's calls are on record with its response, whatever cuts the turn short, in any casing."""

from __future__ import annotations

import asyncio
import json

import pytest

from aptix.api.routes.sessions import turn_to_json
from aptix.errors import LlmError
from aptix.reasoner import ToolResultInput, TurnEvent, ledger
from aptix.reasoner.call_states import CANCELLED_BEFORE_START, CANCELLED_ELSEWHERE
from aptix.reasoner.record import TurnRecord
from aptix.testing import call, reply
from tests.reasoner.conftest import Harness


@pytest.mark.parametrize("hang_up_at", ["text", "tool_call_started"])
async def test_a_turn_cancelled_before_its_call_ran_records_the_call_as_not_run(
    harness: Harness, hang_up_at: str
) -> None:
    # A streaming client hangs up while the model's answer (text and a call) is being sent:
    # before the checkpoint that stores the call as started, or just after it.
    reached = asyncio.Event()

    async def sink(event: TurnEvent) -> None:
        if event.type == hang_up_at:
            reached.set()
            await asyncio.Event().wait()  # the send that never completes

    harness.model.add(
        reply("Let me compute.", call("agent_calculator", {"expression": "2+3"}, id="k1"))
    )
    running = asyncio.create_task(
        harness.reasoner.execute(
            session_id=harness.session_id,
            org="acme",
            user="ann",
            instruction="2+3?",
            on_event=sink,
        )
    )
    await asyncio.wait_for(reached.wait(), 30)
    running.cancel()  # what closing the SSE request does
    with pytest.raises(asyncio.CancelledError):
        await running
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert turn.status == "cancelled"
    # The client reads the call, not run, with the same words the model is told next.
    [shown] = turn_to_json(turn)["toolCalls"]
    assert (shown["callId"], shown["outcome"], shown["wasExecuted"]) == ("k1", "failed", False)
    assert shown["errorMessage"] == CANCELLED_BEFORE_START
    harness.model.add(reply("It was not computed."))
    await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="and?"
    )
    [told] = [m for m in harness.model.requests[-1].messages if m.get("tool_call_id") == "k1"]
    assert json.loads(told["content"]) == {"error": CANCELLED_BEFORE_START}


def test_a_model_call_stored_without_its_ledger_entry_is_recorded_as_lost() -> None:
    # Only a version from before the ledger kept the model's message without its call (it
    # kept a batch's calls once the batch had returned): the call may have run (review r4 F1).
    message = {
        "role": "assistant",
        "content": "On it.",
        "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "pay", "arguments": "{}"}}
        ],
    }
    record = TurnRecord(
        id="t", session_id="s", org="acme", user="ann", seq=1, instruction="pay",
        messages=[{"role": "user", "content": "pay"}, message],
    )  # fmt: skip
    ledger.end(record, "cancelled")
    [entry] = record.tool_calls
    assert (entry["callId"], entry["name"], entry["outcome"]) == ("c9", "pay", "unknown")
    assert (entry["errorMessage"], entry["wasExecuted"]) == (CANCELLED_ELSEWHERE, False)
    assert (entry["lost"], entry["idempotent"]) == (True, False)  # never run again
    told = record.messages[-1]
    assert told["tool_call_id"] == "c9"
    assert json.loads(told["content"]) == {"error": CANCELLED_ELSEWHERE}


async def test_after_a_failed_resume_a_call_reads_the_same_in_tool_calls_and_pending_calls(
    harness: Harness,
) -> None:
    harness.model.add(reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")))
    await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="do it"
    )
    harness.model.add(LlmError("the model endpoint answered 500"))
    results = [ToolResultInput("u1", "approved")]
    failed = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", tool_results=results
    )
    assert failed.kind == "error"
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    shown = turn_to_json(turn)
    assert shown["status"] == "pending"
    [listed] = shown["toolCalls"]
    [waiting] = shown["pendingCalls"]
    assert (listed["state"], listed["outcome"], listed["clientResult"]) == (
        "succeeded",
        "succeeded",
        "approved",
    )
    assert waiting == listed
    # Posting the same results again still continues from the stored ones.
    harness.model.add(reply("Done."))
    done = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", tool_results=results
    )
    assert (done.kind, done.text) == ("ok", "Done.")


async def test_a_model_naming_a_tool_in_another_casing_calls_that_tool(harness: Harness) -> None:
    # The registry, HTTP, MCP and the CLI resolve names case-insensitively; so does a turn.
    change = {"mode": "calculation", "branch": False, "reason": "the user chose it"}
    harness.model.add(
        reply(
            None,
            call("Agent_Change_Mode", change, id="m1"),
            call("AGENT_LIST_MODES", {}, id="l1"),
        ),
        reply("Switched."),
    )
    result = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="option 2"
    )
    outcomes = {c["callId"]: (c["outcome"], c["errorMessage"]) for c in result.tool_calls}
    assert outcomes == {"m1": ("succeeded", None), "l1": ("succeeded", None)}
    assert result.mode == "calculation"
