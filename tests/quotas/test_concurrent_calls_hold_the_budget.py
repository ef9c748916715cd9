"""Model calls that start at once see each other's hold on the org's token budget.

The budget was only read before a call and counted after it, so every call that started
while it was not yet spent went through: 20 concurrent turns of 15 tokens spent 300 of a
100-token budget. Each call now holds its prompt's estimate at once, and the hold is settled
to what the call used when it ends.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aptix.errors import LlmError
from aptix.llm.types import LlmRequest, LlmResponse, TextSink, Usage
from aptix.quotas import PAYER, MeteredModel, Payer, Quotas, TokenBudgetError
from aptix.quotas.usage import today
from tests.quotas.conftest import REDIS_HOST, REDIS_PORT

USED = Usage(prompt_tokens=10, completion_tokens=5)


class HeldModel:
    """Answers ``USED`` only once every call has reached it or been turned down."""

    def __init__(self, calls: int) -> None:
        self.calls = 0
        self.waiting = calls
        self.settled = asyncio.Event()

    def arrived(self) -> None:
        """One call is in the model or was refused; the last one releases them all."""
        self.waiting -= 1
        if self.waiting == 0:
            self.settled.set()

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        self.calls += 1
        self.arrived()
        await self.settled.wait()
        return LlmResponse(text="ok", usage=USED)


def _processes(store: str, prefix: str) -> list[Quotas]:
    """Two processes' limits on one Redis, or one process counting in memory."""
    if store == "memory":
        return [Quotas(token_budget="100/minute")]
    url = f"redis://{REDIS_HOST}:{REDIS_PORT}/0"
    return [Quotas(token_budget="100/minute", redis_url=url, key_prefix=prefix) for _ in "ab"]


async def _call(model: MeteredModel, inner: HeldModel) -> bool:
    """One model call on acme's budget; whether it ran."""
    PAYER.set(Payer("acme", "key-1", "ann"))
    try:
        await model.complete(LlmRequest(messages=({"role": "user", "content": "hi"},)))
    except TokenBudgetError:
        inner.arrived()
        return False
    return True


async def _concurrent(processes: list[Quotas], held: int, calls: int) -> list[bool]:
    inner = HeldModel(calls)
    models = [MeteredModel(inner, q, prompt_tokens=lambda request: held) for q in processes]
    async with asyncio.timeout(30):
        return await asyncio.gather(*(_call(models[i % len(models)], inner) for i in range(calls)))


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_concurrent_calls_stop_near_the_budget_instead_of_all_passing(
    store: str, prefix: str
) -> None:
    processes = _processes(store, prefix)
    try:
        ran = await _concurrent(processes, held=15, calls=20)
        # Holds of 15 taken at once: calls start while 0, 15, ... 90 of 100 are held.
        assert sum(ran) == 7
        usage = await processes[0].usage.read("acme", today())
        assert usage["totalTokens"] == 7 * 15  # one call's overshoot at most, not 300
        state = await processes[-1].budget_state("acme")
        assert state is not None
        assert state["remaining"] == 0
    finally:
        for quotas in processes:
            await quotas.aclose()


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_a_hold_larger_than_the_call_is_given_back_when_it_ends(
    store: str, prefix: str
) -> None:
    processes = _processes(store, prefix)
    try:
        ran = await _concurrent(processes, held=40, calls=10)
        assert sum(ran) == 3  # holds of 40 at 0, 40 and 80 of 100
        usage = await processes[0].usage.read("acme", today())
        assert usage["totalTokens"] == 3 * 15
        state = await processes[-1].budget_state("acme")
        assert state is not None
        assert state["remaining"] == 100 - 3 * 15
        again = await _concurrent(processes, held=40, calls=1)
        assert again == [True]
    finally:
        for quotas in processes:
            await quotas.aclose()


async def test_a_call_that_fails_before_answering_gives_its_hold_back() -> None:
    quotas = Quotas(token_budget="100/minute")

    class Unreachable:
        async def complete(self, request: LlmRequest, on_text: Any = None) -> LlmResponse:
            raise LlmError("The model endpoint cannot be reached.")

    model = MeteredModel(Unreachable(), quotas, prompt_tokens=lambda request: 60)
    paying = PAYER.set(Payer("acme", "key-1", "ann"))
    try:
        for _ in range(3):  # each would have kept 60 of 100 held: the third was refused
            with pytest.raises(LlmError, match="cannot be reached"):
                await model.complete(LlmRequest(messages=({"role": "user", "content": "hi"},)))
    finally:
        PAYER.reset(paying)
    state = await quotas.budget_state("acme")
    assert state is not None
    assert state["remaining"] == 100
    assert (await quotas.usage.read("acme", today()))["modelCalls"] == 0
