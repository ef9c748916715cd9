"""Index builds on threads of their own stop when the process exits, before it finalises.

A daemon thread still inside onnxruntime when the interpreter finalises aborts the process
("terminate called without an active exception", SIGABRT): a one-shot CLI command, a server
stopping mid-build, or a Ctrl-C while ``aptix serve`` checks its start-up would end with
exit code 134 instead of its own. So each build thread is :func:`tracked`, its encoder is
wrapped by :func:`until_exit`, and at exit the encoders refuse work and the threads are
joined: a build stops between two calls of the model.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Sequence

from aptix.workflows.matching.semantic import (
    Embedder,
    Encoded,
    TokenEmbedder,
    Vectors,
    encoded_many,
)

__all__ = ["EXIT_WAIT_SECONDS", "Stopped", "exiting", "start_tracked", "until_exit"]

#: Set when the process exits: index builds stop between two calls of the model.
_EXITING = threading.Event()
_WORKERS: set[threading.Thread] = set()
_WORKERS_LOCK = threading.Lock()
#: How long an exiting process waits for a build to stop (it stops between two calls of
#: BUILD_CHUNK texts, a few seconds at most).
EXIT_WAIT_SECONDS = 10.0


class Stopped(Exception):
    """The process is exiting; an index build ends here."""


def exiting() -> bool:
    """True once the process has begun to exit."""
    return _EXITING.is_set()


def start_tracked(target: Callable[[], None], name: str) -> threading.Thread:
    """Start ``target`` on a daemon thread that an exiting process waits for."""

    def run() -> None:
        try:
            target()
        finally:
            with _WORKERS_LOCK:
                _WORKERS.discard(threading.current_thread())

    worker = threading.Thread(target=run, name=name, daemon=True)
    with _WORKERS_LOCK:
        _WORKERS.add(worker)
    worker.start()
    return worker


class _UntilExit:
    """An embedder that refuses work once the process exits."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    def encode(self, texts: Sequence[str]) -> Vectors:
        """The inner encoder's vectors, unless the process is exiting."""
        if _EXITING.is_set():
            raise Stopped
        return self.inner.encode(texts)


class _TokensUntilExit(_UntilExit):
    """:class:`_UntilExit` for an encoder that also returns token states."""

    def encode_tokens(self, text: str) -> Encoded:
        """The inner encoder's vector and token states, unless the process is exiting."""
        if _EXITING.is_set():
            raise Stopped
        assert isinstance(self.inner, TokenEmbedder)
        return self.inner.encode_tokens(text)

    def encode_tokens_many(self, texts: Sequence[str]) -> list[Encoded]:
        """The inner encoder's :func:`encoded_many`, unless the process is exiting."""
        if _EXITING.is_set():
            raise Stopped
        assert isinstance(self.inner, TokenEmbedder)
        return encoded_many(self.inner, texts)


#: One wrapper per encoder: the runtimes of a process share one loaded model, and one
#: wrapper of it (it holds the model, so an id is not reused while it is here).
_WRAPPED: dict[int, _UntilExit] = {}


def until_exit(embedder: Embedder) -> Embedder:
    """``embedder``, refusing work (:class:`Stopped`) once the process exits."""
    if isinstance(embedder, _UntilExit):
        return embedder
    with _WORKERS_LOCK:
        wrapped = _WRAPPED.get(id(embedder))
        if wrapped is None or wrapped.inner is not embedder:
            wrapped = _WRAPPED[id(embedder)] = (
                _TokensUntilExit(embedder)
                if isinstance(embedder, TokenEmbedder)
                else _UntilExit(embedder)
            )
        return wrapped


@atexit.register
def _stop_builds() -> None:
    _EXITING.set()
    with _WORKERS_LOCK:
        workers = list(_WORKERS)
    for worker in workers:
        worker.join(EXIT_WAIT_SECONDS)
