"""Third-party code run at start-up: its failures, however raised, become one line.

Start-up runs third-party code (imports, factories, constructors). Whatever it raises, even
``SystemExit`` or ``KeyboardInterrupt``, is that code's failure and stops start-up with one line
naming it; only an interrupt caused by a SIGINT that arrived while it ran is let through, so
Ctrl-C still stops the process the usual way.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["SigintWatch", "watching_sigint", "why"]


class SigintWatch:
    """Whether a SIGINT arrived while the watch was on."""

    def __init__(self, *, arrived: bool = False) -> None:
        self.arrived = arrived

    def is_real_interrupt(self, exc: BaseException) -> bool:
        """True when ``exc`` is a Ctrl-C the process received: it must propagate unchanged."""
        return isinstance(exc, KeyboardInterrupt) and self.arrived


@contextmanager
def watching_sigint() -> Iterator[SigintWatch]:
    """Note any SIGINT during the block, then hand it to the handler that was there before."""
    if threading.current_thread() is not threading.main_thread():
        # Python runs signal handlers in the main thread only: no Ctrl-C is raised here.
        yield SigintWatch()
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:
        # A handler installed outside Python cannot be chained to: every interrupt is real.
        yield SigintWatch(arrived=True)
        return
    watch = SigintWatch()

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        watch.arrived = True
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.raise_signal(signal.SIGINT)

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield watch
    finally:
        signal.signal(signal.SIGINT, previous)


def why(exc: BaseException) -> str:
    """``Type: message``, or the type alone when the message is empty (``sys.exit()``)."""
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ fails still has a type to name
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
