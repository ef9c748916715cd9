"""A model call's hold is settled in the window it was taken in, or not at all.

A call whose window ended while it ran (the window renewed, Redis restarted or was flushed)
gave its unused estimate back from the new window: the tokens other calls had spent there
were taken off, and the budget let through more than its limit. The hold remembers its
window; once that window is gone the call's settlement changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio

from aptix.llm.types import Usage
from aptix.quotas import Quotas
from aptix.quotas.holds import Hold
from tests.quotas.conftest import REDIS_HOST, REDIS_PORT

URL = f"redis://{REDIS_HOST}:{REDIS_PORT}/0"
BUDGET = "20000/minute"
COUNT = "LIMITER/tokens/acme/20000/1/minute"


async def _window_ends(client: redis.asyncio.Redis, prefix: str) -> None:
    """The count's window ends, as at its renewal (its key expires); the other keys stay."""
    await client.delete(f"{prefix}:limits:{COUNT}")


async def _keys_lost(client: redis.asyncio.Redis, prefix: str) -> None:
    """Every key goes, as when Redis restarts without saving or is flushed."""
    await client.delete(*[key async for key in client.scan_iter(f"{prefix}:*")])


async def _settles(quotas: Quotas, hold: Hold, used: int) -> None:
    await quotas.spend("acme", "key-1", "ann", Usage(used, 0), held=hold)


async def _released(quotas: Quotas, hold: Hold, used: int) -> None:
    await quotas.release("acme", hold)


@pytest.mark.parametrize("gone", [_window_ends, _keys_lost], ids=["renewal", "flush"])
@pytest.mark.parametrize(
    ("end", "used"),
    [(_settles, 120), (_settles, 4000), (_released, 0)],
    ids=["used-less", "used-more", "released"],
)
async def test_a_call_whose_window_is_gone_changes_nothing_in_the_new_one(
    prefix: str,
    gone: Callable[[redis.asyncio.Redis, str], Awaitable[None]],
    end: Callable[[Quotas, Hold, int], Awaitable[None]],
    used: int,
) -> None:
    first, second = (Quotas(token_budget=BUDGET, redis_url=URL, key_prefix=prefix) for _ in "ab")
    client = redis.asyncio.Redis(host=REDIS_HOST, port=REDIS_PORT)
    try:
        hold = await first.reserve("acme", 3684)
        assert isinstance(hold, Hold)
        await gone(client, prefix)
        await second.spend("acme", "key-2", "bob", Usage(5000, 0))  # the new window's tokens
        await end(first, hold, used)
        assert int(await client.get(f"{prefix}:limits:{COUNT}") or 0) == 5000
        state = await second.budget_state("acme")
        assert state is not None
        assert state["remaining"] == 15000
    finally:
        await client.aclose()
        await first.aclose()
        await second.aclose()


async def test_a_call_whose_window_renewed_in_memory_changes_nothing_in_the_new_one() -> None:
    quotas = Quotas(token_budget="20000/second")
    hold = await quotas.reserve("acme", 3684)
    assert isinstance(hold, Hold)
    await asyncio.sleep(1.1)  # the one-second window renews
    await quotas.spend("acme", "key-2", "bob", Usage(5000, 0))
    await quotas.spend("acme", "key-1", "ann", Usage(120, 0), held=hold)
    state = await quotas.budget_state("acme")
    assert state is not None
    assert state["remaining"] == 15000


async def test_a_hold_of_an_ended_window_is_not_counted_as_holding_the_new_one(
    prefix: str,
) -> None:
    quotas = Quotas(token_budget=BUDGET, redis_url=URL, key_prefix=prefix)
    client = redis.asyncio.Redis(host=REDIS_HOST, port=REDIS_PORT)
    try:
        assert isinstance(await quotas.reserve("acme", 3684), Hold)
        await _window_ends(client, prefix)
        await quotas.spend("acme", "key-2", "bob", Usage(20000, 0))
        refusal = await quotas.tokens("acme")
        assert refusal is not None
        assert refusal.message.startswith("Token budget reached: this organization may use")
    finally:
        await client.aclose()
        await quotas.aclose()


async def test_a_hold_settles_as_before_while_its_window_lasts(prefix: str) -> None:
    first, second = (Quotas(token_budget=BUDGET, redis_url=URL, key_prefix=prefix) for _ in "ab")
    try:
        hold = await first.reserve("acme", 3684)
        assert isinstance(hold, Hold)
        await second.spend("acme", "key-2", "bob", Usage(5000, 0))
        await first.spend("acme", "key-1", "ann", Usage(120, 0), held=hold)
        state = await second.budget_state("acme")
        assert state is not None
        assert state["remaining"] == 20000 - 5120
    finally:
        await first.aclose()
        await second.aclose()
