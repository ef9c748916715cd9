"""A Redis that stops answering costs one timeout per cool-off, not one per limit checked.

Redis frozen (as by SIGSTOP) accepts and never answers: every call waited out its 2 s
socket timeout, six of them per turn. Once a call has failed, the limits do without Redis
for ``COOL_OFF_SECONDS``, then one call tries it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

import pytest

from aptix.llm.types import Usage
from aptix.quotas import breaker
from aptix.quotas.breaker import RedisBreaker
from aptix.quotas.limiter import Quotas

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
USAGE = Usage(prompt_tokens=10, completion_tokens=5)


class FreezableRedis:
    """Forwards to the real Redis; ``frozen`` holds every byte, as a stopped Redis would."""

    def __init__(self) -> None:
        self.running = asyncio.Event()
        self.running.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.url = ""

    async def __aenter__(self) -> FreezableRedis:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"redis://127.0.0.1:{port}/0"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        await self._server.wait_closed()

    def freeze(self) -> None:
        self.running.clear()

    def thaw(self) -> None:
        self.running.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(REDIS_HOST, REDIS_PORT)
        self._writers.update((writer, up_writer))

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65_536):
                    await self.running.wait()
                    sink.write(data)
                    await sink.drain()

        for task in (pipe(reader, up_writer), pipe(up_reader, writer)):
            made = asyncio.ensure_future(task)
            self._tasks.add(made)


@pytest.fixture
async def frozen_redis() -> AsyncIterator[FreezableRedis]:
    async with FreezableRedis() as proxy:
        yield proxy


def _quotas(url: str, prefix: str, *, fail_open: bool) -> Quotas:
    return Quotas(
        rate_limit="1000/minute",
        max_concurrent_turns=4,
        token_budget="1000000/day",
        redis_url=url,
        key_prefix=prefix,
        fail_open=fail_open,
    )


async def test_open_limits_skip_a_hanging_redis_after_its_first_timeout(
    frozen_redis: FreezableRedis,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(breaker, "COOL_OFF_SECONDS", 3.0)
    quotas = _quotas(frozen_redis.url, prefix, fail_open=True)
    try:
        assert await quotas.request("key-1") is None  # Redis answers
        frozen_redis.freeze()
        started = time.monotonic()
        assert await quotas.request("key-1") is None  # waits out one timeout, then allows
        assert time.monotonic() - started >= 1.5

        async def a_turn() -> None:
            assert await quotas.request("key-1") is None
            assert await quotas.enter_turn("acme") is None
            assert await quotas.tokens("acme") is None
            await quotas.spend("acme", "key-1", "ann", USAGE)
            assert await quotas.tokens("acme") is None
            await quotas.spend("acme", "key-1", "ann", USAGE)

        # What a turn counts, during the cool-off: no timeout at all (it took 12 s).
        await asyncio.wait_for(a_turn(), timeout=1.0)

        frozen_redis.thaw()
        await asyncio.sleep(3.1)
        assert await quotas.request("key-1") is None  # the cool-off is over: Redis again
        counted = await quotas.usage.read("acme", time.strftime("%Y-%m-%d", time.gmtime()))
        assert counted["modelCalls"] == 0  # the calls of the outage went uncounted, at once
    finally:
        frozen_redis.thaw()
        await quotas.aclose()
    messages = [r.getMessage() for r in caplog.records if r.name == "aptix.quotas"]
    assert sum("[Quotas_Redis__Unavailable]" in m for m in messages) == 1, messages
    assert sum("[Quotas_Redis__Recovered]" in m for m in messages) == 1, messages


async def test_closed_limits_refuse_at_once_while_redis_hangs(
    frozen_redis: FreezableRedis, prefix: str
) -> None:
    quotas = _quotas(frozen_redis.url, prefix, fail_open=False)
    try:
        assert await quotas.request("key-1") is None  # Redis answers
        assert await quotas.enter_turn("acme") is None
        frozen_redis.freeze()
        first = await quotas.request("key-1")
        assert first is not None
        assert first.status == 503
        started = time.monotonic()
        for _ in range(3):
            refused = await asyncio.wait_for(quotas.request("key-1"), timeout=0.5)
            assert refused is not None
            assert (refused.status, refused.code) == (503, "limits_unavailable")
            refused = await asyncio.wait_for(quotas.enter_turn("acme"), timeout=0.5)
            assert refused is not None
            assert refused.code == "limits_unavailable"
        assert time.monotonic() - started < 1.0
    finally:
        frozen_redis.thaw()
        await quotas.aclose()


def test_one_caller_tries_redis_again_after_the_cool_off() -> None:
    now = [100.0]
    gate = RedisBreaker(fail_open=True, clock=lambda: now[0])
    assert not gate.skip()
    gate.failed(TimeoutError())
    assert gate.down
    assert gate.skip()
    now[0] += breaker.COOL_OFF_SECONDS
    assert not gate.skip()  # this caller tries Redis
    assert gate.skip()  # the others still do without it meanwhile
    gate.failed(TimeoutError())  # it still hangs: a new cool-off
    now[0] += breaker.COOL_OFF_SECONDS - 0.1
    assert gate.skip()
    now[0] += 0.1
    assert not gate.skip()
    gate.answered()
    assert not gate.down
    assert not gate.skip()


def test_the_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = RedisBreaker(fail_open=False)
    with caplog.at_level(logging.WARNING, logger="aptix.quotas"):
        for _ in range(3):
            gate.failed(TimeoutError())
        gate.answered()
        gate.answered()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "[Quotas_Redis__Unavailable]" in messages[0]
    assert "refusing requests with 503" in messages[0]
    assert "[Quotas_Redis__Recovered]" in messages[1]


@pytest.mark.parametrize("fail_open", [True, False])
async def test_a_turn_slot_asked_of_a_hanging_redis_neither_fails_nor_stays_taken(
    frozen_redis: FreezableRedis, prefix: str, fail_open: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(breaker, "COOL_OFF_SECONDS", 0.5)
    # No token budget: the slot is the turn's first call to Redis, the one that times out.
    quotas = Quotas(
        max_concurrent_turns=4, redis_url=frozen_redis.url, key_prefix=prefix, fail_open=fail_open
    )
    key = f"{prefix}:turns:acme"
    try:
        assert await quotas.enter_turn("acme") is None  # Redis answers
        await quotas.leave_turn("acme")
        frozen_redis.freeze()
        entered = await quotas.enter_turn("acme")  # the first call of the outage times out
        if fail_open:
            assert entered is None
        else:
            assert entered is not None
            assert (entered.status, entered.code) == (503, "limits_unavailable")
        frozen_redis.thaw()
        await asyncio.sleep(0.3)  # the held request reaches Redis now, and takes the slot
        if fail_open:
            await quotas.leave_turn("acme")  # gives back the slot its request may have taken
        else:
            assert await quotas._redis.zcard(key) == 1  # taken for a turn that was refused
            await asyncio.sleep(0.5)  # the cool-off ends: the next turn asks Redis again
            assert await quotas.enter_turn("acme") is None
            assert await quotas._redis.zcard(key) == 1  # its own slot only
            await quotas.leave_turn("acme")
        assert await quotas._redis.zcard(key) == 0
    finally:
        frozen_redis.thaw()
        await quotas.aclose()
