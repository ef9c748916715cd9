"""Stepping a tool's coroutine by hand, and the task plumbing of the executor's time limits.

The executor runs a tool up to its first suspension in the caller's task (most tools finish
there) and continues it with :class:`Resumed`, which hands a tool that swallows its time
limit's cancellation to a task of its own (:data:`ABANDONED`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any

__all__ = [
    "ABANDONED",
    "STOP_GRACE",
    "Raised",
    "Resumed",
    "cancel_requested",
    "contained",
    "forget",
]

#: What a continuation returns when its tool ignored the time limit and was left running.
ABANDONED = object()

#: How long a coroutine cancelled at its time limit gets to stop before it is abandoned.
STOP_GRACE = 0.05


class Raised:
    """A ``BaseException`` a tool raised, carried out of its task as a value."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def contained(work: Awaitable[Any]) -> Any:
    """Await ``work``, returning any exception but a cancellation as a :class:`Raised`.

    Whatever a tool raises (``SystemExit``, a library's own ``BaseException``) is the tool's
    failure, not the server's; asyncio would re-raise some of them from the event loop.
    """
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        return Raised(exc)


def cancel_requested() -> bool:
    """Whether someone asked to cancel the running task (not a tool raising it itself)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class Resumed:
    """Awaitable that continues a coroutine already advanced to its first suspension point."""

    __slots__ = ("_coro", "_pending", "abandon", "limit")

    def __init__(self, coro: Coroutine[Any, Any, Any], pending: Any) -> None:
        self._coro = coro
        self._pending = pending
        self.limit: asyncio.Timeout | None = None
        self.abandon: Callable[[asyncio.Future[Any]], None] | None = None

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, to_yield = self._coro, self._pending
        while True:
            try:
                sent = yield to_yield
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation and timeouts go to the tool first
                try:
                    to_yield = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
                if self.limit is not None and self.abandon and self.limit.expired():
                    # It swallowed the time limit: let it run on elsewhere, report a timeout.
                    self.abandon(asyncio.ensure_future(Resumed(coro, to_yield)))
                    return ABANDONED
            else:
                try:
                    to_yield = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


def forget(strays: set[asyncio.Future[Any]]) -> Callable[[asyncio.Future[Any]], None]:
    """A done-callback that drops an abandoned task from ``strays`` and reads its error."""

    def done(task: asyncio.Future[Any]) -> None:
        strays.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: an abandoned tool's late failure is not an error here

    return done
