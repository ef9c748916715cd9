"""Turns whose streaming client went away: cancelled, and awaited by their session's next request.

Closing a stream cancels its turn, but the turn writes its ending (``cancelled``) in its own
task, after the response is gone. A client that closes a stream and at once sends the next
instruction reached the claim first and was answered 409 ``session_busy`` by the turn it had
just abandoned. The next request of the session in this process waits for that ending first.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aptix.reasoner.stopping import STOP_WAIT_SECONDS

__all__ = ["abandon", "settled"]

#: The cancelled turn of each session whose ending is not on record yet, by session id; also
#: keeps its task referenced until it ends. An entry leaves as its task ends.
_ABANDONED: dict[str, asyncio.Task[Any]] = {}


def abandon(session_id: str, task: asyncio.Task[Any]) -> None:
    """Cancel ``task``, the turn of ``session_id`` a streaming client left, until it ends."""
    task.cancel()
    _ABANDONED[session_id] = task

    def forget(done: asyncio.Task[Any]) -> None:
        if _ABANDONED.get(session_id) is done:
            del _ABANDONED[session_id]

    task.add_done_callback(forget)


async def settled(session_id: str) -> None:
    """Wait until the abandoned turn of ``session_id``, if any, has its ending on record.

    Bounded as a cancel request's wait (:data:`STOP_WAIT_SECONDS`): a turn whose ending cannot
    be written (a database that does not answer) leaves the claim to answer 409 as before.
    """
    task = _ABANDONED.get(session_id)
    if task is not None:
        await asyncio.wait((task,), timeout=STOP_WAIT_SECONDS)
