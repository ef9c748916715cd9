"""The reasoner's loop cases, against the real runtime and an in-process scripted model."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from aptix.errors import LlmError, NotFoundError, TurnError
from aptix.reasoner import ToolResultInput, TurnEvent
from aptix.testing import call, reply
from tests.reasoner.conftest import Harness


async def _run(h: Harness, instruction: str) -> object:
    return await h.reasoner.execute(
        session_id=h.session_id, org="acme", user="ann", instruction=instruction
    )


async def test_no_tool_calls_returns_the_text_and_stores_the_turn(harness: Harness) -> None:
    harness.model.add(reply("Hello!"))
    result = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="Hi"
    )
    assert (result.kind, result.text, result.mode) == ("ok", "Hello!", "general")
    assert result.usage.total_tokens == 15
    assert result.model_id == "scripted-model"
    [request] = harness.model.requests
    system = request.messages[0]
    assert system["role"] == "system"
    assert "General mode" in system["content"]
    assert "# Available workflows" in system["content"]  # the boot message
    assert "agent_calculator:" in system["content"]  # usage metadata of an offered tool
    assert request.messages[-1] == {"role": "user", "content": "Hi"}
    assert {"agent_change_mode", "agent_list_modes", "agent_workflow_registry"} <= set(
        harness.model.offered_tools()
    )
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert (turn.status, turn.instruction, turn.text) == ("completed", "Hi", "Hello!")
    harness.model.assert_complete()


async def test_a_server_tool_then_an_answer(harness: Harness) -> None:
    harness.model.add(
        reply(None, call("agent_calculator", {"expression": "6*7"}, id="c1")),
        reply("It is 42."),
    )
    result = await _run(harness, "What is 6*7?")
    assert result.text == "It is 42."  # type: ignore[attr-defined]
    second = harness.model.requests[1].messages
    assert second[-2]["tool_calls"][0]["id"] == "c1"
    tool_message = second[-1]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == "c1"
    assert json.loads(tool_message["content"])["result"] == 42
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    [audit] = turn.tool_calls
    assert (audit["name"], audit["wasExecuted"], audit["iteration"]) == (
        "agent_calculator",
        True,
        1,
    )
    assert len(turn.model_calls) == 2


async def test_several_server_tools_in_one_response_run_concurrently(harness: Harness) -> None:
    seen: list[str] = []
    executor = harness.runtime.executor
    original = executor.execute

    async def slow_execute(c, ctx):  # type: ignore[no-untyped-def]
        seen.append(f"start {c.call_id}")
        await asyncio.sleep(0.05)
        done = await original(c, ctx)
        seen.append(f"end {c.call_id}")
        return done

    executor.execute = slow_execute  # type: ignore[method-assign]
    harness.model.add(
        reply(
            None,
            call("agent_calculator", {"expression": "1+1"}, id="a"),
            call("agent_hello_world", {"name": "Ann"}, id="b"),
            call("agent_calculator", {"expression": "2+2"}, id="c"),
        ),
        reply("done"),
    )
    result = await _run(harness, "go")
    assert result.text == "done"  # type: ignore[attr-defined]
    assert seen[:3] == ["start a", "start b", "start c"]
    tool_ids = [
        m["tool_call_id"] for m in harness.model.requests[1].messages if m["role"] == "tool"
    ]
    assert tool_ids == ["a", "b", "c"]


async def test_client_tool_hands_off_after_the_server_tools_ran(harness: Harness) -> None:
    harness.model.add(
        reply(
            None,
            call("agent_calculator", {"expression": "2+3"}, id="s1"),
            call("request_user_approval", {"prompt": "Delete it?", "destructive": True}, id="u1"),
        )
    )
    result = await _run(harness, "delete the thing")
    assert result.kind == "tool-only"  # type: ignore[attr-defined]
    calls = {c["callId"]: c for c in result.tool_calls}  # type: ignore[attr-defined]
    assert calls["s1"]["wasExecuted"] is True
    assert calls["s1"]["requiresClientExecution"] is False
    assert calls["u1"]["requiresClientExecution"] is True
    assert json.loads(calls["u1"]["resultJson"])["prompt"] == "Delete it?"
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert turn.status == "pending"
    assert [c["callId"] for c in turn.pending_calls] == ["u1"]
    assert len(harness.model.requests) == 1


async def test_resume_with_the_right_results_continues_and_finishes(harness: Harness) -> None:
    harness.model.add(reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")))
    await _run(harness, "do it")
    harness.model.add(reply("Done, as approved."))
    result = await harness.reasoner.execute(
        session_id=harness.session_id,
        org="acme",
        user="ann",
        tool_results=[ToolResultInput("u1", '{"approved": true}')],
    )
    assert (result.kind, result.text) == ("ok", "Done, as approved.")
    messages = harness.model.requests[1].messages
    assert messages[-1] == {"role": "tool", "tool_call_id": "u1", "content": '{"approved": true}'}
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert turn.status == "completed"
    # A new instruction now sees the finished turn in the transcript.
    harness.model.add(reply("Anything else?"))
    await _run(harness, "thanks")
    third = harness.model.requests[2].messages
    assert {"role": "user", "content": "do it"} in third
    assert third[-1] == {"role": "user", "content": "thanks"}


async def test_resume_posted_twice_returns_the_first_outcome(harness: Harness) -> None:
    harness.model.add(reply(None, call("request_user_approval", {"prompt": "Go?"}, id="u1")))
    await _run(harness, "do it")
    harness.model.add(reply("Finished."))
    results = [ToolResultInput("u1", "approved")]
    first = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", tool_results=results
    )
    again = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", tool_results=results
    )
    assert again == first
    assert len(harness.model.requests) == 2  # nothing ran twice


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ([], "non-empty instruction"),
        ([ToolResultInput("nope", "x")], "Unknown or already answered tool call id(s): nope"),
        ([ToolResultInput("u1", "x"), ToolResultInput("u1", "y")], "more than once"),
        ([ToolResultInput("u1", "x")], "Results are missing for pending tool call(s): u2"),
    ],
)
async def test_bad_resume_is_refused_with_nothing_executed(
    harness: Harness, results: list[ToolResultInput], message: str
) -> None:
    harness.model.add(
        reply(
            None,
            call("request_user_approval", {"prompt": "A?"}, id="u1"),
            call("request_user_approval", {"prompt": "B?"}, id="u2"),
        )
    )
    await _run(harness, "two approvals")
    with pytest.raises(TurnError) as raised:
        await harness.reasoner.execute(
            session_id=harness.session_id, org="acme", user="ann", tool_results=results
        )
    assert message in str(raised.value)
    assert len(harness.model.requests) == 1
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert turn.status == "pending"


async def test_results_for_another_sessions_calls_are_refused(harness: Harness) -> None:
    harness.model.add(reply(None, call("request_user_approval", {"prompt": "A?"}, id="u1")))
    await _run(harness, "ask")
    other = await harness.runtime.services.sessions.create_session(org="acme", user="ann")
    assert other.result is not None
    with pytest.raises(TurnError, match="No tool calls are waiting in this session"):
        await harness.reasoner.execute(
            session_id=other.result.id,
            org="acme",
            user="ann",
            tool_results=[ToolResultInput("u1", "yes")],
        )
    with pytest.raises(NotFoundError):
        await harness.reasoner.execute(
            session_id=harness.session_id,
            org="globex",
            user="eve",
            tool_results=[ToolResultInput("u1", "yes")],
        )


async def test_a_new_instruction_while_calls_are_pending_is_refused(harness: Harness) -> None:
    harness.model.add(reply(None, call("request_user_approval", {"prompt": "A?"}, id="u1")))
    await _run(harness, "ask")
    with pytest.raises(TurnError, match="waiting for the results of tool call"):
        await _run(harness, "something else")


async def test_mode_change_changes_the_next_requests_tools_and_instructions(
    harness: Harness,
) -> None:
    args = {"mode": "calculation", "branch": False, "reason": "numbers"}
    harness.model.add(reply(None, call("agent_change_mode", args)), reply("Now calculating."))
    result = await _run(harness, "switch to calculation")
    first, second = harness.model.requests
    assert "agent_hello_world" in [t["name"] for t in first.tools]
    assert "agent_hello_world" not in [t["name"] for t in second.tools]
    assert "Calculation mode" in second.messages[0]["content"]
    assert result.mode == "calculation"  # type: ignore[attr-defined]
    assert result.welcome_message.startswith("Calculation mode")  # type: ignore[attr-defined]


async def test_two_mode_changes_in_one_response_the_last_wins(harness: Harness) -> None:
    harness.model.add(
        reply(
            None,
            call("agent_change_mode", {"mode": "calculation", "branch": False, "reason": "a"}),
            call(
                "agent_change_mode", {"mode": "workflow_authoring", "branch": False, "reason": "b"}
            ),
        ),
        reply("ok"),
    )
    result = await _run(harness, "switch twice")
    assert result.mode == "workflow_authoring"  # type: ignore[attr-defined]
    assert "Workflow authoring mode" in harness.model.requests[1].messages[0]["content"]


async def test_branch_returns_the_new_session_id(harness: Harness) -> None:
    args = {"mode": "calculation", "branch": True, "reason": "new work"}
    harness.model.add(reply(None, call("agent_change_mode", args)), reply("Branched."))
    result = await _run(harness, "branch")
    child = result.branched_session_id  # type: ignore[attr-defined]
    assert child is not None
    branched = await harness.runtime.services.sessions.get_session(child, "acme")
    assert branched is not None
    assert branched.parent_session_id == harness.session_id


@pytest.mark.parametrize(
    ("tool_call", "fragment"),
    [
        (call("agent_teleport", {}), "Unknown tool 'agent_teleport'"),
        (call("agent_calculator", "{not json"), "Arguments must be a valid JSON object"),
        (call("agent_calculator", {"expression": "1/0"}), "Division by zero"),
    ],
)
async def test_tool_errors_go_back_to_the_model_and_the_turn_completes(
    harness: Harness, tool_call: object, fragment: str
) -> None:
    harness.model.add(reply(None, tool_call), reply("Sorry about that."))  # type: ignore[arg-type]
    result = await _run(harness, "try")
    assert result.kind == "ok"  # type: ignore[attr-defined]
    content = json.loads(harness.model.requests[1].messages[-1]["content"])
    assert fragment in content["error"]


async def test_a_tool_outside_the_active_workflow_is_refused(harness: Harness) -> None:
    sessions = harness.runtime.services.sessions
    await sessions.set_active_workflow(harness.session_id, "guided_calculation", "acme", "ann")
    harness.model.add(reply(None, call("agent_hello_world", {"name": "Ann"})), reply("ok"))
    await _run(harness, "greet me")
    offered = [t["name"] for t in harness.model.requests[0].tools]
    assert "agent_calculator" in offered
    assert "agent_hello_world" not in offered
    content = json.loads(harness.model.requests[1].messages[-1]["content"])
    assert "not offered" in content["error"] or "not permitted" in content["error"]


async def test_a_failed_call_logs_no_user_text_above_debug(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # The calculator quotes the expression it could not read: user text, so DEBUG only.
    harness.model.add(reply(None, call("agent_calculator", {"expression": "my-pin-4711 +"})))
    harness.model.add(reply("sorry"))
    with caplog.at_level(logging.INFO, logger="aptix"):
        await _run(harness, "compute")
    [warning] = [r for r in caplog.records if "AgentReasoner_ToolCall" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "agent_calculator failed" in warning.getMessage()
    assert all("my-pin-4711" not in r.getMessage() for r in caplog.records)
    caplog.clear()
    harness.model.add(reply(None, call("agent_calculator", {"expression": "my-pin-4711 +"})))
    harness.model.add(reply("sorry"))
    with caplog.at_level(logging.DEBUG, logger="aptix"):
        await _run(harness, "compute")
    assert any(
        "my-pin-4711" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG
    )


async def test_the_iteration_cap_ends_the_turn_without_a_final_answer(harness: Harness) -> None:
    loop = harness.runtime.reasoner(harness.model)
    for _ in range(10):
        harness.model.add(
            reply("Let me check again.", call("agent_calculator", {"expression": "1+1"}))
        )
    result = await loop.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="loop forever"
    )
    # The text beside the last call is no answer: the ending says the turn was cut off.
    reason = "Stopped after 10 model calls without a final answer (the iteration cap)."
    assert (result.kind, result.error, result.warnings) == ("error", reason, (reason,))
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert (turn.status, turn.result and turn.result["errorCode"]) == ("error", "iteration_cap")
    assert {e["outcome"] for e in turn.tool_calls} == {"succeeded"}
    harness.model.assert_complete()
    # Replayed, the turn tells the model it ended without a final answer, and why.
    harness.model.add(reply("Sorry, I could not finish."))
    await loop.execute(session_id=harness.session_id, org="acme", user="ann", instruction="next")
    before_next = harness.model.requests[-1].messages[-2]
    assert before_next == {
        "role": "assistant",
        "content": f"[This turn ended without a final answer: it failed. {reason}]",
    }


async def test_the_token_budget_ends_the_turn_without_a_final_answer(harness: Harness) -> None:
    settings = harness.runtime.settings.model_copy(update={"turn_token_budget": 20})
    from dataclasses import replace

    loop = replace(harness.runtime, settings=settings).reasoner(harness.model)
    for _ in range(2):
        harness.model.add(reply("One moment.", call("agent_calculator", {"expression": "1+1"})))
    result = await loop.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="spend"
    )
    assert result.kind == "error"
    assert "over its budget of 20, before a final answer" in result.warnings[0]
    assert result.error == result.warnings[0]
    assert len(harness.model.requests) == 2
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert (turn.status, turn.result and turn.result["errorCode"]) == (
        "error",
        "turn_token_budget",
    )


async def test_model_failure_ends_the_turn_as_an_error(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    harness.model.add(LlmError("The model endpoint at x timed out after 60 s."))
    with caplog.at_level(logging.ERROR, logger="aptix"):
        result = await _run(harness, "hi")
    # An expected failure of the endpoint: one line, no traceback.
    [record] = [r for r in caplog.records if "AgentReasoner_ExecuteAsync" in r.getMessage()]
    assert record.exc_info is None
    assert "timed out after 60 s" in record.getMessage()
    assert result.kind == "error"  # type: ignore[attr-defined]
    assert result.error == "The model endpoint at x timed out after 60 s."  # type: ignore[attr-defined]
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert turn.status == "error"


async def test_events_are_emitted_in_order(harness: Harness) -> None:
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    harness.model.add(
        reply("Let me compute.", call("agent_calculator", {"expression": "1+1"}, id="c")),
        reply("2"),
    )
    await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="1+1?", on_event=sink
    )
    assert [e.type for e in events] == [
        "text_delta",
        "text_delta",
        "text_delta",
        "text",
        "tool_call_started",
        "tool_call_finished",
        "text_delta",
        "text",
        "turn_finished",
    ]
    deltas = [e.data["delta"] for e in events if e.type == "text_delta"]
    assert deltas == ["Let ", "me ", "compute.", "2"]
    assert events[-1].data["text"] == "2"


async def test_unknown_session_is_not_found(harness: Harness) -> None:
    with pytest.raises(NotFoundError):
        await harness.reasoner.execute(
            session_id="0" * 32, org="acme", user="ann", instruction="hi"
        )
