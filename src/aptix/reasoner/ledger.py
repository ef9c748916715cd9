"""The ledger: every call of a turn and its state, and every transition of the turn (§14).

This module owns the turn's state machine. The loop drives it, the claims decide with it and
the stores persist what it wrote; nothing else changes a turn's ``status`` or a call's
``state``. A call moves ``proposed`` -> ``awaiting_client`` | ``awaiting_approval`` ->
``approved`` | ``denied``, then ``started`` -> ``succeeded`` | ``failed`` | ``timed_out`` |
``abandoned`` | ``unknown``. ``started`` is on record before the call runs (it rides on the
checkpoint that stores the model's response, or on the claim that accepts an approval), so a
call found ``started`` after a crash is never run again unless its tool is idempotent. An
approved call reads ``approved`` only while its turn waits again for the same results, its
resume having ended before it started (:func:`merging.wait_again`).

Entries live in ``TurnRecord.tool_calls`` as JSON-ready dicts: the wire fields of
``AgentToolCall`` plus ``state``, ``outcome`` (what clients see), ``idempotent`` and
``iteration``. A turn's tool messages always match its ledger, so every ended turn can be
replayed to the model whole.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Literal

from aptix.llm.types import LlmResponse, Message, ToolCallRequest
from aptix.logger import bounded
from aptix.reasoner.call_states import (
    APPROVED_UNRECORDED,
    CANCELLED_BEFORE_START,
    CANCELLED_ELSEWHERE,
    CANCELLED_RUNNING,
    CANCELLED_THREAD,
    CLIENT_ERROR_CHARS,
    CLIENT_ERROR_EMPTY,
    DENIED,
    FINAL,
    NOT_ANSWERED,
    NOT_APPROVED,
    NOT_STARTED,
    SHUT_DOWN_RUNNING,
    UNKNOWN,
    CallState,
    is_approval,
)
from aptix.reasoner.pre_ledger import legacy, stated_calls, unrecorded
from aptix.reasoner.record import OPEN, TurnRecord, TurnStatus
from aptix.reasoner.result import ToolResultInput
from aptix.reasoner.tool_batch import assistant_message, wire_call
from aptix.tools.context import AgentToolCall

__all__ = [
    "ENDED_HERE",
    "FINAL",
    "CallState",
    "as_found",
    "calls_to_run",
    "client_error",
    "close_dangling",
    "close_pre_ledger",
    "end",
    "fresh_ids",
    "not_run",
    "propose",
    "record_outcome",
    "recover",
    "refuse",
    "resumed_calls",
    "run",
    "settle_client_results",
    "start",
    "start_approved",
    "stopped_by_cancel",
    "take_response",
    "tool_content",
    "wire",
]

#: Turns this process ended but could not store (the database was down): id -> the turn as
#: this process ended it (its calls' outcomes, its warning, its answer with the error code),
#: or, for a resume that ran none of its calls, as that resume found it
#: (:func:`merging.wait_again`). A claim or a read of that same run finds it ended at once, as
#: it ended here (:func:`merging.adopt_ending`), instead of waiting for the lease and reading
#: the calls that ran here as lost.
ENDED_HERE: dict[str, TurnRecord] = {}


def propose(
    record: TurnRecord,
    calls: Sequence[AgentToolCall],
    iteration: int,
    idempotent: Callable[[str], bool],
) -> list[dict[str, Any]]:
    """Add the model's calls to the ledger as ``proposed``."""
    entries = []
    for call in calls:
        entry = {
            **wire_call(call),
            "state": "proposed",
            "outcome": "pending",
            "idempotent": idempotent(call.name),
            "iteration": iteration,
        }
        record.tool_calls.append(entry)
        entries.append(entry)
    return entries


