"""Bulkheads: sync tools run in a bounded thread pool per org, built-in work in its own.

A plain-function tool that blocks holds a thread until it returns, even after its time limit
(Python cannot stop a thread). On a shared pool one org's blocked calls would starve every
other org and the server's own work (workflow matching), so:

- each org's sync tools run in that org's own pool of ``APTIX_TOOL_THREADS`` threads;
- a call abandoned at its time limit is counted until its thread really returns; while an
  org has as many abandoned calls as threads, its new sync calls fail at once
  (:class:`BulkheadFullError`) instead of queueing behind threads that may never come back;
- built-in work (:func:`run_builtin`) has a pool of its own that no tool can reach. What runs
  there never waits on other work (a workflow match waiting for its org's index rebuild waits
  off the pool), so one org's matches cannot take the threads every org's need.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import re
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from aptix.errors import AptixError
from aptix.results import InvokeResult

__all__ = [
    "BULKHEADS",
    "RETRY_AFTER_SECONDS",
    "BulkheadFullError",
    "Bulkheads",
    "http_refusal",
    "run_builtin",
]

P = ParamSpec("P")
T = TypeVar("T")

#: What a refused caller is told to wait before retrying (503 ``Retry-After``).
RETRY_AFTER_SECONDS = 5

#: The executor's wording of a time limit: stopped (``_timed_out``) or left running in its
#: thread (``_abandoned``).
_TIMED_OUT = re.compile(
    r"The tool '[^']*' (timed out after \S+ seconds\."
    r"|did not finish within \S+ seconds and could not be stopped: .*)"
)
_FULL = "sync tool calls of this organization are still running past their time limit"
_FULL_MESSAGE = re.compile(r"\d+ " + _FULL + r", .*")


class BulkheadFullError(AptixError):
    """An org's sync tool threads are all held by calls abandoned at their time limit."""

    def __init__(self, held: int) -> None:
        super().__init__(
            f"{held} {_FULL}, which is as many as it may have; the call was not started. "
            f"Retry when they end (in about {RETRY_AFTER_SECONDS} s)."
        )


class Bulkheads:
    """One bounded thread pool per org, and a count of the calls each has abandoned."""

    def __init__(self, threads_per_org: int = 8) -> None:
        self._threads = threads_per_org
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._abandoned: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def threads_per_org(self) -> int:
        """How many threads each org's pool has (and how many calls it may abandon)."""
        return self._threads

    def configure(self, threads_per_org: int) -> None:
        """Size the pools made from now on; existing pools finish their work and go."""
        with self._lock:
            if threads_per_org == self._threads:
                return
            self._threads = threads_per_org
            pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.shutdown(wait=False)

    def abandoned(self, org: str) -> int:
        """Calls of ``org`` left running after their time limit that have not ended yet."""
        return self._abandoned[org]

    async def run(self, org: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` in ``org``'s pool; :class:`BulkheadFullError` when the org is held up."""
        with self._lock:
            held = self._abandoned[org]
            if held >= self._threads:
                raise BulkheadFullError(held)
            pool = self._pools.get(org)
            if pool is None:
                pool = self._pools[org] = ThreadPoolExecutor(
                    self._threads, thread_name_prefix="aptix-tools"
                )
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        future = pool.submit(call)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            # Cancelling a queued call removes it; a running one goes on without us.
            if not future.cancel() and not future.done():
                self._abandon(org, future)
            raise

    async def run_tool(self, org: str, fn: Callable[..., Any], /, *args: Any) -> Any:
        """:meth:`run` for a tool's plain-function ``execute``: a refusal is a failed result."""
        try:
            return await self.run(org, fn, *args)
        except BulkheadFullError as exc:
            return InvokeResult.from_error(str(exc))

    def _abandon(self, org: str, future: Future[Any]) -> None:
        with self._lock:
            self._abandoned[org] += 1

        def ended(_: Future[Any]) -> None:
            with self._lock:
                self._abandoned[org] -= 1
                if self._abandoned[org] <= 0:
                    del self._abandoned[org]

        future.add_done_callback(ended)


#: The process's bulkheads (threads are a process resource); sized by ``open_runtime``.
BULKHEADS = Bulkheads()

_BUILTIN = ThreadPoolExecutor(4, thread_name_prefix="aptix-builtin")


async def run_builtin(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run the server's own blocking work (matching) where no user tool can hold it up."""
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.wrap_future(_BUILTIN.submit(call))


def http_refusal(message: str) -> tuple[int, str, dict[str, str]] | None:
    """Status, code and headers for a call that failed by timing out or being refused here.

    A time limit is 504 ``timeout``; a full bulkhead is 503 ``overloaded`` with
    ``Retry-After``. Any other failure is the tool's own: None.
    """
    if _TIMED_OUT.fullmatch(message):
        return 504, "timeout", {}
    if _FULL_MESSAGE.fullmatch(message):
        return 503, "overloaded", {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return None
