"""Two copies of one turn made one: the ending of a turn closed elsewhere, or stored late (§14).

A turn is closed by a cancel or a sweep while its calls run in another process, or ended in
a process that could not store it; each copy knows part of how the calls ended.
:func:`merge_closed` and :func:`adopt_ending` make the stored turn tell all of it, and
:func:`carry_endings` gives a turn still open the endings of calls it reads as lost, and
:func:`wait_again` puts back, with them, a turn whose resume ended before any call ran.
"""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

from aptix.reasoner.call_states import FINAL, LATE_ANSWER, NOT_STARTED
from aptix.reasoner.ledger import close_dangling, end, wire
from aptix.reasoner.record import TurnRecord

__all__ = ["adopt_ending", "carry_endings", "merge_closed", "wait_again"]


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