def take_response(
    record: TurnRecord,
    response: LlmResponse,
    renamed: dict[str, str],
    iteration: int,
    idempotent: Callable[[str], bool],
) -> list[dict[str, Any]]:
    """Keep the model's response in the transcript and its calls in the ledger, together.

    Nothing awaits between the two, so a cancel (a client hanging up) cannot keep the
    message without its calls on record: the turn's ending then gives each a true state.
    """
    record.messages.append(assistant_message(response))
    calls = [AgentToolCall(c.id, c.name, c.arguments) for c in response.tool_calls]
    entries = propose(record, calls, iteration, idempotent)
    for entry in entries:
        if entry["callId"] in renamed:
            entry["modelCallId"] = renamed[entry["callId"]]
    return entries


def refuse(record: TurnRecord, refused: Iterable[tuple[dict[str, Any], str]]) -> None:
    """Calls of the model's response a cap refuses (:mod:`~aptix.reasoner.caps`), with why.

    Never run: ``failed``, not executed, ``why`` their error message. Each keeps its place
    in the model's message, and its tool message follows that message at once, so the model
    reads that it did not run instead of its own message without it (DESIGN §14).
    """
    for entry, why in refused:
        entry["state"] = entry["outcome"] = "failed"
        entry["errorMessage"] = why
        entry["wasExecuted"] = False
        record.messages.append(
            {"role": "tool", "tool_call_id": entry["callId"], "content": tool_content(entry)}
        )


def start(entries: Iterable[dict[str, Any]]) -> None:
    """Mark calls ``started``: the next save must land before any of them runs."""
    for entry in entries:
        entry["state"] = "started"


def not_run(entries: Iterable[dict[str, Any]], why: str) -> None:
    """Calls on record as ``started`` that this process stopped before it ran any of them.

    Their ``started`` may be stored, but none reached its tool: they failed, not run,
    rather than reading as stopped mid-run (``unknown``). ``why`` is their error message.
    """
    for entry in entries:
        if entry["state"] != "started":
            continue
        entry["state"] = entry["outcome"] = "failed"
        entry["errorMessage"] = why
        entry["wasExecuted"] = False


def record_outcome(entry: dict[str, Any], done: AgentToolCall, approval: bool = False) -> None:
    """Write what the executor returned for ``entry``'s call (kept in memory until saved).

    A client-final call that prepared its hand-off waits for the client (or, for a tool
    gated by approval, for the user's answer); every other call has its outcome. A gated
    call has only asked its question: it reads not executed until its approved run.
    """
    entry.update(wire_call(done))
    if done.requires_client_execution and done.was_executed:
        entry["state"] = "awaiting_approval" if approval else "awaiting_client"
        entry["outcome"] = "pending"
        # An auditor reads wasExecuted: a denied destructive call must never claim it ran.
        entry["wasExecuted"] = not approval
        return
    state = done.outcome or ("succeeded" if done.was_executed else "failed")
    entry["state"] = entry["outcome"] = state


def tool_content(entry: dict[str, Any]) -> str:
    """The tool message the model sees for a call with a final state."""
    state = entry["state"]
    if state == "succeeded" and entry.get("wasExecuted"):
        return str(entry.get("approvedResultJson") or entry.get("resultJson") or "")
    if state == "succeeded" and "clientResult" in entry:
        return str(entry["clientResult"])
    message = entry.get("errorMessage") or {
        "unknown": UNKNOWN,
        "denied": DENIED.format(name=entry["name"]),
    }.get(state, "The tool did not run.")
    return json.dumps({"error": message})


#: Entry keys the ledger keeps for itself: ``lost`` marks a call a crash or a cancel left
#: without an outcome (the state ``unknown`` already says so to clients).
_INTERNAL = frozenset({"lost"})


def wire(entry: dict[str, Any]) -> dict[str, Any]:
    """A ledger entry as clients see it (a copy, so later changes do not show through).

    ``wasExecuted`` is AGN-005's: the tool completed successfully (a client-final call: it
    was handed over). A call stopped part-way reads false with ``outcome`` ``unknown``,
    ``timed_out`` or ``abandoned`` and a message that it may have taken effect.
    """
    shown = {k: v for k, v in entry.items() if k not in _INTERNAL}
    state = entry.get("state")
    if state in ("awaiting_approval", "denied"):
        # Never ran; turns stored by earlier versions said otherwise.
        shown["wasExecuted"] = False
    if state == "failed" and entry.get("clientError") and not entry.get("errorMessage"):
        # Stored before the client's error text was kept as the call's error.
        shown["errorMessage"] = client_error(str(entry.get("clientResult") or ""))
    return shown


