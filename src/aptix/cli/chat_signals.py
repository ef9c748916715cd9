"""The signals ``aptix chat`` handles: Ctrl-C stops a turn, SIGTERM and SIGHUP end the chat.

At the prompt the terminal is raw, so Ctrl-C is a key the prompt handles; while a turn runs it
arrives as SIGINT and stops the turn. SIGTERM (``kill``, ``timeout``, a supervisor) and SIGHUP
(a closed window, tmux's kill-pane) cancel the chat's task instead of killing the process where
it stands: prompt_toolkit leaves raw mode and bracketed paste, a turn's spinner gives the cursor
back, a running turn is cut short as a stopping server cuts it, and a turn waiting for approval
stays ``pending``. The process then ends by the same signal, so the shell reports 128 + its
number (143 for SIGTERM, 129 for SIGHUP). A second signal while that happens ends it at once.

A write that fails ends the chat the same way (:meth:`ChatSignals.lose_output`): a hung-up
terminal answers writes with EIO, at times before its SIGHUP is handled, and a pipe whose
reader left (``aptix chat | head``) answers with EPIPE, the write that would have raised
SIGPIPE. The chat ends as SIGHUP, or SIGPIPE, would end it, its last line on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from aptix.cli.chat_commands import ORG

if TYPE_CHECKING:
    from aptix.runtime import Runtime

__all__ = ["ChatSignals", "cut_short", "end_by", "ending_note"]

#: The signals that end the chat cleanly (SIGHUP is missing on Windows, where none is caught).
ENDING = tuple(s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)
#: How a chat whose output is gone ends: as a hang-up, or as a write to a closed pipe.
HANG_UP: signal.Signals = getattr(signal, "SIGHUP", signal.SIGTERM)
PIPE: signal.Signals = getattr(signal, "SIGPIPE", signal.SIGTERM)


class ChatSignals:
    """SIGINT sets :attr:`pressed`; SIGTERM and SIGHUP cancel the chat's task (:attr:`ended_by`)."""

    def __init__(self) -> None:
        self.pressed = asyncio.Event()
        self.ended_by: signal.Signals | None = None
        #: Why the output is gone (a write failed), or None while it is written.
        self.output_lost: str | None = None
        self._signalled = False
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._installed: list[signal.Signals] = []

    def __enter__(self) -> ChatSignals:
        handlers = [(signal.SIGINT, self.pressed.set)]
        handlers += [(s, functools.partial(self._end, s)) for s in ENDING]
        for signum, handler in handlers:
            with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals here
                self._loop.add_signal_handler(signum, handler)
                self._installed.append(signum)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum in self._installed:
            self._loop.remove_signal_handler(signum)
        self._task = None

    def lose_output(self, error: OSError) -> None:
        """A write failed: end the chat as the signal that comes with such a failure would.

        Nothing more is written to stdout (it points at the null device from here on).
        """
        if self.output_lost is not None:
            return
        if isinstance(error, BrokenPipeError):
            self.output_lost, signum = "standard output was closed", PIPE
        elif error.errno in (errno.EIO, errno.ENXIO):
            self.output_lost, signum = "the terminal hung up", HANG_UP
        else:
            self.output_lost = f"standard output cannot be written ({error.strerror or error})"
            signum = HANG_UP
        _stdout_to_null()
        if self.ended_by is None:  # else a signal ends it already
            self._start_ending(signum)

    def _end(self, signum: signal.Signals) -> None:
        if self._signalled:
            end_by(signum)  # ending already, and something holds it up: no second wait
        self._signalled = True
        # The SIGHUP of a terminal whose failed write came first: the chat ends already.
        if self.ended_by is None:
            self._start_ending(signum)

    def _start_ending(self, signum: signal.Signals) -> None:
        self.ended_by = signum
        # A signal that came as the chat ended by itself is handled once it has left: the
        # chat no longer runs anything to cancel, and still ends by the signal.
        if self._task is not None:
            self._task.cancel()


def _stdout_to_null() -> None:
    """Point stdout at the null device: its unwritten rest is dropped, not failed on again."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def end_by(signum: signal.Signals) -> NoReturn:
    """End the process by ``signum`` with its default action, as it would have ended unhandled."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a hung-up terminal takes no more output
            stream.flush()
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)
    raise SystemExit(128 + signum)  # not reached: the default action of both ends the process


async def cut_short(task: asyncio.Future[Any]) -> None:
    """Stop a running turn as a stopping server does: left as a crash leaves it, lease ended."""
    from aptix.reasoner.stopping import STOP_WAIT_SECONDS, stop_process

    # Nobody cancelled the turn, so it is not recorded ``cancelled``: it reads ``interrupted``,
    # with the calls it ran and those it cut short, as after a crash. A tool that swallows the
    # cancellation holds the ending back STOP_WAIT_SECONDS at the most.
    stop_process()
    task.cancel()
    await asyncio.wait({task}, timeout=STOP_WAIT_SECONDS)


async def ending_note(runtime: Runtime, session_id: str) -> str:
    """What a chat ended by a signal left: a turn waiting for an answer, or cut short."""
    go_on = f"aptix chat --session-id {session_id}"
    try:
        latest = await runtime.turns.list_turns(session_id, ORG, limit=1)
    except Exception:  # the record stands as it was stored; only this note is lost
        latest = []
    if latest and latest[0].status == "pending":
        return f"The turn waiting for your answer stays pending: {go_on} asks again."
    if latest and latest[0].status == "running":
        return (
            "The running turn was cut short and reads interrupted; the calls it ran are "
            f"recorded. {go_on} continues the session."
        )
    return f"{go_on} continues the session."
