"""What the ledger says of a call: its states, and the words it tells clients and the model.

:mod:`aptix.reasoner.ledger` moves calls between these states; :mod:`aptix.reasoner.pre_ledger`
reads calls stored before the ledger into them.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from aptix.reasoner.result import ToolResultInput

__all__ = [
    "APPROVAL_TOOL",
    "APPROVED_UNRECORDED",
    "CANCELLED_BEFORE_START",
    "CANCELLED_ELSEWHERE",
    "CANCELLED_RUNNING",
    "CANCELLED_THREAD",
    "CLIENT_ERROR_CHARS",
    "CLIENT_ERROR_EMPTY",
    "DENIED",
    "FINAL",
    "LATE_ANSWER",
    "NOT_ANSWERED",
    "NOT_APPROVED",
    "NOT_STARTED",
    "SHUT_DOWN_BEFORE_START",
    "SHUT_DOWN_RUNNING",
    "UNKNOWN",
    "WAITING",
    "CallState",
    "is_approval",
]

CallState = Literal[
    "proposed",
    "awaiting_client",
    "awaiting_approval",
    "approved",
    "denied",
    "started",
    "succeeded",
    "failed",
    "timed_out",
    "abandoned",
    "unknown",
]
#: States that are a call's last word.
FINAL = frozenset({"succeeded", "failed", "timed_out", "abandoned", "unknown", "denied"})
WAITING = ("awaiting_client", "awaiting_approval")

# A call left started by a turn closed without its process (a server, or `aptix chat`
# killed; or one whose lease ran out while it could not reach the database): how the call
# ended is known nowhere. Not "the server stopped": a chat runs turns too (review r6, F1).
UNKNOWN = (
    "The process running this turn stopped, or lost contact with the database for longer "
    "than the turn's lease, while this call ran, so its outcome is unknown. It was not run "
    "again: check whether it took effect before retrying it."
)
CANCELLED_RUNNING = (
    "The turn was cancelled while this call ran; it was stopped and may have partly taken "
    "effect, so its outcome is unknown. It was not run again: check whether it took effect "
    "before retrying it."
)
CANCELLED_THREAD = (
    "The turn was cancelled while this call ran in a thread that cannot be stopped: it may "
    "still complete. Check whether it took effect before retrying it."
)
# Said by a stopping server and by `aptix chat` ended by a signal alike (reasoner.stopping),
# of a call in a worker thread too: the process exits, and its (daemon) threads with it.
SHUT_DOWN_RUNNING = (
    "The process running this turn stopped while this call ran; the call was stopped and may "
    "have partly taken effect, so its outcome is unknown. It was not run again: check whether "
    "it took effect before retrying it."
)
CANCELLED_ELSEWHERE = (
    "The turn was cancelled while this call ran, and how the call ended is not known here. "
    "It was not run again: check whether it took effect before retrying it."
)
NOT_STARTED = "The turn was closed before this call started; it was not run."
#: The warning of a turn closed elsewhere whose process took a model answer after its last
#: save: the answer is not part of the turn (review r7, F1).
LATE_ANSWER = (
    "The model answered after this turn was {status}; the answer was not kept, and later "
    "turns do not see it."
)
CANCELLED_BEFORE_START = "The turn was cancelled before this call started; it was not run."
SHUT_DOWN_BEFORE_START = (
    "The process running this turn stopped before this call started; it was not run."
)
NOT_ANSWERED = "The turn ended before the client answered this call; it was not run."
NOT_APPROVED = "The turn ended before the user approved '{name}'; it was not run."
DENIED = "The user did not approve '{name}'; it was not run."
APPROVED_UNRECORDED = (
    "The user approved this call before an upgrade, and the earlier Aptix that took the answer "
    "kept no record of whether the call then ran. It was not run again: check whether it took "
    "effect before retrying it."
)
CLIENT_ERROR_EMPTY = "The client answered this call with an error and no message."
#: Most characters of a client's error text kept as its call's ``errorMessage`` (the whole
#: text stays in ``clientResult``).
CLIENT_ERROR_CHARS = 2000
#: The built-in client tool whose result is an approval request the client itself answers.
APPROVAL_TOOL = "request_user_approval"

_YES = frozenset({"approve", "approved", "yes", "y", "true", "ok", "allow"})


def is_approval(result: ToolResultInput) -> bool:
    """Whether the client's answer approves: ``{"approved": true}``, ``true`` or "approve"."""
    if result.is_error:
        return False
    try:
        value: Any = json.loads(result.output)
    except ValueError:
        value = result.output
    if isinstance(value, dict):
        if "approved" in value:
            return value["approved"] is True
        value = value.get("decision", value.get("choice"))
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.strip().casefold() in _YES
