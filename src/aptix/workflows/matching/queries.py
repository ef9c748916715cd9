"""Message embeddings for the semantic matcher: remembered, and encoded ahead on request.

Matching a message reads its embedding several times (ranking, evidence, the request model,
the reason given); it is encoded once and remembered. :meth:`QueryEmbeddings.prefetch`
starts the encoding on a worker thread: the model runs outside the GIL, so the lexical
evidence gathered meanwhile costs no extra latency.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

__all__ = ["QueryEmbeddings"]

#: Messages whose embeddings are remembered.
QUERY_CACHE_SIZE = 512
#: Messages being encoded ahead and not yet collected.
PENDING_QUERIES = 8
#: Threads encoding messages ahead, shared by every matcher of the process.
ENCODER_THREADS = 2
#: How long :meth:`QueryEmbeddings.prefetch` waits for a worker to start encoding.
START_WAIT_S = 0.002

T = TypeVar("T")

_ENCODER: ThreadPoolExecutor | None = None
_ENCODER_LOCK = threading.Lock()


def _encoder() -> ThreadPoolExecutor:
    """The threads that encode messages ahead (started on first use)."""
    global _ENCODER
    with _ENCODER_LOCK:
        if _ENCODER is None:
            _ENCODER = ThreadPoolExecutor(ENCODER_THREADS, thread_name_prefix="aptix-encode")
        return _ENCODER


class QueryEmbeddings(Generic[T]):
    """Recent messages' encodings, and the messages being encoded ahead."""

    def __init__(self, encode: Callable[[str], T]) -> None:
        self._encode = encode
        self._done: OrderedDict[str, T] = OrderedDict()
        self._pending: OrderedDict[str, Future[T]] = OrderedDict()

    def prefetch(self, message: str) -> None:
        """Start encoding ``message`` on a worker thread; :meth:`get` collects it."""
        if message in self._done or message in self._pending:
            return
        started = threading.Event()

        def encode(text: str) -> T:
            started.set()
            return self._encode(text)

        self._pending[message] = _encoder().submit(encode, message)
        if len(self._pending) > PENDING_QUERIES:
            self._pending.popitem(last=False)[1].cancel()
        # The worker needs the GIL to start: while this thread holds it, matching the message,
        # the encoding would only begin once the embedding is asked for. Waiting here hands the
        # GIL over until the model runs, which releases it. Bounded: the workers may be busy.
        started.wait(START_WAIT_S)

    def get(self, message: str) -> T:
        """The message's encoding: remembered, prefetched or encoded now."""
        cached = self._done.get(message)
        if cached is not None:
            self._done.move_to_end(message)
            return cached
        pending = self._pending.pop(message, None)
        if pending is not None and not pending.cancel():
            value = pending.result()
        else:
            # Not prefetched, or still queued behind other messages: encode here.
            value = self._encode(message)
        self._done[message] = value
        if len(self._done) > QUERY_CACHE_SIZE:
            self._done.popitem(last=False)
        return value
