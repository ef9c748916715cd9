"""The signals ``aptix chat`` handles: Ctrl-C stops a turn, SIGTERM and SIGHUP end the chat.

At the prompt the terminal is raw, so Ctrl-C is a key the prompt handles; while a turn runs it
arrives as SIGINT and stops the turn. SIGTERM (``kill``, ``timeout``, a supervisor) and SIGHUP
(a closed window, tmux's kill-pane) cancel the chat's task instead of killing the process where
it stands: prompt_toolkit leaves raw mode and bracketed paste, a turn's spinner gives the cursor
back, a running turn is cut short as a stopping server cuts it, and a turn waiting for approval
stays ``pending``. The process then ends by the same signal, so the shell reports 128 + its
number (143 for SIGTERM, 129 for SIGHUP). A second signal while that happens ends it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from aptix.cli.chat_commands import ORG

if TYPE_CHECKING:
    from aptix.runtime import Runtime

__all__ = ["ChatSignals", "cut_short", "end_by", "ending_note"]

#: The signals that end the chat cleanly (SIGHUP is missing on Windows, where none is caught).
ENDING = tuple(s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


class ChatSignals:
    """SIGINT sets :attr:`pressed`; SIGTERM and SIGHUP cancel the chat's task (:attr:`ended_by`)."""

    def __init__(self) -> None:
        self.pressed = asyncio.Event()
        self.ended_by: signal.Signals | None = None
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

    def _end(self, signum: signal.Signals) -> None:
        if self.ended_by is not None:
            end_by(signum)  # ending already, and something holds it up: no second wait
        self.ended_by = signum
        # A signal that came as the chat ended by itself is handled once it has left: the
        # chat no longer runs anything to cancel, and still ends by the signal.
        if self._task is not None:
            self._task.cancel()


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
