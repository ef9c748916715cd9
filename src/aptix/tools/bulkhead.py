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
  off the pool), so one org's matches cannot take the threads every org's need;
- tool threads do not hold up the process's exit: a command that has its answer ends even
  while a thread it abandoned never returns.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import queue
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

#: How often a refused caller may ask again (503 ``Retry-After``): a polling interval, not a
#: promise. A held thread is free only when its tool returns, which may be never.
RETRY_AFTER_SECONDS = 30

_FULL = "sync tool calls of this organization are still running past their time limit"
_FULL_MESSAGE = re.compile(r"\d+ " + _FULL + r", .*")


class BulkheadFullError(AptixError):
    """An org's sync tool threads are all held by calls abandoned at their time limit."""

    def __init__(self, held: int) -> None:
        super().__init__(
            f"{held} {_FULL}, which is as many as it may have; the call was not started. "
            "Each holds its thread until its tool returns, which may take any time: retry "
            "later."
        )


class _DaemonPool:
    """Up to ``size`` daemon threads (``ThreadPoolExecutor`` waits for its threads at exit)."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads = 0
        self._idle = 0  # threads that finished a job and wait for the next, not yet claimed
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Queue ``fn``; a queued call that is cancelled never runs."""
        future: Future[T] = Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn()
            except BaseException as exc:  # the caller reads it from the future
                future.set_exception(exc)
            else:
                future.set_result(result)

        with self._lock:
            self._jobs.put(job)
            if self._idle:
                self._idle -= 1
            elif self._threads < self._size:
                self._threads += 1
                name = f"{self._name}_{self._threads}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
        return future

    def shutdown(self) -> None:
        """Let each thread end once the jobs queued before this call are done."""
        with self._lock:
            for _ in range(self._threads):
                self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()
            del job  # its future and result are not kept alive while the thread waits
            with self._lock:
                self._idle += 1


class Bulkheads:
    """One bounded thread pool per org, and a count of the calls each has abandoned."""

    def __init__(self, threads_per_org: int = 8) -> None:
        self._threads = threads_per_org
        self._pools: dict[str, _DaemonPool] = {}
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
            pool.shutdown()

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
                pool = self._pools[org] = _DaemonPool(self._threads, "aptix-tools")
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


def http_refusal(outcome: InvokeResult[Any]) -> tuple[int, str, dict[str, str]] | None:
    """Status, code and headers for a call that failed by timing out or being refused here.

    A call its time limit stopped or left running (whatever the wording) is 504 ``timeout``;
    a full bulkhead is 503 ``overloaded`` with ``Retry-After``. Any other failure is the
    tool's own: None.
    """
    if any(e.outcome in ("timed_out", "abandoned") for e in outcome.errors):
        return 504, "timeout", {}
    if _FULL_MESSAGE.fullmatch(outcome.error_message or ""):
        return 503, "overloaded", {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return None
