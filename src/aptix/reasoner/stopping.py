"""The turns running in this process, so that any caller on the runtime can stop one."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = [
    "GRACEFUL_SECONDS",
    "STOP_WAIT_SECONDS",
    "TurnTasks",
    "process_stopping",
    "stop_process",
]

#: How long a stopping server lets running requests finish before it cancels them.
GRACEFUL_SECONDS = 30

#: How long :meth:`TurnTasks.stop` waits for a cancelled turn to put its ending on record.
#: A turn stops at its next await, but a tool that swallows the cancellation (or a database
#: that does not answer the ending's save) can hold it: the caller must not hang with it.
STOP_WAIT_SECONDS = 5.0


_PROCESS = {"stopping": False}


def stop_process() -> None:
    """Note that this process is shutting down: turns cancelled from now on were cut short."""
    _PROCESS["stopping"] = True


def process_stopping() -> bool:
    """Whether :func:`stop_process` was called (by the server, past its graceful drain)."""
    return _PROCESS["stopping"]


class TurnTasks:
    """The task running each turn of this process, by turn id.

    One per runtime, shared by every reasoner made on it: a turn started by one reasoner (a
    request's copy, an embedding program's own) is stopped by a cancel arriving on another,
    such as the HTTP app's. A registry per reasoner made such a turn look remote: the cancel
    answered at once with its calls "unknown" while the turn ran its slow call to the end.

    A turn runs in two tasks here for a while when this process took it over from itself (a
    resume retried here after the lease of its run here ran out): the newer run is the
    turn's, and the older one, ending, removes only itself.
    """

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        # By task, not by turn id: an older run of the same turn ending must not clear it.
        self._stopping: set[asyncio.Task[Any]] = set()

    def add(self, turn_id: str, task: asyncio.Task[Any]) -> None:
        """``task`` runs ``turn_id`` from now on (in place of a run it took the turn from)."""
        self._tasks[turn_id] = task

    def remove(self, turn_id: str, task: asyncio.Task[Any]) -> None:
        """``task`` no longer runs ``turn_id`` here; a newer run of it stays registered."""
        if self._tasks.get(turn_id) is task:
            del self._tasks[turn_id]
        self._stopping.discard(task)

    def stopping(self, task: asyncio.Task[Any]) -> bool:
        """Whether ``task`` was cancelled through :meth:`cancel` (not by its caller)."""
        return task in self._stopping

    def cancel(self, turn_id: str) -> bool:
        """Cancel the task running ``turn_id`` here; False when none does."""
        task = self._tasks.get(turn_id)
        if task is None or task.done():
            return False
        if task in self._stopping:
            # Already stopping (its heartbeat saw the cancel a request to another process
            # recorded, say): a second cancel would cut short the ending it is writing.
            return True
        self._stopping.add(task)
        task.cancel()
        return True

    async def stop(self, turn_id: str) -> bool:
        """Cancel ``turn_id`` if it runs here and wait for its ending (5 s at the most)."""
        task = self._tasks.get(turn_id)
        if task is None or not self.cancel(turn_id):
            return False
        await asyncio.wait((task,), timeout=STOP_WAIT_SECONDS)
        return True
