"""Who may run a session's turn next: start, resume, replay, busy, interrupted or cancelled.

These are pure decisions on the session's latest turn. The stores call them under the
session's lock, inside the transaction that writes the outcome, so the rules hold across
processes: one turn per session at a time, a resume applied once, idempotency scoped to
the turn.
"""

from __future__ import annotations

import copy
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from aptix.db.types import utc_now
from aptix.errors import SessionBusyError, TurnError
from aptix.nul import storable
from aptix.reasoner import ledger, merging
from aptix.reasoner.record import OPEN, TurnRecord
from aptix.reasoner.result import ERROR_CODE, ToolResultInput, TurnResult

__all__ = [
    "CALLS_RAN",
    "OWNER",
    "Decide",
    "Lease",
    "Plan",
    "cancel_turn",
    "is_dead",
    "mark_dead",
    "resume_plan",
    "start_plan",
]

_HOST = socket.gethostname()
#: This process, as recorded on the turns it runs: ``host:pid:random``.
OWNER = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

#: Said in the answer of a turn a database failure ended after calls of its request ran.
CALLS_RAN = (
    "This request's calls ran (listed with their outcomes): sending it again would run them "
    "again. Read the session to see how they ended."
)
#: What that answer says in its place when a repeat of the results is answered with it.
CALLS_RAN_REPLAYED = (
    "Replayed: these results were posted before, and the calls of the request this turn "
    "ended in ran then (listed with their outcomes); this post ran nothing. Read the session "
    "to see how they ended."
)

INTERRUPTED = (
    "Interrupted: the process running this turn stopped, or lost contact with the database "
    "for longer than the turn's lease, before it finished; its calls are recorded with their "
    "outcomes, and a call whose outcome is unknown was not run again."
)


@dataclass(frozen=True, slots=True)
class Lease:
    """How long a running turn is presumed alive without a heartbeat, and by whom."""

    seconds: float = 30.0
    owner: str = OWNER

    def until(self, now: datetime | None = None) -> datetime:
        """The lease's expiry if taken or renewed at ``now``."""
        return (now or utc_now()) + timedelta(seconds=self.seconds)

    def holder(self) -> str:
        """The owner recorded on one run of a turn: this process, and which of its runs."""
        # Per run, not per process: a process that took over its own turn (its lease ran
        # out, then the resume was retried here) must not take the old run's saves for its own.
        return f"{self.owner}:{uuid.uuid4().hex[:8]}"


@dataclass(slots=True)
class Plan:
    """The outcome of a claim: the turn to run, a stored answer to replay, a dead turn closed.

    ``new`` says ``run`` is a new turn to insert rather than the latest one resumed. ``found``
    is a resumed turn as the resume found it, the client's results stored
    (:func:`ledger.as_found`): what a run that ends before any call ran leaves it as.
    ``interrupted`` is the latest turn when this claim found its process gone and marked it
    interrupted (it may be ``closed``, or resumed as ``run``): the store logs it once stored.
    """

    run: TurnRecord | None = None
    new: bool = False
    replay: dict[str, Any] | None = None
    closed: TurnRecord | None = None
    found: TurnRecord | None = None
    interrupted: TurnRecord | None = None

    def writes(self) -> list[TurnRecord]:
        """The records the claim must store, in order."""
        closed = [self.closed] if self.closed is not None and self.closed is not self.run else []
        return [*closed, *([self.run] if self.run is not None else [])]


Decide = Callable[[TurnRecord | None], Plan]

CANCELLED = "Cancelled before it finished."
SUPERSEDED = (
    "Superseded: a new message arrived before the client answered the pending tool call(s); "
    "they were not run."
)


def _owner_gone(owner: str | None) -> bool:
    if not owner:
        return True
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != _HOST or not pid.isdigit() or int(pid) == os.getpid():
        return False  # another machine's process: only its lease tells
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive but not ours to signal
        return False
    # A killed process nobody reaped (PID 1 of a container without an init) still answers
    # the signal: it is gone all the same.
    return _is_zombie(int(pid))


