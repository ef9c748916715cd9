"""With ``summarize``, the summary gets what the current turn leaves, never room it needs."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from aptix.llm.types import LlmRequest, LlmResponse, Message
from aptix.reasoner import context
from aptix.reasoner.context import ContextBudget, EstimatedTokens
from aptix.reasoner.record import TurnRecord
from aptix.testing import FunctionModel, reply

BUDGET = 6000


@pytest.fixture(autouse=True)
def _costs_counted_afresh() -> Iterator[None]:
    # Token costs are remembered process-wide per turn id and version, and other tests'
    # turns are called "t1" too, with other messages: counted from a stale cost, the request
    # came out over the budget in a whole run (never alone).
    context._TURN_COSTS.clear()
    yield
    context._TURN_COSTS.clear()


SUMMARY = "the user gave a long instruction"


def _system(tokens: int) -> Message:
    """A system message costing ``tokens`` (the 4 of the message's overhead included)."""
    return {"role": "system", "content": "s" * 3 * (tokens - 4)}


def _earlier() -> TurnRecord:
    """A finished turn of about 210 tokens."""
    messages: list[Message] = [
        {"role": "user", "content": "e" * 600},
        {"role": "assistant", "content": "ok"},
    ]
    return TurnRecord("t1", "s1", "acme", "ann", 1, "e" * 600, "completed", messages)


def _reading(result: str) -> TurnRecord:
    """The current turn: it asked for a file and got ``result``."""
    call = {"id": "b1", "type": "function", "function": {"name": "blob", "arguments": "{}"}}
    messages: list[Message] = [
        {"role": "user", "content": "read the file"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "b1", "content": result},
    ]
    return TurnRecord("t2", "s1", "acme", "ann", 2, "read the file", "running", messages)


def _summarizer() -> FunctionModel:
    def answer(request: LlmRequest) -> LlmResponse:
        assert str(request.messages[0]["content"]).startswith("You condense")
        return reply(SUMMARY)

    return FunctionModel(answer)


async def _prepare(system: Message, current: TurnRecord) -> tuple[tuple[Message, ...], int]:
    """The request ``current`` sends after ``_earlier()``, and the summary requests made."""
    budget = ContextBudget(BUDGET, strategy="summarize", counter=EstimatedTokens())
    model = _summarizer()
    messages = await budget.prepare(current, system, [_earlier()], (), model)
    assert budget.request_tokens(messages, ()) <= BUDGET
    return messages, len(model.requests)


def _sent_result(messages: tuple[Message, ...]) -> str:
    [result] = [m for m in messages if m["role"] == "tool"]
    return str(result["content"])


def _summary_sent(messages: tuple[Message, ...]) -> str:
    assert messages[1]["role"] == "assistant"
    content = str(messages[1]["content"])
    assert content.startswith("[Summary of the earlier conversation")
    return content


async def test_a_result_lighter_at_its_start_needs_no_clipping_beside_a_summary() -> None:
    # Half ASCII, half CJK: about 2,000 tokens, its start lighter than its average. It fits
    # whole; the earlier turn does not fit beside it, but did once the summary's reserve cut
    # the result by its average density: the summary then had nothing to cover (IndexError).
    result = "a" * 1500 + "中" * 1500
    current = _reading(result)
    messages, summaries = await _prepare(_system(3800), current)
    assert _sent_result(messages) == result
    assert summaries == 1
    assert SUMMARY in _summary_sent(messages)
    assert current.context_summary is not None
    assert current.context_summary["throughTurnId"] == "t1"
    assert current.context_dropped == {"turns": 1, "throughTurnId": "t1", "summarized": 1}
    assert current.warnings == []


async def test_a_result_that_fits_whole_is_not_clipped_to_make_room_for_a_summary() -> None:
    # About 2,000 tokens of ASCII beside a system message that leaves it about 150 tokens
    # to spare: less than the summary's share of the budget (750), more than a summary needs.
    result = "x" * 6000
    current = _reading(result)
    messages, summaries = await _prepare(_system(3800), current)
    assert _sent_result(messages) == result
    assert summaries == 1
    assert SUMMARY in _summary_sent(messages)
    assert current.warnings == []


async def test_a_long_instruction_that_fits_gets_a_summary_not_an_overflow_warning() -> None:
    current = TurnRecord("t2", "s1", "acme", "ann", 2, "i", "running")
    current.messages.append({"role": "user", "content": "i" * 6000})
    messages, summaries = await _prepare(_system(3800), current)
    assert summaries == 1
    assert SUMMARY in _summary_sent(messages)
    assert messages[-1] == {"role": "user", "content": "i" * 6000}
    assert current.warnings == []


async def test_a_turn_that_leaves_no_room_for_a_summary_says_so_without_asking_for_one() -> None:
    current = TurnRecord("t2", "s1", "acme", "ann", 2, "i", "running")
    current.messages.append({"role": "user", "content": "i" * 6000})
    messages, summaries = await _prepare(_system(3960), current)
    assert summaries == 0
    assert [m["role"] for m in messages] == ["system", "user"]
    assert current.warnings == [
        "No summary of 1 earlier turn(s): this turn leaves no room for one in the context "
        "budget (APTIX_LLM_CONTEXT_TOKENS); they were left out of the request instead."
    ]
    assert current.context_dropped == {"turns": 1, "throughTurnId": "t1", "summarized": 0}


async def test_a_stored_summary_gives_way_to_the_current_turn_too() -> None:
    # A summary written under more room is clipped to what the current turn leaves.
    result = "x" * 6000
    current = _reading(result)
    stored = {"text": "w " * 2000, "throughTurnId": "t1", "throughSeq": 1, "turns": 1}
    current.context_summary = stored
    budget = ContextBudget(BUDGET, strategy="summarize", counter=EstimatedTokens())
    model = _summarizer()
    messages = await budget.prepare(current, _system(3800), [_earlier()], (), model)
    assert budget.request_tokens(messages, ()) <= BUDGET
    assert _sent_result(messages) == result
    assert _summary_sent(messages).endswith(" [...]")
    assert model.requests == []
    assert current.context_summary == stored  # later turns, with more room, get it whole
    assert json.dumps(current.warnings) == "[]"
