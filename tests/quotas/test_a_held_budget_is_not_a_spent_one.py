"""A budget that calls in progress hold is refused as held, with seconds to wait, not the window.

Each model call holds its prompt's estimate on the org's budget from its start. A call
refused because other calls' holds filled what was left read "Token budget reached ... renews
in 3598 s" with ``Retry-After: 3598``, while almost none of the budget was used and the holds
ended within seconds: a client that obeyed stopped for an hour. It now says the budget is
held, by how many calls, and to retry in a few seconds.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest

from aptix.api import create_app
from aptix.llm.types import LlmRequest, LlmResponse, TextSink, Usage
from aptix.quotas import PAYER, MeteredModel, Payer, Quotas, TokenBudgetError
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.testing import reply
from tests.quotas.conftest import REDIS_HOST, REDIS_PORT

REQUEST = LlmRequest(messages=({"role": "user", "content": "hi"},))


class FirstCallWaits:
    """Holds its first call until ``ended`` is set; the other calls answer at once."""

    def __init__(self) -> None:
        self.calls = 0
        self.reached = asyncio.Event()
        self.ended = asyncio.Event()

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        self.calls += 1
        if self.calls == 1:
            self.reached.set()
            await self.ended.wait()
        return reply("done", usage=Usage(prompt_tokens=10, completion_tokens=5))


def _processes(store: str, prefix: str) -> list[Quotas]:
    """Two processes' limits on one Redis, or one process counting in memory."""
    if store == "memory":
        return [Quotas(token_budget="100/hour")]
    url = f"redis://{REDIS_HOST}:{REDIS_PORT}/0"
    return [Quotas(token_budget="100/hour", redis_url=url, key_prefix=prefix) for _ in "ab"]


async def _complete(model: MeteredModel) -> LlmResponse:
    PAYER.set(Payer("acme", "key-1", "ann"))
    return await model.complete(REQUEST)


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_a_call_refused_for_other_calls_holds_is_told_to_retry_in_seconds(
    store: str, prefix: str
) -> None:
    processes = _processes(store, prefix)
    inner = FirstCallWaits()
    # Each call's estimate (150) is above the whole budget (100).
    first, other = (
        MeteredModel(inner, processes[0], prompt_tokens=lambda request: 150),
        MeteredModel(inner, processes[-1], prompt_tokens=lambda request: 150),
    )
    try:
        async with asyncio.timeout(30):
            # Alone, a call is never refused for its own estimate while budget is left.
            running = asyncio.create_task(_complete(first))
            await inner.reached.wait()

            with pytest.raises(TokenBudgetError) as refused:
                await _complete(other)
            assert str(refused.value) == (
                "Token budget held by 1 model call in progress: this organization has used 0 "
                "of its 100/hour model tokens, and the calls running hold the rest until they "
                "end; retry in 5 s."
            )
            before_a_turn = await processes[-1].tokens("acme")
            assert before_a_turn is not None
            assert before_a_turn.status == 429
            assert before_a_turn.code == "token_budget_exhausted"
            assert before_a_turn.message.startswith("Token budget held by 1 model call")
            headers = before_a_turn.headers()
            assert headers["Retry-After"] == "5"  # not the window's 3600
            assert headers["RateLimit"] == '"tokens";r=0;t=5'
            assert headers["RateLimit-Policy"] == '"tokens";q=100;w=3600'

            inner.ended.set()
            assert (await running).text == "done"  # settled to 15 of 100
            assert await processes[-1].tokens("acme") is None
            assert (await _complete(other)).text == "done"
    finally:
        inner.ended.set()
        for quotas in processes:
            await quotas.aclose()


@pytest.mark.parametrize("store", ["memory", "redis"])
async def test_a_spent_budget_still_reads_reached_until_the_window_renews(
    store: str, prefix: str
) -> None:
    processes = _processes(store, prefix)
    inner = FirstCallWaits()
    model = MeteredModel(inner, processes[-1], prompt_tokens=lambda request: 30)
    try:
        async with asyncio.timeout(30):
            await processes[0].spend("acme", "key-1", "ann", Usage(90, 10))
            running = asyncio.create_task(_complete(model))  # held on a spent budget: refused
            with pytest.raises(TokenBudgetError, match=r"^Token budget reached: .* renews in"):
                await running
            refusal = await processes[-1].tokens("acme")
            assert refusal is not None
            assert refusal.message.startswith("Token budget reached: this organization may use")
            assert refusal.reset_seconds > 3000  # the window's renewal, an hour away
    finally:
        for quotas in processes:
            await quotas.aclose()


async def test_a_turn_refused_while_another_turn_holds_the_budget_gets_a_short_retry_after(
    tmp_path: Path,
) -> None:
    # Smaller than one request's estimate (its system message and tool schemas).
    settings = AptixSettings(
        data_dir=tmp_path,
        load_plugins=False,
        semantic_matching=False,
        api_keys="k-ann=acme:ann,k-amy=acme:amy",
        token_budget="1000/hour",
    )
    model = FirstCallWaits()
    async with open_runtime(settings) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime=runtime, model=model))
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api,
            asyncio.timeout(30),
        ):
            ann = {"Authorization": "Bearer k-ann"}
            amy = {"Authorization": "Bearer k-amy"}
            running = asyncio.create_task(
                api.post("/v1/agent/execute", json={"instruction": "long"}, headers=ann)
            )
            await model.reached.wait()

            refused = await api.post("/v1/agent/execute", json={"instruction": "hi"}, headers=amy)
            assert refused.status_code == 429, refused.text
            error = refused.json()["error"]
            assert error["code"] == "token_budget_exhausted"
            assert re.fullmatch(
                r"Token budget held by 1 model call in progress: this organization has used 0 "
                r"of its 1000/hour model tokens, .* retry in 5 s\.",
                error["message"],
            ), error["message"]
            assert refused.headers["Retry-After"] == "5"

            model.ended.set()
            assert (await running).json()["kind"] == "ok"
            again = await api.post("/v1/agent/execute", json={"instruction": "hi"}, headers=amy)
            assert again.json()["kind"] == "ok", again.text
