"""The ledger: every call of a turn and its state, and every transition of the turn (§14).

This module owns the turn's state machine. The loop drives it, the claims decide with it and
the stores persist what it wrote; nothing else changes a turn's ``status`` or a call's
``state``. A call moves ``proposed`` -> ``awaiting_client`` | ``awaiting_approval`` ->
``approved`` | ``denied``, then ``started`` -> ``succeeded`` | ``failed`` | ``timed_out`` |
``abandoned`` | ``unknown``. ``started`` is on record before the call runs (it rides on the
checkpoint that stores the model's response, or on the claim that accepts an approval), so a
call found ``started`` after a crash is never run again unless its tool is idempotent. An
approved call reads ``approved`` only while its turn waits again for the same results, its
resume having ended before it started (:func:`wait_again`).

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
from dataclasses import fields, replace
from typing import Any, Literal

from aptix.llm.types import LlmResponse, Message, ToolCallRequest
from aptix.logger import bounded
from aptix.reasoner.record import OPEN, TurnRecord, TurnStatus
from aptix.reasoner.result import ToolResultInput
from aptix.reasoner.tool_batch import assistant_message, wire_call
from aptix.tools.context import AgentToolCall

__all__ = [
    "ENDED_HERE",
    "FINAL",
    "CallState",
    "adopt_ending",
    "as_found",
    "calls_to_run",
    "carry_endings",
    "client_error",
    "close_dangling",
    "close_pre_ledger",
    "end",
    "fresh_ids",
    "is_approval",
    "merge_closed",
    "not_run",
    "propose",
    "record_outcome",
    "recover",
    "resumed_calls",
    "run",
    "settle_client_results",
    "start",
    "start_approved",
    "stated_calls",
    "stopped_by_cancel",
    "take_response",
    "tool_content",
    "wait_again",
    "wire",
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
_WAITING = ("awaiting_client", "awaiting_approval")

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

#: Turns this process ended but could not store (the database was down): id -> the turn as
#: this process ended it (its calls' outcomes, its warning, its answer with the error code),
#: or, for a resume that ran none of its calls, as that resume found it (:func:`wait_again`).
#: A claim or a read of that same run finds it ended at once, as it ended here
#: (:func:`adopt_ending`), instead of waiting for the lease and reading the calls that ran
#: here as lost.
ENDED_HERE: dict[str, TurnRecord] = {}

_YES = frozenset({"approve", "approved", "yes", "y", "true", "ok", "allow"})


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


def settle_client_results(record: TurnRecord, results: Sequence[ToolResultInput]) -> None:
    """Accept the client's results for the pending calls (inside the claim's transaction).

    An ordinary client-final call ends with the client's result. A call waiting for approval
    is ``denied``, or ``approved`` and at once ``started``: that state is stored by this
    same transaction before the call runs, so a crash while it runs never runs it twice.
    """
    _legacy(record)
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
    _legacy(record)
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
    _legacy(record)
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
    ends before any call ran (:func:`wait_again`), and then none of them started.
    """
    found = copy.deepcopy(record)
    for entry in found.tool_calls:
        if entry["state"] == "started" and entry.get("approved") is True:
            entry["state"] = "approved"
    return found


def start_approved(record: TurnRecord) -> None:
    """Mark ``started`` the approved calls a resume that ran nothing left ``approved``."""
    start(e for e in record.tool_calls if e["state"] == "approved")


def wait_again(found: TurnRecord, ran: TurnRecord) -> TurnRecord:
    """The turn a resume's run ``ran`` leaves when it ends before any of its calls ran.

    A database failure cut the run short, and its request is answered "retry": the turn goes
    back to how the resume found it (``found``, :func:`as_found`), waiting for the same
    results, stored, as after a failed model call (or ``interrupted``, as it was), so that
    the same results posted again continue it from there. The model answers the run took go,
    as none of their calls ran; its model calls stay on record (they were made), and so do
    the outcomes another process settled into the turn meanwhile.
    """
    again = copy.deepcopy(found)
    carry_endings(again, ran)
    again.model_calls = list(ran.model_calls)
    again.context_dropped, again.context_summary = ran.context_dropped, ran.context_summary
    again.version, again.owner, again.lease_until = ran.version, ran.owner, None
    return again


