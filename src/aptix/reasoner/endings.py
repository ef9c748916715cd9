"""How a running turn is saved and how it ends: handed off, finished, failed or cancelled.

The status each ending gives is set through :mod:`aptix.reasoner.ledger`, which also closes
the calls left without an outcome; an ending written over a turn someone else closed merges
what this process knows into it (:meth:`TurnStore.settle`), so no outcome is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import anyio

from aptix.db.outage import (
    database_error_code,
    database_refusal,
    is_database_outage,
    waited_for_lock,
)
from aptix.db.outage_log import OutageLog, RefusalLog
from aptix.db.types import utc_now
from aptix.errors import LlmError
from aptix.llm.formats import FORMAT_UNMET, answer_problem, strict_schema
from aptix.logger import AdminLogger, LogLevel, mark_logged
from aptix.reasoner import ledger, merging
from aptix.reasoner.claims import CALLS_RAN, CANCELLED
from aptix.reasoner.context import ContextOverflowError
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.result import ERROR_CODE, EventSink, TurnKind, TurnResult
from aptix.reasoner.running import RunningTurn, TurnLost, emit, keep_streamed, result_of
from aptix.reasoner.turns import TurnStore
from aptix.urls import mask_credentials

__all__ = [
    "CALLS_RAN",
    "ERROR_CODE",
    "SAVE_RETRY_SECONDS",
    "TAKEN_OVER",
    "UNSETTLED",
    "TurnEndings",
]


#: How a turn's warning names the failure that broke it, by its code.
_CAUSES = {
    "database_unavailable": "the database was unavailable",
    "database_refused": "the database refused a statement",
}

_UNAVAILABLE_TAG = "[AgentReasoner_Database__Unavailable]"
_REFUSED_TAG = "[AgentReasoner_Database__Refused]"
_ENDING_TURNS = "ending the turns that meet it as errors, their calls recorded,"

#: Pauses between the attempts to store the ending of a turn a database outage broke (3.5 s
#: in all): the request that ran it answers after them.
SAVE_RETRY_SECONDS = (0.5, 1.0, 2.0)


def _worth_retrying(failed: BaseException) -> bool:
    """Whether a save that failed with ``failed`` is tried again after a pause.

    Only for an outage that fails at once: a save that met another process's SQLite write
    lock has waited the whole busy timeout already, and each retry would wait it again.
    """
    return is_database_outage(failed) and not waited_for_lock(failed)


#: The answer of a request whose turn another process took over while it ran here.
TAKEN_OVER = (
    "Taken over: this turn's lease ran out while this process ran it, and another process now "
    "runs it (its request was sent again there). The calls that ran here are recorded with the "
    "outcomes listed; read the session for the turn's answer."
)
#: The answer of a request whose turn was closed elsewhere when what ran here was not recorded.
UNSETTLED = (
    "This turn was closed elsewhere while it ran here, and the outcomes of the calls that ran "
    "here could not be recorded; they are listed here only. Check whether they took effect."
)


class TurnEndings:
    """Checkpoints and endings of turns, each one transaction of the turn store."""

    def __init__(self, turns: TurnStore, logger: AdminLogger) -> None:
        self._turns = turns
        self._logger = logger
        # The turns a database failure ends are logged once per outage (or reason), as the
        # requests the HTTP API answers 503 are: not one traceback per turn.
        self._outages = OutageLog(tag=_UNAVAILABLE_TAG, answer=_ENDING_TURNS)
        self._refusals = RefusalLog(tag=_REFUSED_TAG, answer=_ENDING_TURNS)

    async def checkpoint(self, turn: RunningTurn) -> None:
        """Save the running turn; :class:`TurnLost` when someone else closed it."""
        # Shielded, so a cancellation never leaves the stored version unknown: cancelled()
        # waits for this save before writing the cancelled status.
        turn.saving = asyncio.ensure_future(self._turns.save(turn.record))
        if not await asyncio.shield(turn.saving):
            raise TurnLost

    async def hand_off(
        self, turn: RunningTurn, pending: list[dict[str, Any]], on_event: EventSink | None
    ) -> TurnResult:
        """End the request with client calls pending."""
        record = turn.record
        ledger.end(record, "pending")
        record.pending_calls = [ledger.wire(e) for e in pending]
        result = result_of(turn, "tool-only")
        await emit(on_event, "client_calls_pending", {"toolCalls": record.pending_calls})
        return await self.close(turn, result, on_event)

    async def finish(self, turn: RunningTurn, on_event: EventSink | None) -> TurnResult:
        """End the turn with the model's answer (an error if it misses a strict format)."""
        record = turn.record
        last = record.messages[-1] if record.messages else {}
        final = last.get("content")
        problem = None
        # A refusal (the model declining, OpenAI's message.refusal) is no answer to check: it
        # is passed on as the refusal it is, as OpenAI does.
        if strict_schema(record.response_format) is not None and not last.get("refusal"):
            # In a thread: the caller's schema and patterns run for a time only they bound,
            # and the event loop serves every other request meanwhile.
            problem = await anyio.to_thread.run_sync(answer_problem, record.response_format, final)
        if problem is not None:
            # Not ``completed``: a client asking for a strict schema parses the answer, and
            # is told why it cannot rather than handed text its parser fails on.
            return await self.stopped(turn, problem, FORMAT_UNMET, on_event)
        ledger.end(turn.record, "completed")
        kind: TurnKind = "ok" if turn.record.text else "empty"
        return await self.close(turn, result_of(turn, kind), on_event)

    async def stopped(
        self, turn: RunningTurn, reason: str, code: str, on_event: EventSink | None
    ) -> TurnResult:
        """End the turn without an answer: a limit stopped it, or its answer missed the format."""
        # Not ``completed`` with kind ``ok``: the last text, if any, came beside tool calls
        # and is no answer. An ``error`` with its own code, so the answer, the stored turn and
        # the note replayed to the model (context.ending_note) all say the turn was cut off;
        # the reason stays a warning too (DESIGN §7). Final even for a resume: what ran is on
        # record, and the same results retried would only hit the same limit.
        ledger.end(turn.record, "error", reason)
        result = result_of(turn, "error", error=reason)
        return await self.close(turn, result, on_event, error_code=code)

    async def overflow(
        self, turn: RunningTurn, exc: ContextOverflowError, on_event: EventSink | None
    ) -> TurnResult:
        """End the turn whose current messages alone exceed the context budget."""
        # Final even for a resume: retrying the same oversized turn cannot succeed.
        self._logger.add_custom_event(
            LogLevel.WARNING,
            "[AgentReasoner_ContextBudget]",
            str(exc),
            ("SessionId", turn.session.id),
            ("ConversationId", turn.record.id),
        )
        ledger.end(turn.record, "error")
        result = result_of(turn, "error", error=str(exc))
        return await self.close(turn, result, on_event, error_code="context_overflow")

    async def fail(
        self, turn: RunningTurn, exc: LlmError, on_event: EventSink | None
    ) -> TurnResult:
        """End this attempt with the model's error (a resume stays retryable)."""
        # The model endpoint failing (down, 401, timeout) is an expected error: one line, no
        # traceback, so a log is not flooded with the same frames for every turn.
        self._logger.add_error(
            "[AgentReasoner_ExecuteAsync__Exception]",
            mask_credentials(str(exc)),
            ("SessionId", turn.session.id),
            ("ConversationId", turn.record.id),
            ("ErrorCode", exc.code),  # model_error, or the limits that refused the call
        )
        result = dataclasses.replace(result_of(turn, "error", error=str(exc)), error_code=exc.code)
        if turn.resume_key is None:
            ledger.end(turn.record, "error")
            return await self.close(turn, result, on_event, error_code=exc.code)
        # A failed resume attempt is not the turn's answer: the turn waits again, with the
        # client's results already stored, so the same toolResults retried continue from them.
        # The retry of a resume a crash cut short found it interrupted, its calls no longer
        # pending: it stays so (review s4 F1), as "pending" with nothing pending would refuse
        # those results and every new instruction alike.
        found = turn.found.status if turn.found is not None else None
        ledger.end(turn.record, "interrupted" if found == "interrupted" else "pending")
        await self.checkpoint(turn)
        await emit(on_event, "turn_finished", result.to_wire())
        return result

    async def cancelled(self, turn: RunningTurn, in_thread: Callable[[str], bool]) -> TurnResult:
        """Record the turn as ``cancelled`` (after any save already under way).

        Calls that finished keep their outcomes; calls still running were stopped, or left
        running in a thread (``abandoned``).
        """
        if turn.saving is not None:
            with contextlib.suppress(Exception):
                await turn.saving
        keep_streamed(turn)
        record = turn.record
        ledger.stopped_by_cancel(record, in_thread)
        ledger.end(record, "cancelled", CANCELLED)
        result = result_of(turn, "cancelled")
        record.result = _stored(result)
        with contextlib.suppress(Exception):
            if not await self._turns.save(record):  # already closed by whoever cancelled it
                settled = await self._turns.settle(record)
                if settled is not None and _late_answer_dropped(record, settled):
                    # Cancelled elsewhere before this run saved its model answer: the
                    # answer says what the turn holds, as the record does.
                    turn.record, turn.finish_reason = settled, None
                    result = result_of(turn, "cancelled")
                record = settled or record
        # The save or the settlement may have taken an outcome another process settled into
        # the turn (a call it ran before this run took the turn over): the answer says it too.
        return _as_recorded(record, result)

    async def shut_down(self, turn: RunningTurn, in_thread: Callable[[str], bool]) -> None:
        """The process is stopping with the turn unfinished: leave it as a crash would.

        Nobody cancelled it, so it is not ``cancelled``: it stays ``running`` as after
        kill -9 (a retried resume takes it over, a new instruction records it
        ``interrupted``), but its lease ends now rather than in up to a lease's length, and
        the calls this process stopped say so.
        """
        if turn.saving is not None:
            with contextlib.suppress(Exception):
                await turn.saving
        keep_streamed(turn)
        record = turn.record
        ledger.stopped_by_cancel(record, in_thread, shutdown=True)
        record.lease_until = utc_now()
        with contextlib.suppress(Exception):
            await self._turns.save(record)

    async def lost(self, turn: RunningTurn) -> TurnResult:
        """The turn was closed or taken over elsewhere while it ran here: keep what ran here.

        The outcomes of the calls that ran here go on its record (:meth:`TurnStore.settle`),
        also while another process runs it (it took the turn over: a resume retried after
        this run's lease ran out). The answer is the turn as it now stands: another process's
        answer when it ran the turn to its end, an error saying another process runs it now
        (with the calls that ran here and their outcomes), or the ending whoever closed it
        gave (cancelled, or an error saying it was interrupted); never a cancel nobody asked
        for.
        """
        merged = await self._settle(turn.record)
        if merged is None:  # not stored, or the database did not answer: nothing recorded
            return result_of(turn, "error", error=UNSETTLED)
        if merged.status == "running":  # another run holds it
            return result_of(turn, "error", error=TAKEN_OVER)
        if merged.status in ("completed", "pending") and merged.result is not None:
            return TurnResult.from_wire(merged.result)
        if _late_answer_dropped(turn.record, merged):
            turn.finish_reason = None  # the finish of an answer the turn does not hold
        turn.record = merged
        if merged.status == "cancelled":
            return result_of(turn, "cancelled")
        return result_of(turn, "error", error=merged.warnings[-1] if merged.warnings else None)

    async def _settle(self, record: TurnRecord) -> TurnRecord | None:
        """Settle ``record``, retried through a short database outage; None if it could not."""
        for pause in (*SAVE_RETRY_SECONDS, None):
            try:
                return await self._turns.settle(record)
            except Exception as failed:
                if pause is None or not _worth_retrying(failed):
                    return None
            # The outcomes are known only here: a short outage should not lose them.
            await asyncio.sleep(pause)
        return None

    async def broken(self, turn: RunningTurn, exc: BaseException) -> TurnResult:
        """End at once a turn whose run failed unexpectedly (a database outage, a bug).

        Its status says so truthfully. A resume a database failure cuts short before any of
        its calls ran is answered "retry", so its turn waits again as the resume found it
        (:func:`merging.wait_again`), as after a failed model call: the retry continues it.
        A database outage gets the save retried for a few seconds
        (:data:`SAVE_RETRY_SECONDS`); if even then it cannot be stored, the claims and reads
        of this process treat the turn as ended as it ended here, its calls with the
        outcomes they had here (no waiting for its lease). Returns the turn's answer, which
        says when calls of the request ran (:attr:`RunningTurn.calls_ran`).
        """
        code = database_error_code(exc) or "internal_error"
        self._log_broken(turn, exc, code)
        mark_logged(exc)  # re-raised: the HTTP layer answers it without a second traceback
        cause = _CAUSES.get(code, "an unexpected error")
        warning = f"Ended because {cause} ({type(exc).__name__}); see the server log."
        if turn.calls_ran:
            warning += f" {CALLS_RAN}"
        if turn.saving is not None:
            with contextlib.suppress(Exception):
                await turn.saving
        if turn.found is not None and not turn.calls_ran and code in _CAUSES:
            # A database failure (not a bug, which the same request would meet again): the
            # answer asks for a retry, and the turn waits for it with nothing run (review s1 F1).
            result = dataclasses.replace(result_of(turn, "error", error=warning), error_code=code)
            turn.record = merging.wait_again(turn.found, turn.record)
        else:
            keep_streamed(turn)
            ledger.end(turn.record, "error", warning)
            result = dataclasses.replace(result_of(turn, "error", error=warning), error_code=code)
            turn.record.result = _stored(result)
        await self._keep(turn.record)
        return result

    async def _keep(self, record: TurnRecord) -> None:
        """Store how a broken run left ``record``, through a short outage; else keep it here."""
        for pause in (*SAVE_RETRY_SECONDS, None):
            try:
                if not await self._turns.save(record):
                    await self._turns.settle(record)
                return
            except Exception as failed:
                if pause is None or not _worth_retrying(failed):
                    break
            # The calls' outcomes are known only here: a short outage should not lose them.
            await asyncio.sleep(pause)
        ledger.ENDED_HERE[record.id] = copy.deepcopy(record)

    def _log_broken(self, turn: RunningTurn, exc: BaseException, code: str) -> None:
        """Log a bug with its traceback; a database failure once while it lasts."""
        ids = (("SessionId", turn.session.id), ("ConversationId", turn.record.id))
        if code == "database_unavailable":
            self._outages.failed(exc)
        elif code == "database_refused":
            self._refusals.refused(database_refusal(exc) or type(exc).__name__)
        else:
            self._logger.add_exception("[AgentReasoner_ExecuteAsync__Exception]", exc, *ids)
            return
        # Expected while the database fails: the turn's record says how it ended.
        self._logger.trace(f"turn {turn.record.id} ended: {code}", *ids)

    async def close(
        self,
        turn: RunningTurn,
        result: TurnResult,
        on_event: EventSink | None,
        *,
        error_code: str | None = None,
    ) -> TurnResult:
        """Store the turn's outcome (and, for a resume, the answer a retry replays)."""
        record = turn.record
        if error_code is not None:  # the span's error.type, as the record's
            result = dataclasses.replace(result, error_code=error_code)
        record.result = _stored(result)
        if turn.resume_key is not None:
            record.answers[turn.resume_key] = record.result
            record.resume_key = None
        await self.checkpoint(turn)
        # The save may have taken outcomes another process settled into the turn meanwhile
        # (a call it ran before this run took the turn over): the answer says them too.
        result = _as_recorded(record, result)
        answer = result.to_wire()
        self._logger.trace(
            f"turn {record.id} {result.kind}",
            ("SessionId", turn.session.id),
            ("ConversationId", record.id),
        )
        await emit(on_event, "turn_finished", answer)
        return result


def _stored(result: TurnResult) -> dict[str, Any]:
    """``result``'s answer as the turn's record keeps it: the code on an error ending only."""
    # Read by the sessions API (the turn's error.code) and replayed as the answer; the other
    # endings stay stored as they always were.
    answer = result.to_wire()
    if answer[ERROR_CODE] is None:
        del answer[ERROR_CODE]
    return answer


def _late_answer_dropped(ours: TurnRecord, merged: TurnRecord) -> bool:
    """Whether ``merged`` (the turn closed elsewhere) left out a model answer ``ours`` took."""

    def answers(record: TurnRecord) -> int:
        return sum(1 for m in record.messages if m.get("role") == "assistant")

    return answers(merged) < answers(ours)


def _as_recorded(record: TurnRecord, result: TurnResult) -> TurnResult:
    """``result`` with its calls as ``record``'s ledger has them now."""
    entries = {e["callId"]: e for e in record.tool_calls}
    calls = tuple(
        ledger.wire(entries[c["callId"]]) if c.get("callId") in entries else c
        for c in result.tool_calls
    )
    return result if calls == result.tool_calls else dataclasses.replace(result, tool_calls=calls)