def _is_zombie(pid: int) -> bool:
    """Whether ``pid`` has exited but not been reaped (state ``Z`` in ``/proc/<pid>/stat``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read()
    except OSError:  # no /proc here, or it exited meanwhile: the signal already answered
        return False
    # The command name may hold spaces and parentheses: the state follows the last ")".
    return fields[fields.rfind(b")") + 1 :].split()[:1] == [b"Z"]


def _here(owner: str | None) -> bool:
    """Whether ``owner`` is a run of this process (:meth:`Lease.holder`)."""
    return owner is not None and (owner == OWNER or owner.startswith(f"{OWNER}:"))


def _ended_here(turn: TurnRecord) -> TurnRecord | None:
    """The ending this process gave ``turn``'s run and could not store, if any."""
    ended = ledger.ENDED_HERE.get(turn.id)
    # That very run's only: a resume that ran nothing leaves its turn to be resumed again,
    # here too, by a run the ending must not mistake for the one it ended.
    if ended is None or not _here(turn.owner) or ended.owner != turn.owner:
        return None
    return ended


def is_dead(turn: TurnRecord, now: datetime) -> bool:
    """A running turn whose lease expired or whose process on this host is gone."""
    if turn.status != "running":
        return False
    if _ended_here(turn) is not None:
        return True  # ended here by an error its own save could not record
    expired = turn.lease_until is None or turn.lease_until < now
    return expired or _owner_gone(turn.owner)


def mark_dead(turn: TurnRecord, now: datetime) -> bool:
    """Mark ``turn`` ``interrupted`` if its process is gone; True when it was."""
    if not is_dead(turn, now):
        return False
    ended = _ended_here(turn)
    if ended is not None:
        merging.adopt_ending(turn, ended)
    else:
        ledger.end(turn, "interrupted", INTERRUPTED)
    return True


def start_plan(
    *,
    session_id: str,
    org: str,
    user: str,
    instruction: str,
    lease: Lease,
    turn_id: str,
    supersede: bool = False,
) -> Decide:
    """A new turn for ``instruction``, unless the session's latest turn is still open.

    ``supersede``: a turn waiting for its client's results does not refuse the instruction
    but ends ``cancelled``, its pending calls closed as not run, and the model reads so.
    """

    def decide(latest: TurnRecord | None) -> Plan:
        now = utc_now()
        closed = latest if latest is not None and mark_dead(latest, now) else None
        interrupted = _interrupted(closed)
        if latest is not None and latest.status == "running":
            raise SessionBusyError(
                f"Session '{session_id}' is running turn {latest.id}; wait for it to finish "
                "or cancel it."
            )
        if latest is not None and latest.status == "pending" and supersede:
            ledger.end(latest, "cancelled", SUPERSEDED)
            closed = latest
        if latest is not None and latest.status == "pending":
            ids = ", ".join(c["callId"] for c in latest.pending_calls)
            raise TurnError(
                f"The session is waiting for the results of tool call(s) {ids}; "
                "post them as toolResults before a new instruction."
            )
        record = TurnRecord(
            id=turn_id,
            session_id=session_id,
            org=org,
            user=user,
            seq=(latest.seq + 1) if latest else 1,
            instruction=instruction,
            messages=[{"role": "user", "content": instruction}],
            lease_until=lease.until(now),
            owner=lease.holder(),
        )
        return Plan(run=record, new=True, closed=closed, interrupted=interrupted)

    return decide


