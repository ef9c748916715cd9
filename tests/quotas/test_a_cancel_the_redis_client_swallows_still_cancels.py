"""A turn or model call cancelled as its Redis take answers does not start, and gives back.

Under Python 3.11 the Redis client awaits through ``asyncio.wait_for``, which drops a cancel
that comes as the call it waits for ends (CPython gh-86296): about half the cancels of a
command in flight, measured on this client. The caller then ran on as if never cancelled:
a turn whose client hung up as it began took its slot and ran, a model call cancelled as
its hold was taken went to the model. The takes here answer as such a call does: the slot
or hold taken, the cancel that came meanwhile dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis

from aptix.quotas.holds import Hold
from aptix.quotas.limiter import Quotas


def swallowing(take: Callable[..., Awaitable[Any]], reached: asyncio.Event) -> Any:
    """``take``, answering as wait_for does when a cancel comes as its call ends."""

    async def answered(*args: Any) -> Any:
        taken = await take(*args)
        reached.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.5)
        return taken

    return answered


async def test_a_turn_cancelled_as_its_slot_is_taken_does_not_start() -> None:
    quotas = Quotas(max_concurrent_turns=1)
    reached = asyncio.Event()
    take = quotas._slots.take
    quotas._slots.take = swallowing(take, reached)  # type: ignore[method-assign]
    entering = asyncio.ensure_future(quotas.enter_turn("acme"))
    await reached.wait()
    entering.cancel()
    with pytest.raises(asyncio.CancelledError):
        await entering
    quotas._slots.take = take  # type: ignore[method-assign]
    # The slot it took was given back: the org's one turn may start, and only one.
    assert await quotas.enter_turn("acme") is None
    refused = await quotas.enter_turn("acme")
    assert refused is not None
    assert refused.code == "too_many_turns"
    await quotas.aclose()


async def test_a_model_call_cancelled_as_its_hold_is_taken_does_not_start() -> None:
    quotas = Quotas(token_budget="100/hour")
    reached = asyncio.Event()
    take = quotas._holds.take
    quotas._holds.take = swallowing(take, reached)  # type: ignore[method-assign]
    reserving = asyncio.ensure_future(quotas.reserve("acme", 100))
    await reached.wait()
    reserving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reserving
    quotas._holds.take = take  # type: ignore[method-assign]
    # The hold was given back: the whole budget is there for the next call.
    held = await quotas.reserve("acme", 100)
    assert isinstance(held, Hold)
    assert held.tokens == 100
    await quotas.aclose()


async def test_on_the_real_redis_every_cancel_of_a_take_in_flight_holds(prefix: str) -> None:
    # Cancels at random points of the take: each one cancel() accepted ends the caller, and
    # the slots on Redis are those of the calls that returned (none left by a cancelled one).
    quotas = Quotas(
        max_concurrent_turns=10_000, redis_url="redis://127.0.0.1:6379/0", key_prefix=prefix
    )
    try:
        rng = random.Random(73)
        entered = cancelled = 0
        for _ in range(300):
            entering = asyncio.ensure_future(quotas.enter_turn("acme"))
            await asyncio.sleep(rng.random() * 0.0005)
            if entering.cancel():
                cancelled += 1
                with pytest.raises(asyncio.CancelledError):
                    await entering
            else:
                assert await entering is None
                entered += 1
        assert cancelled > 30  # the cancels came while the takes were in flight
        held = redis.Redis.from_url("redis://127.0.0.1:6379/0").zcard(f"{prefix}:turns:acme")
        assert held == entered
    finally:
        await quotas.aclose()
