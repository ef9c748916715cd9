"""``aptix sessions prune``: delete the sessions unused for longer than a duration."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from aptix.cli.main import INTERRUPTED
from aptix.cli.output import err_console, fail, print_json, refuse_unstorable, say
from aptix.cli.runtime import run_with_runtime

if TYPE_CHECKING:
    from aptix.reasoner.pruning import Pruned
    from aptix.runtime import Runtime

__all__ = ["parse_duration", "prune"]

_DURATION = re.compile(r"([0-9]+)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: Younger sessions may still be answering the request that created or touched them.
SHORTEST = timedelta(minutes=1)
#: Longer ago than any session was used, and short of what a date can go back.
LONGEST = timedelta(days=36_500)
_HOW = "write a whole number and a unit: s, m, h, d or w (30d, 12h, 90m, 2w)"


def parse_duration(given: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w`` or ``3600s`` as a timedelta; ValueError says why not."""
    found = _DURATION.fullmatch(given)
    if found is None:
        raise ValueError(f"'{given}' is not a duration: {_HOW}.")
    digits, unit = found.groups()
    # Past 15 digits any unit is over the longest (and int() of thousands of digits refuses).
    seconds = int(digits) * _UNITS[unit] if len(digits) <= 15 else None
    if seconds is None or seconds > LONGEST.total_seconds():
        raise ValueError(f"{given} is too long: it can be at most 100 years (36500d).")
    if seconds < SHORTEST.total_seconds():
        raise ValueError(
            f"{given} is too short: it must be at least 1 minute, since a session used within "
            "the last minute may still be answering its request."
        )
    return timedelta(seconds=seconds)


def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Delete the sessions last used longer ago than this: 30d, 12h, 90m, 2w.",
            show_default=False,
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be deleted; delete nothing.")
    ] = False,
    batch_size: Annotated[
        int, typer.Option(min=1, max=1000, help="Sessions deleted per transaction.")
    ] = 200,
    as_json: Annotated[bool, typer.Option("--json/--no-json", metavar="", help="Print JSON.")] = (
        False
    ),
) -> None:
    """Delete every org's sessions unused for longer than --older-than, with their turns.

    A session goes with its turns (and their tool calls), mode history and conversation
    fingerprints; sessions branched from it stay. A session whose turn is running or waits
    for its client (a hand-off, an approval) is kept. Safe while servers use the database.
    """
    refuse_unstorable({"--older-than": older_than})
    try:
        age = parse_duration(older_than)
    except ValueError as exc:
        fail(f"--older-than {exc}", code=2)
    from aptix.db.types import utc_now
    from aptix.reasoner.pruning import count_prunable, prune_sessions

    cutoff = utc_now() - age
    told: list[Pruned] = []
    began = False

    def said(so_far: Pruned) -> None:
        told.append(so_far)
        say(
            f"Deleted {_n(so_far.sessions, 'session')} so far ({_n(so_far.turns, 'turn')}).",
            to=err_console,
        )

    async def work(runtime: Runtime) -> Pruned | None:
        nonlocal began
        if dry_run:
            return await count_prunable(runtime.database, cutoff)
        began = True
        with _ctrl_c_cancels() as pressed:
            try:
                return await prune_sessions(
                    runtime.database, cutoff, batch_size=batch_size, progress=said
                )
            except asyncio.CancelledError:
                if not pressed():
                    raise
        return None

    try:
        done = run_with_runtime(work, connect_mcp=False)
    except KeyboardInterrupt:  # as the database opened, or a second Ctrl-C
        if not dry_run:
            _interrupted(told, maybe_more=began)
        raise
    if done is None:
        _interrupted(told, maybe_more=False)
        raise typer.Exit(INTERRUPTED)
    if as_json:
        print_json(
            {
                "olderThan": older_than,
                "cutoff": cutoff.isoformat(),
                "dryRun": dry_run,
                "sessions": done.sessions,
                "turns": done.turns,
                "kept": done.kept,
            }
        )
    else:
        verb = "Would delete" if dry_run else "Deleted"
        say(
            f"{verb} {_n(done.sessions, 'session')} and {_n(done.turns, 'turn')} "
            f"last used before {_when(cutoff)}."
        )
    if done.kept:
        is_are = "is" if done.kept == 1 else "are"
        say(
            f"{_n(done.kept, 'session')} last used before then {is_are} kept: a turn of theirs "
            "is running, waits for its client or changed since.",
            to=err_console,
        )


@contextlib.contextmanager
def _ctrl_c_cancels() -> Iterator[Callable[[], bool]]:
    """Make the first Ctrl-C cancel the running task; yields whether it came.

    A cancel reaches the task at an await, where the prune finishes the batch in flight and
    tells it; a KeyboardInterrupt could land between a batch's end and its count. A second
    Ctrl-C interrupts as usual.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    pressed = False

    def cancel() -> None:
        nonlocal pressed
        pressed = True
        loop.remove_signal_handler(signal.SIGINT)
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, cancel)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread
        installed = False  # Ctrl-C raises KeyboardInterrupt, and the command says so
    try:
        yield lambda: pressed
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
        if pressed and task is not None:
            task.uncancel()  # the command ends as interrupted, with what it did


def _interrupted(told: list[Pruned], *, maybe_more: bool) -> None:
    """The last line of an interrupted prune: how many it deleted in all."""
    what = "deleted no session"
    if told:
        what = f"deleted {_n(told[-1].sessions, 'session')} and {_n(told[-1].turns, 'turn')} in all"
    if maybe_more:  # a KeyboardInterrupt may have come between a batch's end and its count
        what += ", perhaps with the batch in progress"
    say(f"Interrupted: {what}; the rest are left for the next prune.", to=err_console)


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _when(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC"
