"""The log line of a turn marked ``interrupted``: the process that ran it is gone.

A killed process (``kill -9``, an OOM kill) writes nothing more, and its spans die with it;
the process that finds its turns, at start-up or when a request for the session comes, is
the one that can say that a turn was cut short.
"""

from __future__ import annotations

from collections.abc import Sequence

from aptix.log_setup import log_ids
from aptix.logger import LogLevel, StdlibAdminLogger, bounded
from aptix.reasoner.record import TurnRecord

__all__ = ["FOUND_AT_START", "FOUND_BY_A_REQUEST", "MOST_NAMED", "TAG", "log_interrupted"]

TAG = "[TurnStore_Turn__Interrupted]"
#: Where a dead turn was found: by the sweep of a process starting, or by a request's claim.
FOUND_AT_START = "found at start-up"
FOUND_BY_A_REQUEST = "found by a request for its session"
#: Most turns one sweep names one line each; a larger count is one more line.
MOST_NAMED = 100

_logger = StdlibAdminLogger()


def log_interrupted(turns: Sequence[TurnRecord], found: str) -> None:
    """One WARNING per turn just marked interrupted, ``found`` saying where it was found."""
    for turn in turns[:MOST_NAMED]:
        calls = [c for c in turn.tool_calls if c.get("outcome") == "unknown"]
        lost = f"; {len(calls)} call(s) of it may or may not have taken effect" if calls else ""
        with log_ids(turn.session_id, turn.id, turn.org):
            _logger.add_custom_event(
                LogLevel.WARNING,
                TAG,
                f"Turn {turn.id} was left running by process {bounded(turn.owner or '?')}, "
                "which stopped or lost its lease (APTIX_TURN_LEASE_SECONDS) before the turn "
                f"finished; {found}, it is marked interrupted{lost}.",
                ("SessionId", turn.session_id),
                ("ConversationId", turn.id),
            )
    if len(turns) > MOST_NAMED:
        _logger.add_custom_event(
            LogLevel.WARNING,
            TAG,
            f"{len(turns) - MOST_NAMED} more turn(s) were marked interrupted ({found}); "
            "list the sessions' turns to find them.",
        )
