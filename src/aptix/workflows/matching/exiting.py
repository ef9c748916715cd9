"""Index builds on threads of their own stop when the process exits, before it finalises.

A daemon thread still inside onnxruntime when the interpreter finalises aborts the process
("terminate called without an active exception", SIGABRT): a one-shot CLI command, a server
stopping mid-build, or a Ctrl-C while ``aptix serve`` checks its start-up would end with
exit code 134 instead of its own. So each build thread is :func:`tracked`, its encoder is
wrapped by :func:`until_exit`, and at exit the encoders refuse work and the threads are
joined: a build stops between two calls of the model.

A runtime that closes stops its own builds the same way (:func:`until_exit` with a
:class:`Closing`), and a model run under way ends at once (onnxruntime's ``terminate``): a
process that opens runtimes one after another (tests, an application that embeds Aptix)
would otherwise keep every closed runtime's larger-encoder build running.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Sequence
from typing import Any

from aptix.workflows.matching.semantic import (
    Embedder,
    Encoded,
    OnnxEmbedder,
    TokenEmbedder,
    Vectors,
    encoded_many,
)

__all__ = ["EXIT_WAIT_SECONDS", "Closing", "Stopped", "exiting", "start_tracked", "until_exit"]

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


class Closing:
    """Set once, when the runtime owning some index builds closes; it tells whoever listens."""

    def __init__(self) -> None:
        self._set = False
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def is_set(self) -> bool:
        """True once :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Close: every listener is called, once."""
        with self._lock:
            if self._set:
                return
            self._set = True
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` when this is set (at once if it already is)."""
        with self._lock:
            if not self._set:
                self._listeners.append(listener)
                return
        listener()


class _UntilExit:
    """An embedder that refuses work once the process exits (or ``closed`` is set)."""

    def __init__(self, inner: Embedder, closed: Closing | None = None) -> None:
        self.inner = inner
        self.closed = closed
        #: The encodings are the inner encoder's own: caches key them by it, not this wrapper.
        like = getattr(inner, "encodes_like", None)
        self.encodes_like: object = inner if like is None else like
        #: The options of this wrapper's model runs: closing ends the one under way at once.
        self._options: Any = None
        if closed is not None and isinstance(inner, OnnxEmbedder):
            self._options = inner.run_options()
            closed.listen(self._terminate)

    def _terminate(self) -> None:
        self._options.terminate = True

    def _stopping(self) -> bool:
        return _EXITING.is_set() or (self.closed is not None and self.closed.is_set())

    def _check(self) -> None:
        if self._stopping():
            raise Stopped

    def encode(self, texts: Sequence[str]) -> Vectors:
        """The inner encoder's vectors, unless the process is exiting."""
        self._check()
        return self.inner.encode(texts)


class _TokensUntilExit(_UntilExit):
    """:class:`_UntilExit` for an encoder that also returns token states."""

    def encode_tokens(self, text: str) -> Encoded:
        """The inner encoder's vector and token states, unless the process is exiting."""
        self._check()
        assert isinstance(self.inner, TokenEmbedder)
        if isinstance(self.inner, OnnxEmbedder):
            try:
                return self.inner.encode_tokens(text, options=self._options)
            except Exception:
                self._check()  # a run its runtime's closing ended is Stopped, not a failure
                raise
        return self.inner.encode_tokens(text)

    def encode_tokens_many(self, texts: Sequence[str]) -> list[Encoded]:
        """The inner encoder's :func:`encoded_many`, unless the process is exiting.

        An index build hands it one run of the model at a time, so a build stops within one.
        """
        self._check()
        assert isinstance(self.inner, TokenEmbedder)
        if isinstance(self.inner, OnnxEmbedder):
            try:
                return self.inner.encode_tokens_many(texts, options=self._options)
            except Exception:
                self._check()
                raise
        return encoded_many(self.inner, texts)


#: One wrapper per encoder: the runtimes of a process share one loaded model, and one
#: wrapper of it (it holds the model, so an id is not reused while it is here).
_WRAPPED: dict[int, _UntilExit] = {}


def until_exit(embedder: Embedder, closed: Closing | None = None) -> Embedder:
    """``embedder``, refusing work (:class:`Stopped`) once the process exits.

    With ``closed``, also once that is set (the runtime that owns the builds has closed);
    such a wrapper is the caller's own, not the one the process shares.
    """
    if isinstance(embedder, _UntilExit) and embedder.closed is closed:
        return embedder
    if closed is not None:
        inner = embedder.inner if isinstance(embedder, _UntilExit) else embedder
        return _wrap(inner, closed)
    with _WORKERS_LOCK:
        wrapped = _WRAPPED.get(id(embedder))
        if wrapped is None or wrapped.inner is not embedder:
            wrapped = _WRAPPED[id(embedder)] = _wrap(embedder)
        return wrapped


def _wrap(embedder: Embedder, closed: Closing | None = None) -> _UntilExit:
    if isinstance(embedder, TokenEmbedder):
        return _TokensUntilExit(embedder, closed)
    return _UntilExit(embedder, closed)


@atexit.register
def _stop_builds() -> None:
    _EXITING.set()
    with _WORKERS_LOCK:
        workers = list(_WORKERS)
    for worker in workers:
        worker.join(EXIT_WAIT_SECONDS)
