"""A turn too long for one summary request keeps its end: the answer, the outcomes, the ending.

Review r7 F1 (round 73): such a turn was cut from its start, so the summarizer read the
instruction, the call and the first part of a large tool result, then ``[...]``: the model's
answer after the result, later calls and the note of how a failed turn ended never reached it,
though the turn was recorded as summarized and never sent again. Now the turn's largest tool
results are clipped first (with the note that the tool ran), as the current turn's are, and
its other parts only when that is not enough.
"""

from __future__ import annotations

import json

from aptix.llm.types import LlmRequest, LlmResponse
from aptix.reasoner.context import ContextBudget, EstimatedTokens, PastTurn
from aptix.testing import FunctionModel, reply

BUDGET = 6_000
ANSWER = "The answer that matters: the secret word is PINEAPPLE."


def _call(call_id: str, name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


async def _summary_requests(turn: PastTurn) -> list[str]:
    """What each summary request of ``turn`` asked the model to condense (all fit the budget)."""
    budget = ContextBudget(BUDGET, strategy="summarize", counter=EstimatedTokens())
    seen: list[LlmRequest] = []

    def answer(request: LlmRequest) -> LlmResponse:
        seen.append(request)
        return reply("SUMMARY")

    assert await budget.summarize(FunctionModel(answer), None, [turn]) == "SUMMARY"
    for request in seen:
        assert budget.request_tokens(request.messages, ()) <= BUDGET
    return [str(r.messages[-1]["content"]) for r in seen]


async def test_a_large_tool_result_is_clipped_and_the_answer_after_it_kept() -> None:
    big = ("lorem ipsum dolor sit amet " * 2_300)[:60_000]
    turn = PastTurn(
        "t1",
        1,
        [
            {"role": "user", "content": "Read the big text and tell me the secret word."},
            {"role": "assistant", "content": None, "tool_calls": [_call("b1", "big_text", {})]},
            {"role": "tool", "tool_call_id": "b1", "content": big},
            {"role": "assistant", "content": ANSWER},
        ],
    )
    [sent] = await _summary_requests(turn)
    assert sent.startswith("user: Read the big text and tell me the secret word.\n")
    assert "[calls big_text({})]" in sent
    assert "tool result: lorem ipsum" in sent
    assert "[Clipped to fit the context budget: the tool ran" in sent
    assert sent.endswith(f"\nassistant: {ANSWER}")


async def test_the_outcomes_and_the_ending_after_huge_arguments_are_kept() -> None:
    huge = {"tag": "x" * 60_000}
    turn = PastTurn(
        "t1",
        1,
        [
            {"role": "user", "content": "Write the long line, then the short one."},
            {"role": "assistant", "content": None, "tool_calls": [_call("w1", "write", huge)]},
            {"role": "tool", "tool_call_id": "w1", "content": "wrote the long line"},
            {"role": "assistant", "content": None, "tool_calls": [_call("w2", "write", {})]},
            {"role": "tool", "tool_call_id": "w2", "content": '{"error": "disk full"}'},
            {
                "role": "assistant",
                "content": "[This turn ended without a final answer: it failed.]",
            },
        ],
    )
    [sent] = await _summary_requests(turn)
    assert sent.startswith("user: Write the long line, then the short one.\n")
    assert '[calls write({"tag": "xxx' in sent
    assert " [...])]" in sent  # the arguments were cut, the call's line closed
    assert "\ntool result: wrote the long line\n" in sent
    assert '\ntool result: {"error": "disk full"}\n' in sent
    assert sent.endswith("assistant: [This turn ended without a final answer: it failed.]")


async def test_a_turn_that_fits_is_sent_as_it_was() -> None:
    turn = PastTurn(
        "t1",
        1,
        [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "", "tool_calls": [_call("c1", "look", {"q": 1})]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
            {"role": "assistant", "content": "Hi", "refusal": None},
        ],
    )
    [sent] = await _summary_requests(turn)
    assert (
        sent == 'user: Hello\nassistant: [calls look({"q": 1})]\ntool result: found\nassistant: Hi'
    )
