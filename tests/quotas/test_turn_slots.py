"""The concurrent-turn cap holds however long an org stays busy, in memory and on Redis.

Running turns were one counter whose lifetime (meant to free the slots of a process that
died) was set when it went from 0 to 1: an org never idle for that long lost its count while
its turns ran, and let in twice its limit. Each turn now has a slot with a deadline of its
own. The lifetime is shortened to seconds here; the steps are spaced well inside it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from aptix.quotas import slots
from aptix.quotas.limiter import Quotas

REDIS = "redis://127.0.0.1:6379/0"
#: A slot's lifetime here; the steps below are two seconds apart and a second from an end (a
#: living process renews its slots every second: a loaded machine may hold one back).
SLOT_SECONDS = 4


@pytest.fixture
def prefix(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A key prefix of this test's own (its keys are deleted afterwards); slots of 4 s."""
    monkeypatch.setattr(slots, "SLOT_SECONDS", SLOT_SECONDS)
    name = f"aptix-test-{uuid.uuid4().hex}"
    yield name
    client = redis.Redis.from_url(REDIS)
    keys = list(client.scan_iter(f"{name}:*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture(params=["memory", "redis"])
async def quotas(request: pytest.FixtureRequest, prefix: str) -> AsyncIterator[Quotas]:
    """Two turns at once per org, counted in memory or on the real Redis."""
    url = None
    if request.param == "redis":
        redis.Redis.from_url(REDIS).ping()  # the test needs the real Redis: fail, never skip
        url = REDIS
    made = Quotas(max_concurrent_turns=2, redis_url=url, key_prefix=prefix)
    yield made
    await made.aclose()


async def test_an_org_always_busy_keeps_its_count(quotas: Quotas) -> None:
    assert await quotas.enter_turn("acme") is None  # first, at 0 s
    await asyncio.sleep(2.0)
    assert await quotas.enter_turn("acme") is None  # second, at 2 s
    await quotas.leave_turn("acme")  # the first ends; the org was never idle
    await asyncio.sleep(3.0)
    # 5 s: the second's slot (4 s from 2 s, and renewed) is still counted.
    assert await quotas.enter_turn("acme") is None
    refused = await quotas.enter_turn("acme")
    assert refused is not None
    assert refused.code == "too_many_turns"
    assert await quotas.enter_turn("globex") is None  # another org's count is its own

    for _ in range(2):
        await quotas.leave_turn("acme")
    # Every slot given back, none counted below zero: two again, and not three.
    assert [await quotas.enter_turn("acme") for _ in range(2)] == [None, None]
    assert await quotas.enter_turn("acme") is not None


async def test_a_dead_processs_slot_frees_itself_alone(prefix: str) -> None:
    redis.Redis.from_url(REDIS).ping()  # the test needs the real Redis: fail, never skip
    dead, alive = (
        Quotas(max_concurrent_turns=2, redis_url=REDIS, key_prefix=prefix) for _ in range(2)
    )
    try:
        assert await dead.enter_turn("acme") is None  # its process dies with the turn running
        await dead.aclose()  # no give-back, no renewal from now on
        await asyncio.sleep(2.0)
        assert await alive.enter_turn("acme") is None
        assert await alive.enter_turn("acme") is not None  # two running: the dead one counts
        await asyncio.sleep(3.0)
        # The dead turn's slot has ended; the living one's has not.
        assert await alive.enter_turn("acme") is None
        assert await alive.enter_turn("acme") is not None
    finally:
        await dead.aclose()
        await alive.aclose()
