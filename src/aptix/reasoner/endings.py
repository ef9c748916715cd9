"""How a running turn is saved and how it ends: handed off, finished, failed or cancelled."""

from __future__ import annotations

import asyncio
import contextlib

from aptix.errors import LlmError
from aptix.logger import AdminLogger, LogLevel
from aptix.reasoner.context import ContextOverflowError
from aptix.reasoner.result import EventSink, TurnKind, TurnResult
from aptix.reasoner.running import RunningTurn, TurnLost, emit, result_of
from aptix.reasoner.tool_batch import wire_call
from aptix.reasoner.turns import TurnStore
from aptix.tools.context import AgentToolCall
from aptix.urls import mask_credentials

__all__ = ["TurnEndings"]


class TurnEndings:
    """Checkpoints and endings of turns, each one transaction of the turn store."""

    def __init__(self, turns: TurnStore, logger: AdminLogger) -> None:
        self._turns = turns
        self._logger = logger

    async def checkpoint(self, turn: RunningTurn) -> None:
        """Save the running turn; :class:`TurnLost` when someone else closed it."""
        # Shielded, so a cancellation never leaves the stored version unknown: cancelled()
        # waits for this save before writing the cancelled status.
        turn.saving = asyncio.ensure_future(self._turns.save(turn.record))
        if not await asyncio.shield(turn.saving):
            raise TurnLost

    async def hand_off(
        self, turn: RunningTurn, pending: list[AgentToolCall], on_event: EventSink | None
    ) -> TurnResult:
        """End the request with client calls pending."""
        record = turn.record
        record.status = "pending"
        record.pending_calls = [wire_call(c) for c in pending]
        result = result_of(turn, "tool-only", [*turn.executed, *record.pending_calls])
        await emit(on_event, "client_calls_pending", {"toolCalls": record.pending_calls})
        return await self.close(turn, result, on_event)

    async def finish(self, turn: RunningTurn, on_event: EventSink | None) -> TurnResult:
        """End the turn with the model's answer."""
        turn.record.status = "completed"
        turn.record.pending_calls = []
        kind: TurnKind = "ok" if turn.record.text else "empty"
        return await self.close(turn, result_of(turn, kind, turn.executed), on_event)

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
        turn.record.status = "error"
        result = result_of(turn, "error", turn.executed, error=str(exc))
        return await self.close(turn, result, on_event)

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
        )
        result = result_of(turn, "error", turn.executed, error=str(exc))
        if turn.resume_key is None:
            turn.record.status = "error"
            return await self.close(turn, result, on_event)
        # A failed resume attempt is not the turn's answer: the turn waits again, with the
        # client's results already stored, so the same toolResults retried continue from them.
        turn.record.status = "pending"
        await self.checkpoint(turn)
        await emit(on_event, "turn_finished", result.to_wire())
        return result

    async def cancelled(self, turn: RunningTurn) -> TurnResult:
        """Record the turn as ``cancelled`` (after any save already under way)."""
        if turn.saving is not None:
            with contextlib.suppress(Exception):
                await turn.saving
        record = turn.record
        record.status = "cancelled"
        record.pending_calls = []
        record.warnings.append("Cancelled before it finished.")
        result = result_of(turn, "cancelled", turn.executed)
        record.result = result.to_wire()
        with contextlib.suppress(Exception):  # already closed by whoever cancelled it
            await self._turns.save(record)
        return result

    async def close(
        self, turn: RunningTurn, result: TurnResult, on_event: EventSink | None
    ) -> TurnResult:
        """Store the turn's outcome (and, for a resume, the answer a retry replays)."""
        record = turn.record
        record.result = result.to_wire()
        if turn.resume_key is not None:
            record.answers[turn.resume_key] = record.result
            record.resume_key = None
        await self.checkpoint(turn)
        self._logger.trace(
            f"turn {record.id} {result.kind}",
            ("SessionId", turn.session.id),
            ("ConversationId", record.id),
        )
        await emit(on_event, "turn_finished", record.result)
        return result
