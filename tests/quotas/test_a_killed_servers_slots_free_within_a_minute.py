"""A turn slot lives as long as its process: renewed while it runs, freed soon after a kill.

A slot had a fixed deadline of 15 minutes from its take, so an org at its limit whose server
was killed (``kill -9``) was refused for up to 15 minutes, each 429 saying "retry in 1 s",
and a turn running longer than 15 minutes lost its slot while it ran. A slot's deadline is
now a minute, pushed back while its process lives. The lifetime is shortened to 2 s here,
in the test and in the process it kills.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable

import pytest

from aptix.quotas import slots
from aptix.quotas.limiter import Quotas
from tests.api.tcp_proxy import TcpProxy

REDIS = "redis://127.0.0.1:6379/0"
SLOT_SECONDS = 2

#: A server holding one of its org's two slots, until it is killed.
HOLDER = """
import asyncio, sys
from aptix.quotas import slots
from aptix.quotas.limiter import Quotas
from tests.api.tcp_proxy import TcpProxy

slots.SLOT_SECONDS = {seconds}

async def main():
    quotas = Quotas(max_concurrent_turns=2, redis_url={url!r}, key_prefix={prefix!r})
    assert await quotas.enter_turn("acme") is None
    print("taken", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


@pytest.fixture
def prefix(prefix: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared fixture's key prefix of this test's own, with slots of 2 s."""
    monkeypatch.setattr(slots, "SLOT_SECONDS", SLOT_SECONDS)
    return prefix


async def test_a_slot_counts_while_its_server_lives_and_frees_once_killed(prefix: str) -> None:
    code = HOLDER.format(seconds=SLOT_SECONDS, url=REDIS, prefix=prefix)
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
    )
    alive = Quotas(max_concurrent_turns=2, redis_url=REDIS, key_prefix=prefix)
    try:
        assert holder.stdout is not None
        assert await asyncio.wait_for(holder.stdout.readline(), 60) == b"taken\n"
        assert await alive.enter_turn("acme") is None
        # Three lifetimes on, both turns still run: the org stays at its limit.
        for _ in range(3):
            await asyncio.sleep(SLOT_SECONDS)
            refused = await alive.enter_turn("acme")
            assert refused is not None
            assert refused.code == "too_many_turns"
        os.kill(holder.pid, signal.SIGKILL)
        await holder.wait()
        await asyncio.sleep(SLOT_SECONDS + 0.5)
        # The killed server's slot is gone; the living turn's is not.
        assert await alive.enter_turn("acme") is None
        assert await alive.enter_turn("acme") is not None
    finally:
        if holder.returncode is None:
            holder.kill()
            await holder.wait()
        await alive.aclose()


async def test_a_slot_in_memory_is_renewed_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slots, "SLOT_SECONDS", SLOT_SECONDS)
    quotas = Quotas(max_concurrent_turns=1)
    try:
        assert await quotas.enter_turn("acme") is None
        await asyncio.sleep(SLOT_SECONDS * 2)
        assert await quotas.enter_turn("acme") is not None  # the turn still runs
        await quotas.leave_turn("acme")
        assert await quotas.enter_turn("acme") is None
    finally:
        await quotas.aclose()


async def test_a_renewal_that_redis_answers_again_shows_it_up(
    prefix: str, redis_proxy: TcpProxy
) -> None:
    # Review s4 F3: a failed renewal showed Redis down, and a server doing nothing else
    # never showed it up again (/healthz, aptix_limits_redis_up).
    quotas = Quotas(
        max_concurrent_turns=2,
        redis_url=f"redis://127.0.0.1:{redis_proxy.port}/0",
        key_prefix=prefix,
    )
    try:
        assert await quotas.enter_turn("acme") is None
        redis_proxy.stop()
        await _until(lambda: quotas.redis_up is False)
        redis_proxy.start()
        await _until(lambda: quotas.redis_up is True)
    finally:
        await quotas.aclose()


async def test_a_turn_entering_as_the_last_one_leaves_is_renewed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The renewal task ends with the last slot; a turn entering at once has one of its own
    # (review s4 noted one might find the cancelled task not ended yet and start none).
    monkeypatch.setattr(slots, "SLOT_SECONDS", SLOT_SECONDS)
    quotas = Quotas(max_concurrent_turns=1)
    try:
        assert await quotas.enter_turn("acme") is None
        await quotas.leave_turn("acme")
        assert await quotas.enter_turn("acme") is None  # at once: the old task not ended
        await asyncio.sleep(SLOT_SECONDS * 2)
        assert await quotas.enter_turn("acme") is not None  # its slot is still counted
    finally:
        await quotas.aclose()


async def _until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition``, checked every 0.1 s for up to ten slot lifetimes."""
    for _ in range(SLOT_SECONDS * 100):
        if condition():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the condition never held")


async def test_a_renewal_whose_redis_call_swallows_the_cancel_still_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Round 72's CI hung in aclose(): the Redis client swallowed the cancel that came during
    # a renewal's call, so the task ran on and aclose() waited for it for ever.
    monkeypatch.setattr(slots, "SLOT_SECONDS", SLOT_SECONDS)
    quotas = Quotas(max_concurrent_turns=1)
    in_call = asyncio.Event()

    async def renew_swallowing_the_cancel(org: str, taken: list[str]) -> None:
        in_call.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.2)

    monkeypatch.setattr(quotas._slots, "renew", renew_swallowing_the_cancel)
    assert await quotas.enter_turn("acme") is None  # held by a turn that never ends
    [renewing] = [t for t in asyncio.all_tasks() if t.get_name() == "aptix-turn-slots"]
    await asyncio.wait_for(in_call.wait(), SLOT_SECONDS * 5)
    # Not wait_for: its cancel at the timeout would end the task a second time.
    closing = asyncio.ensure_future(quotas.aclose())
    await asyncio.wait({closing, renewing}, timeout=3)
    assert closing.done()
    assert renewing.done()
