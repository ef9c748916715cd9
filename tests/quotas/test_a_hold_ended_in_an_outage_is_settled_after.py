"""A model call that ends while Redis is out, or in the cool-off after, still settles its hold.

The hold was taken on Redis before the outage; ending the call then skipped Redis, so its
whole estimate stayed counted and listed as a call in progress for 15 minutes: a one-second
blip left the org refused ("held by 1 model call in progress"), in ``open`` mode too. The
call's end is now tried even during the cool-off, and, if Redis does not answer, kept and
made by the process's next call that reaches Redis.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio

from aptix.llm.types import Usage
from aptix.quotas import Quotas
from aptix.quotas import breaker as breaker_module
from aptix.quotas.holds import Hold
from tests.api.tcp_proxy import TcpProxy
from tests.quotas.conftest import REDIS_HOST, REDIS_PORT

BUDGET = "3000/hour"
COUNT = "LIMITER/tokens/acme/3000/1/hour"


async def _spent(quotas: Quotas, hold: Hold) -> None:
    await quotas.spend("acme", "key-1", "ann", Usage(100, 20), held=hold)


async def _released(quotas: Quotas, hold: Hold) -> None:
    await quotas.release("acme", hold)


ENDS = pytest.mark.parametrize(
    ("end", "left"), [(_spent, 120), (_released, 0)], ids=["spent", "released"]
)
MODES = pytest.mark.parametrize("fail_open", [True, False], ids=["open", "closed"])


async def _budget_left(prefix: str, quotas: Quotas) -> tuple[int, int]:
    """The org's count and how many holds are listed, as Redis has them."""
    client = redis.asyncio.Redis(host=REDIS_HOST, port=REDIS_PORT)
    try:
        count = int(await client.get(f"{prefix}:limits:{COUNT}") or 0)
        return count, await client.zcard(f"{prefix}:holds:acme")
    finally:
        await client.aclose()


@MODES
@ENDS
async def test_a_call_ending_in_the_cool_off_after_a_blip_settles_its_hold(
    redis_proxy: TcpProxy,
    prefix: str,
    fail_open: bool,
    end: Callable[[Quotas, Hold], Awaitable[None]],
    left: int,
) -> None:
    url = f"redis://127.0.0.1:{redis_proxy.port}/0"
    quotas = Quotas(token_budget=BUDGET, redis_url=url, key_prefix=prefix, fail_open=fail_open)
    other = Quotas(token_budget=BUDGET, redis_url=url, key_prefix=prefix, fail_open=fail_open)
    try:
        hold = await quotas.reserve("acme", 3684)
        assert isinstance(hold, Hold)
        redis_proxy.stop()
        await quotas.tokens("beta")  # meets the outage: the cool-off starts
        assert quotas.redis_up is False
        redis_proxy.start()  # a blip: back within the cool-off
        await end(quotas, hold)
        assert await _budget_left(prefix, quotas) == (left, 0)
        assert await other.tokens("acme") is None  # another process sees it ended
    finally:
        await quotas.aclose()
        await other.aclose()


@MODES
@ENDS
async def test_a_call_ending_while_redis_is_down_settles_its_hold_once_redis_answers(
    redis_proxy: TcpProxy,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    fail_open: bool,
    end: Callable[[Quotas, Hold], Awaitable[None]],
    left: int,
) -> None:
    monkeypatch.setattr(breaker_module, "COOL_OFF_SECONDS", 0.3)
    url = f"redis://127.0.0.1:{redis_proxy.port}/0"
    quotas = Quotas(token_budget=BUDGET, redis_url=url, key_prefix=prefix, fail_open=fail_open)
    try:
        hold = await quotas.reserve("acme", 3684)
        assert isinstance(hold, Hold)
        redis_proxy.stop()
        await end(quotas, hold)  # Redis does not answer: kept
        assert quotas.redis_up is False
        redis_proxy.start()
        await asyncio.sleep(0.4)  # the cool-off ends
        assert await quotas.tokens("acme") is None  # settled first, then counted
        assert await _budget_left(prefix, quotas) == (left, 0)
    finally:
        await quotas.aclose()


@ENDS
async def test_calls_ending_together_after_a_blip_settle_every_kept_hold_once(
    redis_proxy: TcpProxy,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    end: Callable[[Quotas, Hold], Awaitable[None]],
    left: int,
) -> None:
    # Two calls ending at once both settle the holds kept in the outage. The second one
    # settled the same kept hold as the first, and the first then took off the list one
    # nobody had settled, or failed on an empty list with an IndexError reported as an outage.
    url = f"redis://127.0.0.1:{redis_proxy.port}/0"
    quotas = Quotas(token_budget=BUDGET, redis_url=url, key_prefix=prefix)
    try:
        holds = [await quotas.reserve("acme", 700) for _ in range(4)]
        assert all(isinstance(hold, Hold) for hold in holds)
        first, second, third, fourth = holds
        redis_proxy.stop()
        await end(quotas, first)  # kept
        await end(quotas, second)  # kept too, after the first failed to settle again
        redis_proxy.start()
        # The first kept hold's settling waits until the other call has ended, so the two
        # calls settle the kept holds at the same time, whatever the scheduling.
        settle = quotas._holds.settle
        entered, go_on = asyncio.Event(), asyncio.Event()

        async def held_back(org: str, key: str, hold: Hold, change: int) -> None:
            if not entered.is_set():
                entered.set()
                await go_on.wait()
            await settle(org, key, hold, change)

        monkeypatch.setattr(quotas._holds, "settle", held_back)
        ending = asyncio.create_task(end(quotas, third))
        await entered.wait()
        await end(quotas, fourth)
        go_on.set()
        await ending
        assert quotas.redis_up is True  # no bookkeeping error taken for an outage
        assert await _budget_left(prefix, quotas) == (4 * left, 0)
    finally:
        await quotas.aclose()
