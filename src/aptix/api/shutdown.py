"""What a turn's client is told when the server's shutdown cuts the turn short.

A plain request still running past uvicorn's drain is cancelled: it answers 503
``shutting_down`` with ``Retry-After``. sse-starlette closes a stream as soon as the server
starts stopping: the turn gets the same drain, then is cut short while its stream can still
send a last event saying so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from aptix.api.errors import ApiError
from aptix.api.outage import RETRY_AFTER_SECONDS
from aptix.reasoner.stopping import GRACEFUL_SECONDS, STOP_WAIT_SECONDS, process_stopping

__all__ = [
    "SHUTTING_DOWN",
    "STREAM_DRAIN_SECONDS",
    "STREAM_GRACE_SECONDS",
    "answer_shutting_down",
    "cut_short_when_stopping",
]

SHUTTING_DOWN = (
    "The server is shutting down and cut this turn short; its executed calls are recorded. "
    "Send the request again once the server is back: a resume continues the turn, and no call "
    "that may have run is run again."
)

#: How long a streamed turn may still run once the server stops, as a plain request may
#: (uvicorn's drain), less the time to record its ending and send the last event.
STREAM_DRAIN_SECONDS = GRACEFUL_SECONDS - STOP_WAIT_SECONDS - 1
#: When sse-starlette closes a stream of a stopping server: after the drain and the ending, and
#: before uvicorn cancels the request (which would leave no time for a last event).
STREAM_GRACE_SECONDS = GRACEFUL_SECONDS - 1


@contextmanager
def answer_shutting_down(headers: dict[str, str] | None = None) -> Iterator[None]:
    """Turn the cancellation of a stopping server into 503 ``shutting_down`` (with ``headers``)."""
    try:
        yield
    except asyncio.CancelledError:
        if not process_stopping():
            raise
        # uvicorn cancels the requests still running past its drain. The turn is left as a
        # crash leaves it; its client is told so, rather than getting uvicorn's bare 500.
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        raise ApiError(
            503,
            SHUTTING_DOWN,
            "shutting_down",
            headers={**(headers or {}), "Retry-After": str(RETRY_AFTER_SECONDS)},
        ) from None


async def cut_short_when_stopping(stopping: anyio.Event, turn: asyncio.Task[Any]) -> None:
    """Cancel a streamed ``turn`` once ``stopping`` is set and the drain has passed."""
    # sse-starlette learns of the shutdown at once, not past the drain: the turn gets the
    # drain a plain request gets, then is cut short while the stream can still tell so.
    await stopping.wait()
    await asyncio.sleep(STREAM_DRAIN_SECONDS)
    turn.cancel()
