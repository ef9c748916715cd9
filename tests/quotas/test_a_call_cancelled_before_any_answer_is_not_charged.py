"""A model call cancelled before the model sent anything gives its hold back, charging nothing.

The match arbiter's time limit (an ``asyncio.wait_for``) and a turn's cancel end a model call
by cancelling it. Every cancelled call was charged its prompt's estimate, to the budget and in
``/v1/usage``, though the model never answered and the turn recorded no usage: only a call
that failed (refused, unreachable, the client's own time limit) gave its hold back.
"""

from __future__ import annotations

import asyncio

import pytest

from aptix.llm.types import LlmRequest, LlmResponse, TextSink
from aptix.quotas import PAYER, MeteredModel, Payer, Quotas
from aptix.quotas.usage import today
from aptix.reasoner.arbiter_model import LlmArbiterModel
from aptix.workflows.matching.arbiter import MatchArbiter
from tests.workflows.conftest import make_manifest

REQUEST = LlmRequest(messages=({"role": "user", "content": "hi"},))


class NeverAnswers:
    """Sends ``said`` (if any), then signals ``reached`` and never answers."""

    def __init__(self, said: str = "") -> None:
        self.said = said
        self.reached = asyncio.Event()

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        if self.said and on_text is not None:
            await on_text(self.said)
        self.reached.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def _state(quotas: Quotas) -> tuple[int, int, int]:
    """The budget left, and the usage meter's model calls and tokens of the day."""
    budget = await quotas.budget_state("acme")
    assert budget is not None
    usage = await quotas.usage.read("acme", today())
    return budget["remaining"], usage["modelCalls"], usage["totalTokens"]


async def _cancelled(model: NeverAnswers, quotas: Quotas, *, streamed: bool) -> None:
    """Start a metered call on ``model``, cancel it once the model has it."""
    metered = MeteredModel(model, quotas, prompt_tokens=lambda request: 300)

    async def sink(text: str) -> None:
        return None

    async def call() -> LlmResponse:
        PAYER.set(Payer("acme", "key-1", "ann"))
        return await metered.complete(REQUEST, sink if streamed else None)

    async with asyncio.timeout(30):
        running = asyncio.create_task(call())
        await model.reached.wait()
        assert (await _state(quotas))[0] == 1000 - 300  # held while it runs
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "unstreamed"])
async def test_a_call_cancelled_before_any_text_gives_its_hold_back(streamed: bool) -> None:
    quotas = Quotas(token_budget="1000/hour")
    await _cancelled(NeverAnswers(), quotas, streamed=streamed)
    assert await _state(quotas) == (1000, 0, 0)


async def test_a_call_cancelled_after_its_first_text_is_still_charged() -> None:
    quotas = Quotas(token_budget="1000/hour")
    await _cancelled(NeverAnswers(said="twelve bytes"), quotas, streamed=True)
    # The prompt's estimate, and the 12 bytes streamed at one token per 3 bytes.
    assert await _state(quotas) == (1000 - 304, 1, 304)


async def test_a_match_arbiter_that_timed_out_charges_nothing() -> None:
    quotas = Quotas(token_budget="1000/hour")
    model = NeverAnswers()
    metered = MeteredModel(model, quotas, prompt_tokens=lambda request: 300)
    # The arbiter's own time limit is what ends the call: the model never answers.
    arbiter = MatchArbiter(LlmArbiterModel(metered), "always", timeout=0.05)
    PAYER.set(Payer("acme", "key-1", "ann"))
    answer = await asyncio.wait_for(
        arbiter.choose("make a report", [make_manifest("a"), make_manifest("b")], 1), 30
    )
    assert (answer.workflow_id, answer.valid) == (None, False)  # the ranker's choice stands
    assert model.reached.is_set()
    assert await _state(quotas) == (1000, 0, 0)