def close_dangling(record: TurnRecord, why: Literal["interrupted", "cancelled", "ended"]) -> None:
    """Give every call without a final state one, and every call a tool message.

    ``started`` calls become ``unknown`` (nothing in memory says how they ended: the
    process running them stopped, or, ``cancelled``, the turn was cancelled while they ran
    elsewhere); calls still waiting for the client or an approval did not run, nor did
    approved calls whose resume ended before they started (:func:`wait_again`). So do the
    calls a version from before the ledger left without entry or result
    (:func:`_unrecorded`). Afterwards the turn's messages replay whole: each call of each
    model message has its tool message.
    """
    _legacy(record)
    record.tool_calls.extend(_unrecorded(record))
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
    _legacy(record)
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


#: What a call's ending consists of, as :func:`merge_closed` carries it between two copies.
_ENDING_KEYS = (
    "state",
    "outcome",
    "wasExecuted",
    "resultJson",
    "errorMessage",
    "isServerTool",
    # An approved call's run: its result or error, and that it was no longer the client's.
    "approvedResultJson",
    "approvedErrorMessage",
    "requiresClientExecution",
)


def merge_closed(stored: TurnRecord, ours: TurnRecord) -> TurnRecord:
    """What this process knows of a turn someone else closed, merged into the stored turn.

    A cancel request or a sweep ended the turn while its calls ran here: the stored status
    stands, and the progress and outcomes held here, which the stored copy lacks, win, save
    one: a call this run reads as lost (it took the turn over while the call ran elsewhere)
    keeps the outcome the run that ran it settled into the stored turn. But when another
    process ran the turn since (a resume retried after this process's lease ran out), that
    run's progress, text and stored answer stand, and this process only adds how the calls
    it ran ended. Either way a known outcome is never written over with ``unknown``.

    A model answer this run took after its last save is not part of the turn
    (:func:`_drop_late_answers`): the turn was closed as the stored copy has it, before the
    answer was on record, as a cancel in this process would have cut the model call short.
    """
    if stored.owner != ours.owner:
        _answers_follow(stored, _endings_into(stored, ours))
        return stored
    # A call runs only once its "started" is stored: one started here that the stored copy
    # never saw started was stopped by the failed save, before it ran.
    stored_started = {
        e["callId"] for e in stored.tool_calls if e["state"] == "started" or e.get("lost")
    }
    for entry in ours.tool_calls:
        if entry["state"] == "started" and entry["callId"] not in stored_started:
            entry["state"] = entry["outcome"] = "failed"
            entry["errorMessage"] = NOT_STARTED
    # This run's copy may still read a call lost whose outcome the run that ran it wrote
    # into the turn (:func:`carry_endings`) after this run's last save: that outcome stands.
    _answers_follow(ours, _endings_into(ours, stored, lost_only=True))
    _drop_late_answers(stored, ours)
    ours.status = stored.status
    ours.version = stored.version
    ours.lease_until = None
    ours.pending_calls = []
    ours.warnings.extend(w for w in stored.warnings if w not in ours.warnings)
    close_dangling(ours, "ended")
    return ours