def client_error(text: str) -> str:
    """The error message of a call the client answered with ``isError``: its own words, bounded."""
    text = text.strip()
    if not text:
        return CLIENT_ERROR_EMPTY
    return bounded(text, CLIENT_ERROR_CHARS)


def fresh_ids(record: TurnRecord, response: LlmResponse) -> tuple[LlmResponse, dict[str, str]]:
    """``response`` with a fresh id for each call id already used in this turn.

    A model may reuse a call id within a turn; the client answers by id, so each call gets
    its own. Returns the response and the renaming (fresh id -> the model's id), which the
    ledger keeps as ``modelCallId``.
    """
    seen = {e["callId"] for e in record.tool_calls}
    calls: list[ToolCallRequest] = []
    renamed: dict[str, str] = {}
    for call in response.tool_calls:
        if call.id in seen or not call.id:
            fresh = f"call_{uuid.uuid4().hex[:24]}"
            renamed[fresh] = call.id
            call = ToolCallRequest(fresh, call.name, call.arguments)
        seen.add(call.id)
        calls.append(call)
    if not renamed:
        return response, renamed
    return replace(response, tool_calls=tuple(calls)), renamed


def settle_client_results(record: TurnRecord, results: Sequence[ToolResultInput]) -> None:
    """Accept the client's results for the pending calls (inside the claim's transaction).

    An ordinary client-final call ends with the client's result. A call waiting for approval
    is ``denied``, or ``approved`` and at once ``started``: that state is stored by this
    same transaction before the call runs, so a crash while it runs never runs it twice.
    """
    legacy(record)
    entries = {e["callId"]: e for e in record.tool_calls}
    for result in results:
        entry = entries[result.call_id]
        entry["clientResult"] = result.output
        entry["clientError"] = result.is_error
        if entry["state"] == "awaiting_approval":
            entry["approved"] = is_approval(result)
            if entry["approved"]:
                entry["state"] = "started"  # approved, and now running
                continue
            entry["state"] = entry["outcome"] = "denied"
            entry["errorMessage"] = DENIED.format(name=entry["name"])
        else:
            entry["state"] = entry["outcome"] = "failed" if result.is_error else "succeeded"
            if result.is_error:
                # Where failures are read (the console's table, an auditor) the reason is
                # errorMessage; the model still reads the client's text as it is.
                entry["errorMessage"] = client_error(result.output)
        record.messages.append(
            {"role": "tool", "tool_call_id": result.call_id, "content": _client_content(entry)}
        )


def calls_to_run(record: TurnRecord) -> list[dict[str, Any]]:
    """Calls ``started`` on record that have not run yet in this process (approved, retried)."""
    legacy(record)
    answered = {m.get("tool_call_id") for m in record.messages if m.get("role") == "tool"}
    return [e for e in record.tool_calls if e["state"] == "started" and e["callId"] not in answered]


def resumed_calls(record: TurnRecord, answered: Sequence[str]) -> list[str]:
    """The calls the answer of a resume answering ``answered`` lists, by id.

    The approvals among them, approved (about to run) or denied, and every call the model
    asked for since: on a first delivery that is only the approvals; on a resume retried
    after a crash, also what the crashed attempt ran, which its answer must list too (the
    client never read the answer of the attempt that died). Not the other calls of the
    response that handed them over, wherever they sit in it: they ran in the request that got
    the hand-off, whose answer listed them (review r6 F2).
    """
    ids = set(answered)
    since: set[str] = set()
    handed = False
    # The transcript only grows: the calls of the model messages after the last one that
    # asked for a call handed over came after it.
    for message in record.messages:
        asked = {c["id"] for c in message.get("tool_calls") or ()}
        if asked & ids:
            handed, since = True, set()
        elif handed:
            since |= asked
    return [
        e["callId"]
        for e in record.tool_calls
        if (e["callId"] in ids and "approved" in e) or e["callId"] in since
    ]


