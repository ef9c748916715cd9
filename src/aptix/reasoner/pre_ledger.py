"""Turns stored before the ledger existed, read as the ledger would have kept them (§14).

Such versions kept no ``state`` nor ``outcome`` for a call, appended a client's answer as a
second entry of its call, and stored a batch's entries only once the whole batch returned.
Every read of a stored turn goes through :func:`legacy` first, so the ledger sees only calls
with a state.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from aptix.reasoner.call_states import (
    APPROVAL_TOOL,
    APPROVED_UNRECORDED,
    DENIED,
    NOT_ANSWERED,
    NOT_APPROVED,
    NOT_STARTED,
    WAITING,
    CallState,
    is_approval,
)
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.result import ToolResultInput
from aptix.reasoner.tool_batch import wire_call
from aptix.tools.context import AgentToolCall

__all__ = ["legacy", "stated_calls", "unrecorded"]


def unrecorded(record: TurnRecord) -> list[dict[str, Any]]:
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


def legacy(record: TurnRecord) -> None:
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
        if call_id in listed and entry.get("state") in WAITING and "clientResult" in entry:
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