def _drop_late_answers(stored: TurnRecord, ours: TurnRecord) -> None:
    """Take out of ``ours`` the model responses it took after its last save; note it if any.

    ``stored`` is this run's last save as whoever closed the turn left it, which only adds
    tool results (and call endings) to it: a model response of ``ours`` past the stored
    ones came after that save, when the turn was no longer this run's. Its text is no answer
    of the turn, and the calls it asked for never ran (a call runs only once its ``started``
    is saved): the response, its calls and their results go, with the answer this run made
    of it (its text, its stored answer). The outcomes of the calls on record stay, and so
    does the text this run kept of a response cut short (what it had streamed); the model
    call stays in ``model_calls`` (it was made, and cost tokens).
    """
    known = sum(1 for m in stored.messages if m.get("role") == "assistant")
    seen, late, messages = 0, set[str](), []
    for message in ours.messages:
        if message.get("role") == "assistant":
            seen += 1
            if seen > known:
                late.update(str(c["id"]) for c in message.get("tool_calls") or ())
                continue
        elif seen > known and message.get("tool_call_id") in late:
            continue
        messages.append(message)
    if seen <= known:
        return
    ours.messages = messages
    ours.tool_calls = [e for e in ours.tool_calls if e["callId"] not in late]
    ours.text = stored.text
    ours.result = stored.result
    ours.answers = {k: v for k, v in ours.answers.items() if k in stored.answers}
    ours.resume_key = stored.resume_key
    warning = LATE_ANSWER.format(status=stored.status)
    if warning not in ours.warnings:
        ours.warnings.append(warning)


def adopt_ending(stored: TurnRecord, ours: TurnRecord) -> None:
    """Give ``stored`` the ending ``ours`` (this process's copy, in ENDED_HERE) could not store.

    ``stored`` is the last checkpoint of the same run: each call that ended here keeps the
    outcome it had here (a call that ran and succeeded reads so, with its result, never as
    lost); a call ``stored`` does not hold as started never ran, and closes as not run. A
    resume that ran nothing left the turn as it found it (:func:`wait_again`): ``stored``
    becomes that, with the outcomes settled into it since.
    """
    if ours.status in ("pending", "interrupted"):  # waiting again (wait_again)
        again = copy.deepcopy(ours)
        carry_endings(again, stored)
        for name in (f.name for f in fields(TurnRecord) if f.name != "version"):
            setattr(stored, name, getattr(again, name))
        return
    _endings_into(stored, ours)
    if len(ours.model_calls) > len(stored.model_calls):
        stored.model_calls = list(ours.model_calls)
    stored.result = ours.result
    end(stored, ours.status)
    stored.warnings.extend(w for w in ours.warnings if w not in stored.warnings)


def carry_endings(into: TurnRecord, source: TurnRecord) -> bool:
    """Give the calls ``into`` reads as lost the endings ``source`` knows; True if any changed.

    For a turn that is still open under another run: only calls lost (``unknown`` after a
    crash, a takeover or a cancel) take an ending, never one that run may be running now. Its
    stored answers (its own, and those a retried resume replays) then list them so too.
    """
    changed = _endings_into(into, source, lost_only=True)
    _answers_follow(into, changed)
    return bool(changed)


def _endings_into(stored: TurnRecord, ours: TurnRecord, *, lost_only: bool = False) -> set[str]:
    """Give the calls ``stored`` lost (or never ended) the endings seen here; their ids."""
    ended = {e["callId"]: e for e in ours.tool_calls if e["state"] in FINAL and not e.get("lost")}
    changed = set()
    for entry in stored.tool_calls:
        mine = ended.get(entry["callId"])
        open_here = entry["state"] not in FINAL and not lost_only
        if mine is not None and (open_here or entry.get("lost")):
            entry.update({k: mine[k] for k in _ENDING_KEYS if k in mine})
            entry.pop("lost", None)
            changed.add(entry["callId"])
    return changed


def _answers_follow(record: TurnRecord, ids: set[str]) -> None:
    """The answers stored with ``record`` list the calls ``ids`` as its ledger now does."""
    if not ids:
        return
    entries = {e["callId"]: e for e in record.tool_calls if e["callId"] in ids}
    for answer in (record.result, *record.answers.values()):
        calls = answer.get("toolCalls") if answer is not None else None
        if answer is not None and isinstance(calls, list):
            answer["toolCalls"] = [_as_now(c, entries) for c in calls]


def _as_now(shown: Any, entries: dict[str, dict[str, Any]]) -> Any:
    """A call as an answer listed it, or as ``entries`` (its ledger now) has it."""
    call_id = shown.get("callId") if isinstance(shown, dict) else None
    return wire(entries[call_id]) if call_id in entries else shown


