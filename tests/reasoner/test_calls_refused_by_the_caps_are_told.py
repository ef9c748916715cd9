"""Calls refused by a response's caps are on record as not run, and the model is told so.

Review r7 F2 (round 73): calls over ``APTIX_MAX_TOOL_CALLS_PER_RESPONSE``, and a call reusing
another's id in the same response, were cut from the model's response before it was stored:
the next request replayed the model's message without them and without any result, so the
model, reading its own message as asking for fewer calls, answered as if they had run, and
``toolCalls`` did not list them. They now stay in the model's message, each with a tool
result saying it was not run and why, and in ``toolCalls`` as ``failed`` and not executed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aptix.reasoner import TurnEvent
from aptix.settings import AptixSettings
from aptix.testing import call, reply
from tests.reasoner.conftest import Harness


@pytest.fixture
def settings(tmp_path: Path) -> AptixSettings:
    return AptixSettings(data_dir=tmp_path, load_plugins=False, max_tool_calls_per_response=2)


def _sum(expression: str, call_id: str) -> Any:
    return call("agent_calculator", {"expression": expression}, id=call_id)


def _answered(messages: tuple[dict[str, Any], ...]) -> list[tuple[list[str], list[str]]]:
    """Each model message with calls: its call ids, and the ids of the tool results after it."""
    shown = []
    for index, message in enumerate(messages):
        if message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            after = messages[index + 1 : index + 1 + len(ids)]
            shown.append((ids, [m.get("tool_call_id") for m in after]))
    return shown


async def test_calls_over_the_cap_are_told_to_the_model_and_listed(harness: Harness) -> None:
    harness.model.add(
        reply(None, _sum("1+1", "a1"), _sum("2+2", "a2"), _sum("3+3", "a3")),
        reply("Two of them ran."),
    )
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    result = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="Go", on_event=sink
    )
    assert result.kind == "ok"
    second = harness.model.requests[1].messages
    [(asked, results)] = _answered(second)
    assert asked == ["a1", "a2", "a3"]
    assert sorted(results) == ["a1", "a2", "a3"]
    told = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    assert [json.loads(told[i])["resultText"] for i in ("a1", "a2")] == ["2", "4"]
    error = json.loads(told["a3"])["error"]
    assert error.startswith("Not run: the response asked for 3 tool calls")
    assert "APTIX_MAX_TOOL_CALLS_PER_RESPONSE" in error
    outcomes = {c["callId"]: (c["outcome"], c["wasExecuted"]) for c in result.tool_calls}
    assert outcomes == {
        "a1": ("succeeded", True),
        "a2": ("succeeded", True),
        "a3": (
            "failed",
            False,
        ),
    }
    [refused] = [c for c in result.tool_calls if c["callId"] == "a3"]
    assert refused["errorMessage"] == error
    finished = [e.data["callId"] for e in events if e.type == "tool_call_finished"]
    assert sorted(finished) == ["a1", "a2", "a3"]
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert [c["callId"] for c in turn.tool_calls] == ["a1", "a2", "a3"]
    assert turn.warnings == [
        "The model asked for 3 tool calls in one response; only the first 2 were run "
        "(APTIX_MAX_TOOL_CALLS_PER_RESPONSE)."
    ]
    # The next turn replays it whole: every call of the model's message has its result.
    harness.model.add(reply("ok"))
    await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="Again"
    )
    [(asked, results)] = _answered(harness.model.requests[-1].messages)
    assert asked == ["a1", "a2", "a3"]
    assert sorted(results) == asked


async def test_a_call_repeating_an_id_is_told_to_the_model_and_listed(harness: Harness) -> None:
    harness.model.add(
        reply(None, _sum("1+1", "d1"), _sum("2+2", "d1"), _sum("3+3", "other")),
        reply("Done."),
    )
    result = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="Go"
    )
    assert result.kind == "ok"
    second = harness.model.requests[1].messages
    [(asked, results)] = _answered(second)
    first, fresh, other = asked
    assert (first, other) == ("d1", "other")
    assert fresh not in ("d1", "other")  # its own id, so that its result answers it alone
    assert sorted(results) == sorted(asked)
    told = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    assert [json.loads(told[i])["resultText"] for i in ("d1", "other")] == ["2", "6"]
    error = json.loads(told[fresh])["error"]
    assert error.startswith("Not run: another call of the same response used its id 'd1'")
    [refused] = [c for c in result.tool_calls if c["callId"] == fresh]
    assert refused["modelCallId"] == "d1"
    assert refused["argumentsJson"] == '{"expression": "2+2"}'
    assert (refused["outcome"], refused["wasExecuted"], refused["errorMessage"]) == (
        "failed",
        False,
        error,
    )
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert len(turn.tool_calls) == 3
