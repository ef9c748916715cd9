"""Message embeddings for the semantic matcher: remembered, and encoded ahead on request.

Matching a message reads its embedding several times (ranking, evidence, the request model,
the reason given); it is encoded once and remembered. :meth:`QueryEmbeddings.prefetch`
starts the encoding on a worker thread: the model runs outside the GIL, so the lexical
evidence gathered meanwhile costs no extra latency.

A message's encoding depends on the encoder alone, not on the catalog: every matcher of the
process that encodes with the same encoder (the deployment-wide one and each org's) reads the
same remembered encodings, one cache per process bounded by :data:`QUERY_CACHE_BYTES`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar, cast

from aptix.workflows.matching.bounded import BoundedCache, number_of, text_bytes

__all__ = ["QUERY_CACHE_BYTES", "QueryEmbeddings"]

#: The remembered encodings of the process, every encoder's together: 32 MB as measured (the
#: message and the arrays kept of its encoding, plus :data:`.bounded.ENTRY_BYTES`).
QUERY_CACHE_BYTES = 32 * 1024 * 1024
#: Messages being encoded ahead and not yet collected, in the whole process.
PENDING_QUERIES = 8
#: Threads encoding messages ahead, shared by every matcher of the process.
ENCODER_THREADS = 2
#: How long :meth:`QueryEmbeddings.prefetch` waits for a worker to start encoding.
START_WAIT_S = 0.002

T = TypeVar("T")

_ENCODER: ThreadPoolExecutor | None = None
_ENCODER_LOCK = threading.Lock()

#: Encodings by (the encoder's number, message).
_DONE: BoundedCache[tuple[int, str], object] = BoundedCache(QUERY_CACHE_BYTES)
_PENDING: OrderedDict[tuple[int, str], Future[object]] = OrderedDict()
_PENDING_LOCK = threading.Lock()


def _encoder() -> ThreadPoolExecutor:
    """The threads that encode messages ahead (started on first use)."""
    global _ENCODER
    with _ENCODER_LOCK:
        if _ENCODER is None:
            _ENCODER = ThreadPoolExecutor(ENCODER_THREADS, thread_name_prefix="aptix-encode")
        return _ENCODER


def remembered() -> BoundedCache[tuple[int, str], object]:
    """The process's cache of encoded messages (to measure it)."""
    return _DONE


class QueryEmbeddings(Generic[T]):
    """One encoder's view of the process's encoded messages, and of those encoded ahead.

    ``encoder`` names the encoding: views given the same object share what is remembered.
    ``size`` is what an encoding takes in memory, in bytes.
    """

    def __init__(
        self, encoder: object, encode: Callable[[str], T], size: Callable[[T], int]
    ) -> None:
        self._number = number_of(encoder)
        self._encode = encode
        self._size = size

    def prefetch(self, message: str) -> None:
        """Start encoding ``message`` on a worker thread; :meth:`get` collects it."""
        key = (self._number, message)
        if _DONE.get(key) is not None:
            return
        started = threading.Event()

        def encode(text: str) -> T:
            started.set()
            return self._encode(text)

        with _PENDING_LOCK:
            if key in _PENDING:
                return
            _PENDING[key] = cast("Future[object]", _encoder().submit(encode, message))
            if len(_PENDING) > PENDING_QUERIES:
                _PENDING.popitem(last=False)[1].cancel()
        # The worker needs the GIL to start: while this thread holds it, matching the message,
        # the encoding would only begin once the embedding is asked for. Waiting here hands the
        # GIL over until the model runs, which releases it. Bounded: the workers may be busy.
        started.wait(START_WAIT_S)

    def get(self, message: str) -> T:
        """The message's encoding: remembered, prefetched or encoded now."""
        key = (self._number, message)
        cached = _DONE.get(key)
        if cached is not None:
            return cast(T, cached)
        with _PENDING_LOCK:
            pending = _PENDING.pop(key, None)
        if pending is not None and not pending.cancel():
            value = cast(T, pending.result())
        else:
            # Not prefetched, or still queued behind other messages: encode here.
            value = self._encode(message)
        _DONE.put(key, value, text_bytes(message) + self._size(value))
        return value
