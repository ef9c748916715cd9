"""Turn records: what one instruction did, kept for resuming, for checkpoints and for audit."""

from __future__ import annotations

import asyncio
import copy
from datetime import datetime
from typing import Protocol

from aptix.db.types import utc_now
from aptix.errors import NotFoundError
from aptix.reasoner.claims import Decide, Plan, cancel_turn, mark_dead
from aptix.reasoner.interruptions import FOUND_AT_START, FOUND_BY_A_REQUEST, log_interrupted
from aptix.reasoner.merging import carry_endings, merge_closed
from aptix.reasoner.record import OPEN, TurnRecord, TurnStatus
from aptix.sessions.access import owned_session
from aptix.sessions.manager import SessionManager
from aptix.sessions.models import AgentSession

__all__ = ["OPEN", "InMemoryTurnStore", "TurnRecord", "TurnStatus", "TurnStore"]


class TurnStore(Protocol):
    """Persistence of turn records, scoped to the caller's org.

    ``claim`` is the only way a turn starts or resumes: it reads the session's latest turns,
    lets ``decide`` choose, and writes the choice, all under the session's lock in one
    transaction, so two requests (or two processes) never both win.
    """

    async def claim(
        self, session_id: str, org: str, user: str, decide: Decide, *, history: int
    ) -> tuple[AgentSession, Plan, list[TurnRecord]]:
        """Apply ``decide`` to the latest turn of ``user``'s session; store the outcome.

        Returns the session, the plan and at most ``history`` ended turns (completed, failed,
        cancelled or interrupted) before the claimed one, oldest first.
        :class:`NotFoundError` when the session is not the caller's (nothing is written then).
        """
        ...

    async def save(self, turn: TurnRecord) -> bool:
        """Checkpoint a running turn (bumping its version).

        False when it is no longer this run's: cancelled, interrupted or taken over. Outcomes
        another process settled into it while it still runs here (``settle``) are taken into
        ``turn`` first (``merging.carry_endings``).
        """
        ...

    async def read_session(self, session_id: str, org: str) -> AgentSession | None:
        """The turn's session as stored now (its mode and active workflow); one read."""
        ...

    async def heartbeat(self, turn: TurnRecord, until: datetime) -> bool:
        """Extend the lease of a running turn held by ``turn.owner``."""
        ...

    async def status(self, turn: TurnRecord) -> TurnStatus | None:
        """The status stored for ``turn`` now; None when it is not stored."""
        ...

    async def settle(self, turn: TurnRecord) -> TurnRecord | None:
        """Merge what this run knows into a turn someone else closed or took over.

        The stored status stands. A closed turn takes what ran here (``merge_closed``); a
        turn another run holds open takes only the outcomes of the calls it reads as lost
        (``merging.carry_endings``), and that run adopts them at its next save. Returns the
        turn as stored then; None when it is unknown or still runs under this very run.
        """
        ...

    async def cancel(self, session_id: str, org: str, turn_id: str) -> TurnRecord:
        """Mark a running or pending turn ``cancelled``.

        :class:`NotFoundError` for an unknown turn, :class:`TurnError` for a finished one.
        """
        ...

    async def sweep(self) -> int:
        """Mark running turns whose process is gone ``interrupted``; return how many."""
        ...

    async def list_turns(
        self, session_id: str, org: str, *, limit: int | None = None, before: int | None = None
    ) -> list[TurnRecord]:
        """The session's turns, oldest first: the newest ``limit`` with ``seq < before``."""
        ...


