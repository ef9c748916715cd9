"""Fixtures shared by the limits tests, which run against the real Redis."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.asyncio.connection import Connection

from aptix.quotas import breaker as breaker_module
from tests.api.tcp_proxy import TcpProxy

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379


@pytest.fixture
def prefix() -> Iterator[str]:
    """A Redis key prefix of this test's own; its keys are deleted afterwards."""
    client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT)
    client.ping()  # the test needs the real Redis: fail, never skip
    name = f"aptix-test-{uuid.uuid4().hex}"
    yield name
    keys = list(client.scan_iter(f"{name}:*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def redis_proxy() -> Iterator[TcpProxy]:
    """The real Redis behind a forwarder the test can cut."""
    forwarder = TcpProxy(REDIS_HOST, REDIS_PORT)
    forwarder.start()
    try:
        yield forwarder
    finally:
        forwarder.close()


class Cuts:
    """Counts the await points a call reaches; cancels the call at the ``at``-th one."""

    def __init__(self) -> None:
        self.reset(None)

    def reset(self, at: int | None) -> None:
        """Count afresh, cancelling the next call at its ``at``-th point (never if None)."""
        self.at = at
        self.reached: list[str] = []
        self.call: asyncio.Task[Any] | None = None
        self.where: str | None = None

    async def point(self, where: str) -> None:
        """An await point: the call is cancelled here if it is the chosen one."""
        if self.call is None or self.where is not None:
            return
        self.reached.append(where)
        if len(self.reached) - 1 != self.at:
            return
        self.where = where
        self.call.cancel()
        if asyncio.current_task() is self.call:
            await asyncio.sleep(0)  # the cancel comes out of this await, as out of any other
            raise AssertionError("the cancel was not delivered")
        # Elsewhere (a settle under asyncio.shield): the call is cancelled while it waits.


@pytest.fixture
def cuts(monkeypatch: pytest.MonkeyPatch) -> Cuts:
    """Every Redis command of every client is three await points of the call it serves."""
    cuts = Cuts()
    send = Connection.send_packed_command
    read = Connection.read_response

    async def send_packed_command(
        self: Connection, command: Any, check_health: bool = True
    ) -> None:
        await cuts.point("before Redis has the command")
        await send(self, command, check_health)

    async def read_response(self: Connection, *args: Any, **kwargs: Any) -> Any:
        try:
            await cuts.point("Redis has the command, its answer unread")
        except BaseException:
            await self.disconnect(nowait=True)  # as a read cut short does: never read now
            raise
        answer = await read(self, *args, **kwargs)
        await cuts.point("the answer read, the caller not resumed yet")
        return answer

    monkeypatch.setattr(Connection, "send_packed_command", send_packed_command)
    monkeypatch.setattr(Connection, "read_response", read_response)
    return cuts


def answered_late(monkeypatch: pytest.MonkeyPatch, owner: type, method: str) -> Callable[[], None]:
    """``owner.method`` runs in Redis, but its answer is lost to the socket timeout.

    The breaker's cool-off is off, so the next call reaches Redis; returns what puts the
    method back.
    """
    monkeypatch.setattr(breaker_module, "COOL_OFF_SECONDS", 0.0)
    real = getattr(owner, method)

    async def late(self: Any, *args: Any, **kwargs: Any) -> Any:
        await real(self, *args, **kwargs)
        raise redis.exceptions.TimeoutError("Timeout reading from 127.0.0.1:6379")

    monkeypatch.setattr(owner, method, late)
    return lambda: monkeypatch.setattr(owner, method, real)


async def rest() -> None:
    """Wait for what outlives a call or turn: a give-back it started under ``asyncio.shield``."""
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        await asyncio.wait_for(asyncio.gather(*others, return_exceptions=True), 30)
