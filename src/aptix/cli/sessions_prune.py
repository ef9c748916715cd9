"""``aptix sessions prune``: delete the sessions unused for longer than a duration."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

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

    def said(so_far: Pruned) -> None:
        say(
            f"Deleted {_n(so_far.sessions, 'session')} so far ({_n(so_far.turns, 'turn')}).",
            to=err_console,
        )

    async def work(runtime: Runtime) -> Pruned:
        if dry_run:
            return await count_prunable(runtime.database, cutoff)
        return await prune_sessions(runtime.database, cutoff, batch_size=batch_size, progress=said)

    done = run_with_runtime(work, connect_mcp=False)
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


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _when(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC"