class InMemoryTurnStore:
    """Turns in a dict: for tests, benchmarks and embedding without persistence."""

    def __init__(self, sessions: SessionManager) -> None:
        self._sessions = sessions
        self._turns: dict[str, list[TurnRecord]] = {}
        self._lock = asyncio.Lock()

    async def claim(
        self, session_id: str, org: str, user: str, decide: Decide, *, history: int
    ) -> tuple[AgentSession, Plan, list[TurnRecord]]:
        """Apply ``decide`` to the latest turn, as the SQL store does under its lock."""
        session = await owned_session(self._sessions, session_id, org, user)
        if session is None:
            raise NotFoundError(f"Unknown session '{session_id}'.")
        async with self._lock:
            turns = self._turns.setdefault(session_id, [])
            recent = [_copy(t) for t in turns[-(history + 1) :] if t.org == org]
            plan = decide(recent[-1] if recent else None)
            for record in plan.writes():
                if not (plan.new and record is plan.run):
                    record.version += 1
                self._put(turns, record)
            run_id = plan.run.id if plan.run else None
            done = [t for t in recent if t.status not in OPEN and t.id != run_id]
        if plan.interrupted is not None:
            log_interrupted([plan.interrupted], FOUND_BY_A_REQUEST)
        return session, plan, done[-history:] if history else []

    async def save(self, turn: TurnRecord) -> bool:
        """Save ``turn`` unless it changed since it was read or no longer runs."""
        for stored in self._turns.get(turn.session_id, []):
            if stored.id == turn.id:
                if stored.status == "running" and stored.owner == turn.owner:
                    # Still this run's: outcomes settled into it meanwhile are taken first.
                    carry_endings(turn, stored)
                    turn.version = max(turn.version, stored.version)
                if stored.version != turn.version or stored.status != "running":
                    return False
                turn.version += 1
                turn.updated_at = utc_now()
                if turn.status != "running":
                    turn.lease_until = None
                self._put(self._turns[turn.session_id], turn)
                return True
        return False

    async def read_session(self, session_id: str, org: str) -> AgentSession | None:
        """The session as its manager holds it now."""
        return await self._sessions.get_session(session_id, org)

    async def settle(self, turn: TurnRecord) -> TurnRecord | None:
        """Merge ``turn`` into the closed turn stored under its id."""
        async with self._lock:
            turns = self._turns.get(turn.session_id, [])
            for stored in turns:
                if stored.id == turn.id:
                    if stored.status in OPEN:
                        if stored.status == "running" and stored.owner == turn.owner:
                            return None  # still this run's: a save, not a settlement
                        merged = _copy(stored)
                        if not carry_endings(merged, turn):
                            return merged
                    else:
                        merged = merge_closed(_copy(stored), _copy(turn))
                    merged.version += 1
                    merged.updated_at = utc_now()
                    self._put(turns, merged)
                    return _copy(merged)
        return None

    async def heartbeat(self, turn: TurnRecord, until: datetime) -> bool:
        """Extend the lease while the turn still runs under the same owner."""
        for stored in self._turns.get(turn.session_id, []):
            if stored.id == turn.id and stored.status == "running" and stored.owner == turn.owner:
                stored.lease_until = until
                return True
        return False

    async def status(self, turn: TurnRecord) -> TurnStatus | None:
        """The status stored for ``turn`` now."""
        for stored in self._turns.get(turn.session_id, []):
            if stored.id == turn.id:
                return stored.status
        return None

    async def cancel(self, session_id: str, org: str, turn_id: str) -> TurnRecord:
        """Mark an open turn ``cancelled``."""
        async with self._lock:
            turns = self._turns.get(session_id, [])
            for stored in turns:
                if stored.id == turn_id and stored.org == org:
                    record = cancel_turn(_copy(stored))
                    self._put(turns, record)
                    return _copy(record)
        raise NotFoundError(f"Unknown turn '{turn_id}' in session '{session_id}'.")

    async def sweep(self) -> int:
        """Mark running turns of dead processes ``interrupted``."""
        marked = []
        for turns in self._turns.values():
            for i, stored in enumerate(turns):
                if mark_dead(stored, utc_now()):
                    stored.version += 1
                    turns[i] = stored
                    marked.append(stored)
        log_interrupted([t for t in marked if t.status == "interrupted"], FOUND_AT_START)
        return len(marked)

    async def list_turns(
        self, session_id: str, org: str, *, limit: int | None = None, before: int | None = None
    ) -> list[TurnRecord]:
        """The session's turns, oldest first."""
        turns = [
            _copy(t)
            for t in self._turns.get(session_id, [])
            if t.org == org and (before is None or t.seq < before)
        ]
        return turns[-limit:] if limit else turns

    @staticmethod
    def _put(turns: list[TurnRecord], record: TurnRecord) -> None:
        for i, stored in enumerate(turns):
            if stored.id == record.id:
                turns[i] = _copy(record)
                return
        turns.append(_copy(record))


def _copy(turn: TurnRecord) -> TurnRecord:
    # Stored records must not change behind the store's back (the SQL store copies too).
    return copy.deepcopy(turn)