def recover(record: TurnRecord) -> None:
    """Before an interrupted turn resumes: idempotent calls the crash cut short run again.

    Ending the turn made every call it left ``started`` ``unknown`` (a shutdown did so for
    the calls it stopped); such a call runs again only when its tool said it is idempotent.
    The others keep ``unknown``, and the model is told they were not repeated.
    """
    legacy(record)
    retry = {
        e["callId"]
        for e in record.tool_calls
        if e["state"] == "unknown" and e.get("idempotent") and e.get("lost")
    }
    if retry:
        record.messages = [
            m
            for m in record.messages
            if not (m.get("role") == "tool" and m.get("tool_call_id") in retry)
        ]
        for entry in record.tool_calls:
            if entry["callId"] in retry:
                entry["state"] = "started"
                entry["outcome"] = "pending"
                entry.pop("lost", None)
                entry.pop("errorMessage", None)


def as_found(record: TurnRecord) -> TurnRecord:
    """A copy of a turn a resume is about to run, as it stands: the client's results stored.

    Its approved calls read ``approved``: the copy is what the turn goes back to if the run
    ends before any call ran (:func:`merging.wait_again`), and then none of them started.
    """
    found = copy.deepcopy(record)
    for entry in found.tool_calls:
        if entry["state"] == "started" and entry.get("approved") is True:
            entry["state"] = "approved"
    return found


def start_approved(record: TurnRecord) -> None:
    """Mark ``started`` the approved calls a resume that ran nothing left ``approved``."""
    start(e for e in record.tool_calls if e["state"] == "approved")


def close_dangling(record: TurnRecord, why: Literal["interrupted", "cancelled", "ended"]) -> None:
    """Give every call without a final state one, and every call a tool message.

    ``started`` calls become ``unknown`` (nothing in memory says how they ended: the
    process running them stopped, or, ``cancelled``, the turn was cancelled while they ran
    elsewhere); calls still waiting for the client or an approval did not run, nor did
    approved calls whose resume ended before they started (:func:`merging.wait_again`). So do the
    calls a version from before the ledger left without entry or result
    (:func:`~aptix.reasoner.pre_ledger.unrecorded`). Afterwards the turn's messages replay
    whole: each call of each model message has its tool message.
    """
    legacy(record)
    record.tool_calls.extend(unrecorded(record))
    for entry in record.tool_calls:
        state = entry["state"]
        if state in FINAL:
            continue
        if state == "started":
            entry["state"] = "unknown"
            entry["lost"] = True
            entry["errorMessage"] = CANCELLED_ELSEWHERE if why == "cancelled" else UNKNOWN
        elif state == "approved":  # approved, but its run never started (wait_again)
            entry["state"] = "failed"
            entry["errorMessage"] = CANCELLED_BEFORE_START if why == "cancelled" else NOT_STARTED
            entry["wasExecuted"] = False
        elif state == "awaiting_approval":
            entry["state"] = "denied"
            entry["errorMessage"] = NOT_APPROVED.format(name=entry["name"])
        elif state == "proposed":  # on record, but never started nor handed to the client
            entry["state"] = "failed"
            entry["errorMessage"] = CANCELLED_BEFORE_START if why == "cancelled" else NOT_STARTED
            entry["wasExecuted"] = False
        else:  # awaiting_client
            entry["state"] = "failed"
            entry["errorMessage"] = NOT_ANSWERED
            entry["wasExecuted"] = False  # the client never ran it
        entry["outcome"] = entry["state"]
    _answer_every_call(record)


