"""A turn cut short at any of its awaits gives back its slot, as a model call its hold.

``Quotas.enter_turn`` took the slot without a give-back for a take whose answer never came:
a turn cancelled while Redis ran the take (a client that hung up as its turn began) left the
slot listed as a running turn for 15 minutes, and an org allowed one turn at a time was
refused ``too_many_turns`` for a turn no one ran. A give-back cut short in ``leave_turn``
(cancelled, or Redis unanswered) lost the slot alike (round 70).

Here each turn is cancelled at its first await point, then its second, and so on until it
ends on its own: before Redis has a command, while Redis has it unanswered, and after the
answer is read but before the caller resumes; while the turn runs; and while its slot is
given back. Whatever the point, Redis lists no running turn afterwards and the org runs
its turn again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.exceptions

from aptix.quotas import Quotas
from aptix.quotas import breaker as breaker_module
from aptix.quotas.slots import TurnSlots
from tests.quotas.conftest import REDIS_HOST, REDIS_PORT, Cuts, answered_late, rest

REDIS_DB = 0
REDIS_URL = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"


async def _running(prefix: str, org: str) -> int:
    """The org's turns Redis lists as running."""
    client = redis.asyncio.Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB)
    try:
        running: int = await client.zcard(f"{prefix}:turns:{org}")
        return running
    finally:
        await client.aclose()


async def _turn(quotas: Quotas, cuts: Cuts, org: str) -> None:
    """One turn between its slot's take and give-back, as the HTTP routes hold it."""

    async def turn() -> None:
        assert await quotas.enter_turn(org) is None
        try:
            await cuts.point("the turn runs")
        finally:
            await quotas.leave_turn(org)

    cuts.call = asyncio.create_task(turn())
    try:
        await asyncio.wait_for(asyncio.shield(cuts.call), 30)
    except asyncio.CancelledError:
        assert cuts.where is not None, "cancelled, but not by the test"
        assert cuts.call.cancelled()
    await rest()


@pytest.mark.parametrize("budget", [None, "100000/hour"], ids=["slot", "slot-and-budget"])
async def test_a_turn_cancelled_at_any_await_gives_back_its_slot(
    prefix: str, cuts: Cuts, budget: str | None
) -> None:
    at = 0
    while True:
        org = f"org{at}"
        quotas = Quotas(
            max_concurrent_turns=1, token_budget=budget, redis_url=REDIS_URL, key_prefix=prefix
        )
        cuts.reset(at)
        try:
            await _turn(quotas, cuts, org)
            cut, points = cuts.where, cuts.reached
            cuts.reset(None)  # the checks' own commands are no points of the turn
            where = f"cut at point {at} ({cut})"
            assert await _running(prefix, org) == 0, where
            # The org's one turn at a time is free: its next turn runs.
            assert await quotas.enter_turn(org) is None, where
            await quotas.leave_turn(org)
            assert await _running(prefix, org) == 0, where
        finally:
            await quotas.aclose()
        if cut is None:  # it ended on its own: every point before has been cut at
            break
        at += 1
    # The cuts did reach Redis's side of the take: in flight, and answered, before the turn
    # runs, and the give-back after it.
    before, after = points[: points.index("the turn runs")], points[points.index("the turn runs") :]
    assert "Redis has the command, its answer unread" in before
    assert "the answer read, the caller not resumed yet" in before
    assert "Redis has the command, its answer unread" in after
    assert at == len(points)


@pytest.mark.parametrize("fail_open", [True, False], ids=["open", "closed"])
async def test_a_slot_whose_answer_timed_out_is_given_back(
    prefix: str, monkeypatch: pytest.MonkeyPatch, fail_open: bool
) -> None:
    """Redis ran the take, but its answer came after the 2 s socket timeout."""
    answered = answered_late(monkeypatch, TurnSlots, "take")
    quotas = Quotas(
        max_concurrent_turns=1, redis_url=REDIS_URL, key_prefix=prefix, fail_open=fail_open
    )
    try:
        entered = await quotas.enter_turn("acme")
        assert (entered is None) is fail_open  # open: the turn runs; closed: 503
        if fail_open:
            await quotas.leave_turn("acme")
        answered()
        assert await quotas.enter_turn("acme") is None  # not refused for a turn that ended
        await quotas.leave_turn("acme")
        assert await _running(prefix, "acme") == 0
    finally:
        await quotas.aclose()


async def test_a_slot_whose_give_back_went_unanswered_is_given_back_by_the_next_turn(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(breaker_module, "COOL_OFF_SECONDS", 0.0)
    give_back = TurnSlots.give_back
    down = False

    async def unless_down(self: TurnSlots, *args: Any, **kwargs: Any) -> Any:
        if down:
            raise redis.exceptions.TimeoutError("Timeout reading from 127.0.0.1:6379")
        await give_back(self, *args, **kwargs)

    monkeypatch.setattr(TurnSlots, "give_back", unless_down)
    quotas = Quotas(max_concurrent_turns=1, redis_url=REDIS_URL, key_prefix=prefix)
    try:
        assert await quotas.enter_turn("acme") is None
        down = True
        await quotas.leave_turn("acme")  # Redis does not answer the give-back
        down = False
        assert await _running(prefix, "acme") == 1
        assert await quotas.enter_turn("acme") is None  # gives back the other first
        await quotas.leave_turn("acme")
        assert await _running(prefix, "acme") == 0
    finally:
        await quotas.aclose()


@pytest.fixture
async def slots(prefix: str) -> AsyncIterator[TurnSlots]:
    """The turn slots of Redis database 7 under ``prefix``."""
    client = redis.asyncio.Redis(host=REDIS_HOST, port=REDIS_PORT, db=REDIS_DB)
    yield TurnSlots(redis=client, prefix=prefix)
    await client.aclose()


async def test_a_slot_given_back_before_its_take_arrives_is_not_taken(
    slots: TurnSlots, prefix: str
) -> None:
    """The give-back of a cut take may reach Redis first, on another connection."""
    await slots.give_back("acme", "late")
    assert await slots.take("acme", "late", 1)  # the take, late: its caller has gone
    assert await _running(prefix, "acme") == 0
    assert await slots.take("acme", "other", 1)  # the others are taken as ever
    assert not await slots.take("acme", "third", 1)
    await slots.give_back("acme", "other")
    assert await _running(prefix, "acme") == 0