def resume_plan(results: Sequence[ToolResultInput], lease: Lease) -> Decide:
    """Accept ``results`` for the latest turn's pending calls, store them in it and resume.

    Only the session's latest turn is considered, so a call id the model reuses in a later
    turn is a new call. The same results posted again (or others for the same calls: the
    first accepted win) get the turn as it stands, never run again; results whose attempt
    failed or was interrupted resume from what was stored. So do results whose run a database
    failure ended before any call ran (:func:`merging.wait_again`).
    """
    ids = [r.call_id for r in results]
    if len(set(ids)) != len(ids):
        raise TurnError("toolResults lists the same call id more than once.")
    key = ",".join(sorted(ids))

    def decide(latest: TurnRecord | None) -> Plan:
        now = utc_now()
        closed = latest if latest is not None and mark_dead(latest, now) else None
        interrupted = _interrupted(closed)
        if latest is None:
            raise TurnError(_unknown(ids, set()))
        if key in latest.answers:  # the same resume posted again: the turn as it stands
            stands = _as_it_stands(latest, latest.answers[key])
            return Plan(replay=_replayed(stands), closed=closed, interrupted=interrupted)
        if latest.status == "running":
            raise SessionBusyError(
                "These tool results are already being processed; retry shortly."
                if latest.resume_key == key
                else f"Session '{latest.session_id}' is running turn {latest.id}."
            )
        if latest.status == "interrupted" and latest.resume_key == key:
            found = ledger.as_found(latest)
            ledger.recover(latest)  # only idempotent calls lost in the crash run again
            return _run(latest, lease, now, closed, found, interrupted)
        if latest.status not in OPEN and latest.resume_key == key:
            # Taken, then the turn ended before their run answered (cancelled while it ran,
            # here or by another process, or ended by a failure): not refused as results
            # never taken are, since their calls may have run (review r6 F1).
            return Plan(
                replay=_replayed(_unanswered(latest, ids)), closed=closed, interrupted=interrupted
            )
        pending = latest.pending_calls if latest.status == "pending" else []
        waiting = {c["callId"] for c in pending}
        unknown = sorted(set(ids) - waiting)
        if unknown:
            raise TurnError(_unknown(unknown, waiting))
        missing = sorted(waiting - set(ids))
        if missing:
            raise TurnError(f"Results are missing for pending tool call(s): {', '.join(missing)}.")
        if latest.resume_key != key:  # first delivery: keep the results with the turn
            # Approved calls become ``started`` in this same transaction, before they run.
            clean = [ToolResultInput(r.call_id, storable(r.output), r.is_error) for r in results]
            ledger.settle_client_results(latest, clean)
            latest.resume_key = key
        found = ledger.as_found(latest)
        # Approved calls an attempt that ran nothing left approved: started, in this same
        # transaction, before they run.
        ledger.start_approved(latest)
        return _run(latest, lease, now, closed, found, interrupted)

    return decide