def _answer_every_call(record: TurnRecord) -> None:
    """Give each call of each model message its tool message, as its ledger entry says."""
    by_id = {e["callId"]: e for e in record.tool_calls}
    answered = {m.get("tool_call_id") for m in record.messages if m.get("role") == "tool"}
    closed: list[Message] = []
    for message in record.messages:
        closed.append(message)
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            if call["id"] in answered:
                continue
            # Every call without a result has its entry (close_dangling gave one to those a
            # version from before the ledger left without).
            content = tool_content(by_id[call["id"]])
            closed.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    if len(closed) != len(record.messages):
        # The missing results go right after their model message (before any real results of
        # the same batch), where the model expects them and the context budget keeps them.
        record.messages = closed


def run(record: TurnRecord, lease_until: Any, owner: str) -> None:
    """The turn (new, resumed or retried) runs in ``owner`` until ``lease_until``."""
    record.status = "running"
    record.lease_until = lease_until
    record.owner = owner


def end(record: TurnRecord, status: TurnStatus, warning: str | None = None) -> None:
    """Give the turn its ending ``status``; an ended turn leaves no call dangling."""
    record.status = status
    if status != "pending":
        record.pending_calls = []
    if status not in ("running", "pending"):
        record.lease_until = None
        close_dangling(record, "cancelled" if status == "cancelled" else "ended")
    if warning and warning not in record.warnings:
        record.warnings.append(warning)


def stopped_by_cancel(
    record: TurnRecord, in_thread: Callable[[str], bool], *, shutdown: bool = False
) -> None:
    """Calls still running when this process cancelled the turn: stopped, or left running.

    A stopped call may have partly taken effect: its outcome is ``unknown``, marked lost as
    a crash leaves it, so a resume retried after a shutdown runs it again only when its
    tool is idempotent. ``shutdown``: the process cancelled them because it is stopping,
    not because anyone cancelled the turn. A call in a worker thread is ``abandoned`` (it
    may still complete) only after a cancel: past a shutdown the process exits, and the
    thread ends with it, so the call is stopped as any other (review r7 F2).
    """
    legacy(record)
    for entry in record.tool_calls:
        if entry["state"] != "started":
            continue
        if in_thread(entry["name"]) and not shutdown:
            entry["state"] = entry["outcome"] = "abandoned"
            entry["errorMessage"] = CANCELLED_THREAD
        else:
            entry["state"] = entry["outcome"] = "unknown"
            entry["lost"] = True
            entry["errorMessage"] = SHUT_DOWN_RUNNING if shutdown else CANCELLED_RUNNING


def close_pre_ledger(record: TurnRecord) -> None:
    """Close, as read, an ended turn a version from before the ledger left mid-batch.

    Such a version ended a turn (cancelled, or swept as interrupted) without an entry or a
    result for the calls of its last batch: they read lost, and the turn replays whole to the
    model, as :func:`close_dangling` closes them when a turn it left running ends now. An
    approved call it left running replays as it reads (:func:`_approvals_unrecorded_told`).
    """
    _approvals_unrecorded_told(record)
    if record.status not in OPEN and unrecorded(record):
        close_dangling(record, "cancelled" if record.status == "cancelled" else "ended")


def _approvals_unrecorded_told(record: TurnRecord) -> None:
    """The tool message of each approved call a version from before the ledger left running.

    Such a version stored the user's answer as the call's tool message, and replaced it with
    the tool's result once the call had run: a turn it left while the call ran (its process
    killed) keeps the approval there, which the model would read as the tool's output. The
    call reads ``unknown`` (:data:`APPROVED_UNRECORDED`), and the model is told so, by a
    retry of that answer and by every later turn, as for a call the ledger lost.
    """
    told = {
        e["callId"]: tool_content(e)
        for e in stated_calls(record.tool_calls, waiting=record.status == "pending")
        if e.get("errorMessage") == APPROVED_UNRECORDED
    }
    if not told:
        return
    for message in record.messages:
        if message.get("role") == "tool" and message.get("tool_call_id") in told:
            message["content"] = told[message["tool_call_id"]]


def _client_content(entry: dict[str, Any]) -> str:
    if entry["state"] == "denied":
        return json.dumps({"error": entry["errorMessage"]})
    return str(entry["clientResult"])
