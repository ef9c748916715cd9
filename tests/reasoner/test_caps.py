"""Caps on one model response (issue 15 item 8): tool calls, repeated call ids, text size."""

from __future__ import annotations

from aptix.reasoner import TurnEvent
from aptix.testing import call, reply
from tests.reasoner.conftest import Harness


async def _turn(h: Harness, instruction: str = "Go") -> object:
    return await h.reasoner.execute(
        session_id=h.session_id, org="acme", user="ann", instruction=instruction
    )


async def test_tool_calls_beyond_the_cap_are_not_run_and_named_in_a_warning(
    harness: Harness,
) -> None:
    calls = [call("agent_calculator", {"expression": f"{i}+1"}, id=f"c{i}") for i in range(40)]
    harness.model.add(reply(None, *calls), reply("Done."))
    result = await _turn(harness)
    # The calls over the cap are listed, not run (review r7 F2, round 73).
    listed = result.tool_calls  # type: ignore[attr-defined]
    assert [c["callId"] for c in listed if c["wasExecuted"]] == [f"c{i}" for i in range(32)]
    assert [c["outcome"] for c in listed[32:]] == ["failed"] * 8
    second = harness.model.requests[1].messages
    assert len(second[-41]["tool_calls"]) == 40
    # Each refused call is answered first, with why; then the results of those that ran.
    assert [m["tool_call_id"] for m in second[-40:]] == [
        f"c{i}" for i in [*range(32, 40), *range(32)]
    ]
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert turn.warnings == [
        "The model asked for 40 tool calls in one response; only the first 32 were run "
        "(APTIX_MAX_TOOL_CALLS_PER_RESPONSE)."
    ]
    assert len(turn.tool_calls) == 40


async def test_a_call_id_repeated_within_one_response_is_refused(harness: Harness) -> None:
    harness.model.add(
        reply(
            None,
            call("agent_calculator", {"expression": "1+1"}, id="dup"),
            call("agent_calculator", {"expression": "2+2"}, id="dup"),
            call("agent_calculator", {"expression": "3+3"}, id="other"),
        ),
        reply("Done."),
    )
    await _turn(harness)
    second = harness.model.requests[1].messages
    results = [m for m in second if m["role"] == "tool"]
    # The repeated call is answered first, under an id of its own, with why (review r7 F2).
    assert [m["tool_call_id"] for m in results[1:]] == ["dup", "other"]
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert turn.warnings == [
        "The model used the tool call id(s) 'dup' more than once in one response; "
        "1 repeated call(s) were refused and not run."
    ]
    assert [(c["argumentsJson"], c["wasExecuted"]) for c in turn.tool_calls] == [
        ('{"expression": "1+1"}', True),
        ('{"expression": "2+2"}', False),
        ('{"expression": "3+3"}', True),
    ]
    assert turn.tool_calls[1]["callId"] == results[0]["tool_call_id"]


async def test_model_text_beyond_the_cap_is_cut_with_a_warning(harness: Harness) -> None:
    harness.model.add(reply("x" * 150_000))
    result = await _turn(harness)
    assert len(result.text or "") == 100_000  # type: ignore[attr-defined]
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert len(turn.text or "") == 100_000
    assert len(turn.messages[-1]["content"]) == 100_000
    assert turn.warnings == [
        "The model's text was 150000 characters; only the first 100000 were kept "
        "(APTIX_MAX_MODEL_TEXT_CHARS)."
    ]


async def test_streamed_text_stops_at_the_same_cap(harness: Harness) -> None:
    deltas: list[str] = []

    async def sink(event: TurnEvent) -> None:
        if event.type == "text_delta":
            deltas.append(event.data["delta"])

    words = "word " * 30_000  # 150,000 characters, streamed word by word
    harness.model.add(reply(words))
    result = await harness.reasoner.execute(
        session_id=harness.session_id, org="acme", user="ann", instruction="Go", on_event=sink
    )
    streamed = "".join(deltas)
    assert len(streamed) == 100_000
    assert streamed == result.text  # type: ignore[attr-defined]


async def test_a_refusal_beyond_the_cap_is_cut_with_a_warning(harness: Harness) -> None:
    # A refusal is model output in place of text: kept, answered and replayed like text.
    harness.model.add(reply(None, refusal="n" * 150_000))
    result = await _turn(harness)
    assert len(result.refusal or "") == 100_000  # type: ignore[attr-defined]
    [turn] = await harness.runtime.turns.list_turns(harness.session_id, "acme")
    assert len(turn.refusal or "") == 100_000
    assert turn.warnings == [
        "The model's refusal was 150000 characters; only the first 100000 were kept "
        "(APTIX_MAX_MODEL_TEXT_CHARS)."
    ]
