"""A model answer that comes after another process recorded the turn's cancel is not kept.

Review r7 F1 (round 67): the running process saved such an answer into the cancelled turn
(its ``text``, its messages), so later turns replayed it, followed by "[This turn ended
without a final answer: it was cancelled.]", and before the turn that ran meanwhile; a
cancel sent to the running process itself keeps none. Now both agree: the turn keeps the
outcomes of its calls that ran (as documented) and says the late answer was not kept.

Two runtimes on one database stand for two ``aptix serve`` processes (as in
test_takeover_and_cancel_across_processes.py), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import aptix
from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner import TurnResult
from aptix.reasoner.call_states import LATE_ANSWER
from aptix.reasoner.context import ending_note
from aptix.reasoner.merging import merge_closed
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.sql_turns import SqlTurnStore
from aptix.reasoner.stopping import TurnTasks
from aptix.runtime import Runtime
from aptix.settings import AptixSettings
from aptix.testing import FunctionModel, call, reply
from tests.reasoner.conftest import Harness

RUNS: list[str] = []
LATE = LATE_ANSWER.format(status="cancelled")


@aptix.tool(usage="Writes; not safe to run twice.")
async def late_write() -> str:
    """Writes."""
    RUNS.append("write")
    return "written"


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> AptixSettings:
    return AptixSettings(data_dir=tmp_path, database_url=database_url, load_plugins=False)


@pytest.fixture(autouse=True)
def _tools(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness.runtime.executor, "_guard", None)
    RUNS.clear()
    harness.runtime.registry.register(late_write)


def _process(h: Harness) -> Runtime:
    """Another process on the same database: its own turn store and its own running turns."""
    return replace(h.runtime, turns=SqlTurnStore(h.runtime.database), turn_tasks=TurnTasks())


async def _execute(runtime: Runtime, h: Harness, model: Any, instruction: str) -> TurnResult:
    reasoner = runtime.reasoner(model)
    reasoner._offered = lambda _w, mode_tools, _o: [*mode_tools, "late_write"]
    return await reasoner.execute(
        session_id=h.session_id, org="acme", user="ann", instruction=instruction
    )


def _said(request: LlmRequest) -> list[tuple[str, str]]:
    return [(str(m["role"]), str(m.get("content"))) for m in request.messages[1:]]


@pytest.mark.parametrize("late", [reply("late answer"), reply(None, call("late_write", {}))])
async def test_an_answer_after_a_cancel_elsewhere_is_not_part_of_the_turn(
    harness: Harness, late: LlmResponse
) -> None:
    here, there = _process(harness), _process(harness)
    asked, release = asyncio.Event(), asyncio.Event()

    async def slow(request: LlmRequest) -> LlmResponse:
        asked.set()
        await release.wait()
        return late

    running = asyncio.create_task(_execute(here, harness, FunctionModel(slow), "M1"))
    await asyncio.wait_for(asked.wait(), 30)
    [first] = await there.turns.list_turns(harness.session_id, "acme")
    await there.turns.cancel(harness.session_id, "acme", first.id)
    model = FunctionModel(lambda request: reply("answer"))
    assert (await _execute(there, harness, model, "M2")).kind == "ok"

    release.set()  # the model answers the cancelled turn now, after M2 ran
    result = await asyncio.wait_for(running, 30)
    # The request that ran it answers as a cancel sent to its own process would.
    assert (result.kind, result.text, result.finish_reason) == ("cancelled", None, None)
    assert result.tool_calls == ()
    assert LATE in result.warnings
    stored = (await there.turns.list_turns(harness.session_id, "acme"))[0]
    assert (stored.status, stored.text, stored.tool_calls) == ("cancelled", None, [])
    assert stored.messages == [{"role": "user", "content": "M1"}]
    assert LATE in stored.warnings
    assert len(stored.model_calls) == 1  # it was made, and its tokens spent
    assert RUNS == []  # a call the late answer asked for never ran

    assert (await _execute(there, harness, model, "M3")).kind == "ok"
    assert _said(model.requests[-1]) == [
        ("user", "M1"),
        ("assistant", "[This turn ended without a final answer: it was cancelled.]"),
        ("user", "M2"),
        ("assistant", "answer"),
        ("user", "M3"),
    ]


def _turn(status: str, messages: list[dict[str, Any]], text: str | None) -> TurnRecord:
    return TurnRecord(
        id="t1",
        session_id="s",
        org="acme",
        user="ann",
        seq=1,
        instruction="M1",
        status=status,  # type: ignore[arg-type]
        messages=messages,
        text=text,
        owner="here",
    )


def test_calls_that_ran_keep_their_outcomes_and_only_the_late_answer_goes() -> None:
    # Saved before the cancel: the model's call, started. This run then ran it and took the
    # model's next answer; the turn was cancelled elsewhere in between.
    asked = {
        "role": "assistant",
        "content": "Writing first.",
        "tool_calls": [
            {"id": "w1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
        ],
    }
    user = {"role": "user", "content": "M1"}
    stored = _turn("cancelled", [user, asked], "Writing first.")
    stored.tool_calls = [{"callId": "w1", "name": "w", "state": "started", "outcome": "pending"}]
    ours = _turn("running", [user, asked], "Writing first.")
    ours.tool_calls = [
        {
            "callId": "w1",
            "name": "w",
            "state": "succeeded",
            "outcome": "succeeded",
            "wasExecuted": True,
            "resultJson": '"written"',
        },
    ]
    ours.messages += [
        {"role": "tool", "tool_call_id": "w1", "content": '"written"'},
        {"role": "assistant", "content": "Done: written."},
    ]
    ours.text = "Done: written."
    ours.result = {"kind": "ok", "text": "Done: written."}
    merged = merge_closed(stored, ours)
    assert merged.status == "cancelled"
    assert merged.messages == [
        user,
        asked,
        {"role": "tool", "tool_call_id": "w1", "content": '"written"'},
    ]
    assert [(e["callId"], e["outcome"]) for e in merged.tool_calls] == [("w1", "succeeded")]
    assert (merged.text, merged.result) == ("Writing first.", None)  # the text on record
    assert LATE in merged.warnings
    # Without a late answer nothing is said, and the outcome is merged as before.
    again = merge_closed(stored, _turn("running", [user, asked], "Writing first."))
    assert LATE not in again.warnings


def test_a_turn_cancelled_after_the_model_answered_does_not_say_without_a_final_answer() -> None:
    # A cancel in the running process just after the model's answer was taken, before the
    # turn completed: the answer is the turn's, and the note says how the turn ended after it.
    user = {"role": "user", "content": "M1"}
    answered = _turn("cancelled", [user, {"role": "assistant", "content": "Hi."}], "Hi.")
    assert ending_note(answered) == {
        "role": "assistant",
        "content": (
            "[This turn ended after the answer above, before it completed: it was cancelled.]"
        ),
    }
    unanswered = _turn("cancelled", [user], None)
    assert ending_note(unanswered) == {
        "role": "assistant",
        "content": "[This turn ended without a final answer: it was cancelled.]",
    }