def close_pre_ledger(record: TurnRecord) -> None:
    """Close, as read, an ended turn a version from before the ledger left mid-batch.

    Such a version ended a turn (cancelled, or swept as interrupted) without an entry or a
    result for the calls of its last batch: they read lost, and the turn replays whole to the
    model, as :func:`close_dangling` closes them when a turn it left running ends now. An
    approved call it left running replays as it reads (:func:`_approvals_unrecorded_told`).
    """
    _approvals_unrecorded_told(record)
    if record.status not in OPEN and _unrecorded(record):
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


def _unrecorded(record: TurnRecord) -> list[dict[str, Any]]:
    """``started`` entries for the calls of the model's messages with neither entry nor result.

    Only a version from before the ledger stores a call so: it kept a batch's entries and
    results once the whole batch had returned, after the checkpoint of the model's message,
    its mark that the calls were starting. A turn it left mid-batch (its process killed or
    stopped, the turn cancelled) may have run any of them. The ledger keeps every call on
    record with its message, and answers each when the turn ends.
    """
    listed = {e["callId"] for e in record.tool_calls}
    listed.update(m.get("tool_call_id") for m in record.messages if m.get("role") == "tool")
    found: list[dict[str, Any]] = []
    for message in record.messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            if call["id"] in listed:
                continue
            listed.add(call["id"])
            function = call.get("function") or {}
            # Such a version handed every call of a batch to the server's executor, which may
            # have run it: a server tool's call, as its entry would have said.
            started = AgentToolCall(
                call["id"],
                str(function.get("name") or ""),
                str(function.get("arguments") or "{}"),
                is_server_tool=True,
            )
            # Never idempotent: a call that may have run is not run again.
            found.append(
                {
                    **wire_call(started),
                    "state": "started",
                    "outcome": "pending",
                    "idempotent": False,
                }
            )
    return found


def _legacy(record: TurnRecord) -> None:
    """Give a state to the calls of a turn stored (or answered) before the ledger existed."""
    calls = record.tool_calls
    if any("state" not in e for e in calls) or _copied_answers(calls):
        record.tool_calls = stated_calls(calls, waiting=record.status == "pending")


def stated_calls(calls: Sequence[dict[str, Any]], *, waiting: bool) -> list[dict[str, Any]]:
    """A turn's ledger with a ``state`` and ``outcome`` for the calls stored before it existed.

    Such a turn kept neither. The client's answer to a hand-off went into a second entry of
    the call, which replaces the first here. A call gated by approval (an MCP tool under an
    approval policy) was a hand-off whose result is its approval request, and its approved run
    was kept beside the answer: it reads ``awaiting_approval`` while the turn waits, and never
    ``succeeded`` without the tool's own result on record. ``waiting``: the turn is pending.

    A version from before the ledger that answered a turn the ledger left waiting kept its
    answer so too, a copy of the waiting entry (its ``state`` copied with it) plus the answer:
    that copy is read as such an answer, and takes the waiting entry's place, never listed
    beside it still waiting. Other entries with a state are returned as they are; the rest
    are copies.
    """
    answers = {e["callId"]: e for e in calls if "state" not in e and "clientResult" in e}
    copied = _copied_answers(calls)
    placed: set[str] = set()
    stated: list[dict[str, Any]] = []
    for entry in calls:
        if entry["callId"] in copied:
            if entry["callId"] not in placed:
                placed.add(entry["callId"])
                stated.append(_copied_answer(copied[entry["callId"]], waiting))
            continue
        if "state" in entry:
            stated.append(entry)
            continue
        entry = answers.get(entry["callId"], entry)
        if entry["callId"] in placed:
            continue  # the answer, already in its hand-off's place
        placed.add(entry["callId"])
        stated.append(_legacy_entry(entry, waiting))
    return stated