def _replayed(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` as a repeat of results already posted gets it: the repeat ran nothing.

    An ending whose request's calls ran tells that request that sending it again would run
    them again; the repeat is told it ran nothing (review s1 F2). The turn's record keeps
    the words its first answer had.
    """
    error = answer.get("error")
    if not isinstance(error, str) or CALLS_RAN not in error:
        return answer
    warnings = [
        w.replace(CALLS_RAN, CALLS_RAN_REPLAYED) if isinstance(w, str) else w
        for w in answer.get("warnings") or ()
    ]
    return {**answer, "error": error.replace(CALLS_RAN, CALLS_RAN_REPLAYED), "warnings": warnings}


def _as_it_stands(turn: TurnRecord, stored: dict[str, Any]) -> dict[str, Any]:
    """The answer ``turn`` gives now; ``stored`` (its answer to the replayed resume) if unmoved.

    The answer stored when the results were accepted is a snapshot: once the turn has moved
    on (a later resume answered the calls it handed off, or the turn was cancelled or
    interrupted since), replaying it would tell a client left behind that the turn waits for
    calls already settled.
    """
    if turn.status == "running":
        raise TurnError(
            f"Turn {turn.id} has moved on since these results were accepted: a later resume "
            "of it is running. Read the session for how it ends.",
            code="turn_moved_on",
        )
    # Every answer (a hand-off, the final one, an error) is stored as the turn's result
    # when given: the latest is the turn as it stands, the replayed one while it is unmoved.
    answer = turn.result or stored
    if turn.status != "interrupted" and (
        turn.status != "cancelled" or answer.get("kind") == "cancelled"
    ):
        return answer
    # Closed since its last answer, by a cancel while it waited or a crash while it ran.
    entries = {e["callId"]: e for e in turn.tool_calls}
    calls = [
        ledger.wire(entries[c["callId"]]) if c.get("callId") in entries else c
        for c in answer.get("toolCalls") or ()
    ]
    return _closed(turn, answer, calls)


def _unanswered(turn: TurnRecord, ids: Sequence[str]) -> dict[str, Any]:
    """The answer of results ``ids`` that ``turn`` took, then ended without answering.

    The run of those results stores its ending as the turn's result when it can (a cancel
    in its process, a failure). A turn closed without it (a cancel another process
    recorded, before or without that run seeing it) still holds the hand-off they answered:
    the answer is then the resume's ending as its record has it, listing the resume's calls.
    """
    answer = turn.result or {}
    if answer.get("kind") in ("cancelled", "error"):
        return answer
    entries = {e["callId"]: e for e in turn.tool_calls}
    calls = [ledger.wire(entries[c]) for c in ledger.resumed_calls(turn, ids)]
    # Not the hand-off's usage and finish: the resume's own model calls are not on record.
    ended = TurnResult(turn.session_id, turn.id, "cancelled", str(answer.get("mode") or ""))
    return _closed(turn, ended.to_wire(), calls)


def _closed(turn: TurnRecord, answer: dict[str, Any], calls: list[Any]) -> dict[str, Any]:
    """``answer`` as ``turn`` ended since: ``cancelled``, or else an error (interrupted)."""
    cancelled = turn.status == "cancelled"
    return {
        **answer,
        "kind": "cancelled" if cancelled else "error",
        "text": turn.text,
        "toolCalls": calls,
        "warnings": list(turn.warnings),
        "error": None if cancelled or not turn.warnings else turn.warnings[-1],
        ERROR_CODE: None,  # as its record says: no error ending, so no code
    }


def cancel_turn(turn: TurnRecord) -> TurnRecord:
    """Mark an open turn ``cancelled`` (its executed calls stay recorded)."""
    ended = _ended_here(turn)
    if ended is not None:
        # This process ended the turn's run and could not store it (an outage): the cancel
        # closes that ending, as reads show it, not the run the row still holds (review s4 F2).
        merging.adopt_ending(turn, ended)
    if turn.status not in OPEN:
        raise TurnError(
            f"Turn {turn.id} has already finished (status '{turn.status}'); "
            "there is nothing to cancel.",
            code="turn_finished",
        )
    ledger.end(turn, "cancelled", CANCELLED)
    turn.version += 1
    turn.updated_at = utc_now()
    return turn


def _run(
    turn: TurnRecord,
    lease: Lease,
    now: datetime,
    closed: TurnRecord | None,
    found: TurnRecord,
    interrupted: TurnRecord | None,
) -> Plan:
    # The dead run's owner, for the log: the new run's replaces it on the turn.
    dead = copy.copy(interrupted) if interrupted is turn else interrupted
    ledger.run(turn, lease.until(now), lease.holder())
    closed = None if closed is turn else closed
    return Plan(run=turn, closed=closed, found=found, interrupted=dead)


def _interrupted(closed: TurnRecord | None) -> TurnRecord | None:
    """``closed`` when :func:`mark_dead` marked it interrupted (not an ending adopted)."""
    return closed if closed is not None and closed.status == "interrupted" else None


def _unknown(ids: Sequence[str] | set[str], waiting: set[str]) -> str:
    return f"Unknown or already answered tool call id(s): {', '.join(sorted(ids))}. " + (
        f"Waiting for: {', '.join(sorted(waiting))}."
        if waiting
        else "No tool calls are waiting in this session."
    )
