"""What a streamed model call sent besides its text: the tool calls it wrote, a refusal.

A provider bills every token a call produced, and a streamed call cut short is charged (and
put on its turn's record) for what had come (:class:`aptix.quotas.MeteredModel`,
:func:`aptix.reasoner.running.note_cut_call`). Its text reaches them through the caller's
``on_text`` sink; the rest, which no caller shows, reaches whoever :func:`hearing` listens
while the call runs. A client that streams passes each such piece to :func:`heard`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["heard", "hearing"]

_LISTENER: ContextVar[Callable[[str], None] | None] = ContextVar("aptix_heard", default=None)


def heard(piece: str | None) -> None:
    """Pass on a piece of a streamed answer that is not its text (a call's arguments)."""
    listener = _LISTENER.get()
    if listener is not None and piece:
        listener(piece)


@contextlib.contextmanager
def hearing(pieces: list[str]) -> Iterator[None]:
    """Add to ``pieces``, while open, what streamed calls send besides their text.

    Listeners nest: one opened inside another (the metered model inside the turn's call)
    hears the same pieces, and so does the outer one.
    """
    outer = _LISTENER.get()

    def listen(piece: str) -> None:
        pieces.append(piece)
        if outer is not None:
            outer(piece)

    token = _LISTENER.set(listen)
    try:
        yield
    finally:
        _LISTENER.reset(token)