def _copied_answers(calls: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The answers a version from before the ledger appended to the ledger's calls, by id.

    Such an answer repeats a call already listed and still reads as waiting (it copied the
    waiting entry), yet holds the client's answer: the ledger never keeps one so (accepting
    an answer moves the call on in the same write), and lists each call once.
    """
    listed: set[str] = set()
    copied: dict[str, dict[str, Any]] = {}
    for entry in calls:
        call_id = entry["callId"]
        if call_id in listed and entry.get("state") in _WAITING and "clientResult" in entry:
            copied[call_id] = entry
        listed.add(call_id)
    return copied


def _copied_answer(copy: dict[str, Any], waiting: bool) -> dict[str, Any]:
    """A pre-ledger answer copied from a waiting ledger entry, read as that version kept it."""
    answer = {k: v for k, v in copy.items() if k not in ("state", "outcome")}
    return _legacy_entry(answer, waiting, gated=copy["state"] == "awaiting_approval")


def _legacy_entry(entry: dict[str, Any], waiting: bool, *, gated: bool = False) -> dict[str, Any]:
    """One call as a pre-ledger turn kept it, with the state that says what happened.

    ``gated``: the call is known to wait for approval whatever the entry shows.
    """
    entry = dict(entry)
    name = str(entry.get("name") or "")
    gated = gated or "approved" in entry or _legacy_approval_request(entry)
    if gated:
        entry["wasExecuted"] = False  # until its approved run is on record
    if "approved" in entry:  # the user answered, and that version settled the answer
        if entry["approved"] is not True:
            state: CallState = "denied"
            entry["errorMessage"] = DENIED.format(name=name)
        elif entry.get("approvedResultJson") is not None:
            state = "succeeded"
            entry["wasExecuted"] = True
        else:
            state = "failed"
            entry["errorMessage"] = entry.get("approvedErrorMessage") or NOT_STARTED
    elif gated and "clientResult" in entry:  # answered, but its run is not on record
        answer = ToolResultInput(
            entry["callId"], str(entry["clientResult"]), bool(entry.get("clientError"))
        )
        if is_approval(answer):
            state = "unknown"
            entry["approved"] = True  # so a retry of that answer lists it, as the ledger's do
            entry["errorMessage"] = APPROVED_UNRECORDED
        else:
            state = "denied"
            entry["errorMessage"] = DENIED.format(name=name)
    elif gated:
        state = "awaiting_approval" if waiting else "denied"
        if not waiting:
            entry["errorMessage"] = NOT_APPROVED.format(name=name)
    elif "clientResult" in entry:
        state = "failed" if entry.get("clientError") else "succeeded"
    elif entry.get("wasExecuted") and entry.get("requiresClientExecution"):
        state = "awaiting_client" if waiting else "failed"
        if not waiting:
            entry["errorMessage"] = NOT_ANSWERED
            entry["wasExecuted"] = False
    elif entry.get("errorMessage") or not entry.get("wasExecuted"):
        state = "failed"
    else:
        state = "succeeded"
    entry["state"] = state
    entry["outcome"] = "pending" if state in ("awaiting_client", "awaiting_approval") else state
    return entry


def _legacy_approval_request(entry: dict[str, Any]) -> bool:
    """Whether a pre-ledger hand-off is an MCP tool's approval request (not the client's tool).

    Its request names the call's own tool as the ``action`` (``request_user_approval``'s names
    whatever the model asks about), as every version that gated calls wrote it.
    """
    if not (entry.get("wasExecuted") and entry.get("requiresClientExecution")):
        return False
    name = str(entry.get("name") or "")
    if name.casefold() == APPROVAL_TOOL:
        return False
    try:
        request = json.loads(entry.get("resultJson") or "")
    except ValueError:
        return False
    return (
        isinstance(request, dict)
        and request.get("kind") == "approval_request"
        and request.get("action") == name
    )


def _client_content(entry: dict[str, Any]) -> str:
    if entry["state"] == "denied":
        return json.dumps({"error": entry["errorMessage"]})
    return str(entry["clientResult"])
