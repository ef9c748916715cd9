"""``TurnRecord``: one turn of a session as the reasoner and the stores see it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from aptix.db.types import utc_now
from aptix.llm.types import Message

__all__ = ["OPEN", "TurnRecord", "TurnStatus"]

TurnStatus = Literal["running", "pending", "completed", "error", "interrupted", "cancelled"]

#: Statuses of a turn that still holds its session: no other turn may start meanwhile.
OPEN = ("running", "pending")


@dataclass(slots=True)
class TurnRecord:
    """One turn of a session.

    ``messages`` holds the turn's non-system messages (the instruction, the model's messages
    and tool results) so that later turns can replay the transcript. ``pending_calls`` are
    the client-final calls waiting for results. ``resume_key`` names the posted results
    accepted into ``messages`` whose attempt has not answered yet (a retry continues from
    them); ``answers`` maps each answered set of call ids to the response it produced, so a
    resume posted twice returns the first outcome. ``lease_until`` and ``owner`` say which
    process runs a ``running`` turn and until when it is presumed alive.
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
    resume_key: str | None = None
    #: Earlier turns left out of this turn's last request: ``{turns, throughTurnId, summarized}``.
    context_dropped: dict[str, Any] | None = None
    #: The summary of earlier turns this turn used, written for it or carried forward from
    #: the turn before: ``{text, throughTurnId, throughSeq, turns}``.
    context_summary: dict[str, Any] | None = None
    #: The format the client asked the answer in (a Chat Completions ``response_format``), sent
    #: with each of the turn's model calls, resumes included; None for free text.
    response_format: dict[str, Any] | None = None
    created_at: datetime = field(default_factory=utc_now)
    updated_at: datetime = field(default_factory=utc_now)
    version: int = 1
    lease_until: datetime | None = None
    owner: str | None = None

    @property
    def refusal(self) -> str | None:
        """The model's refusal (OpenAI's ``message.refusal``) when its last response declined."""
        last = self.messages[-1] if self.messages else None
        if last is None or last.get("role") != "assistant" or not last.get("refusal"):
            return None
        return str(last["refusal"])
