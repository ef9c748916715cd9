"""Turn records: what one instruction did, kept for resuming and for audit."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from aptix.db.types import utc_now
from aptix.llm.types import Message

__all__ = ["InMemoryTurnStore", "TurnRecord", "TurnStatus", "TurnStore"]

TurnStatus = Literal["running", "pending", "completed", "error"]


@dataclass(slots=True)
class TurnRecord:
    """One turn of a session.

    ``messages`` holds the turn's non-system messages (the instruction, the model's messages
    and tool results) so that later turns can replay the transcript. ``pending_calls`` are
    the client-final calls waiting for results; ``answers`` maps each answered set of call
    ids to the response it produced, so a resume posted twice returns the first outcome.
    """

    id: str
    session_id: str
    org: str
    user: str
    seq: int
    instruction: str | None
    status: TurnStatus = "running"
    messages: list[Message] = field(default_factory=list)
    pending_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    model_calls: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    text: str | None = None
    result: dict[str, Any] | None = None
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    created_at: datetime = field(default_factory=utc_now)
    updated_at: datetime = field(default_factory=utc_now)
    version: int = 1


class TurnStore(Protocol):
    """Persistence of turn records, scoped to the caller's org."""

    async def list_turns(self, session_id: str, org: str) -> list[TurnRecord]:
        """The session's turns, oldest first."""
        ...

    async def add(self, turn: TurnRecord) -> None:
        """Store a new turn."""
        ...

    async def update(self, turn: TurnRecord) -> bool:
        """Save ``turn`` if nobody saved it since it was read; bumps its version."""
        ...


class InMemoryTurnStore:
    """Turns in a dict: for tests, benchmarks and embedding without persistence."""

    def __init__(self) -> None:
        self._turns: dict[str, list[TurnRecord]] = {}

    async def list_turns(self, session_id: str, org: str) -> list[TurnRecord]:
        """The session's turns, oldest first."""
        return [_copy(t) for t in self._turns.get(session_id, []) if t.org == org]

    async def add(self, turn: TurnRecord) -> None:
        """Store a new turn."""
        self._turns.setdefault(turn.session_id, []).append(_copy(turn))

    async def update(self, turn: TurnRecord) -> bool:
        """Save ``turn`` unless its version is stale."""
        turns = self._turns.get(turn.session_id, [])
        for i, stored in enumerate(turns):
            if stored.id == turn.id:
                if stored.version != turn.version:
                    return False
                turn.version += 1
                turn.updated_at = utc_now()
                turns[i] = _copy(turn)
                return True
        return False


def _copy(turn: TurnRecord) -> TurnRecord:
    # Stored records must not change behind the store's back (the SQL store copies too).
    return copy.deepcopy(turn)
