"""The ``turns`` table."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from aptix.db.base import Base
from aptix.db.types import UtcDateTime

__all__ = ["TurnRow"]


class TurnRow(Base):
    """One turn of a session, with its transcript slice and audit trail as JSON."""

    __tablename__ = "turns"
    __table_args__ = (
        Index("ix_turns_session_seq", "session_id", "seq", unique=True),
        Index("ix_turns_status", "status"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    session_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("sessions.id", ondelete="CASCADE")
    )
    org: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    seq: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20))
    instruction: Mapped[str | None] = mapped_column(Text)
    text: Mapped[str | None] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    version: Mapped[int] = mapped_column(Integer)
    lease_until: Mapped[datetime | None] = mapped_column(UtcDateTime)
    owner: Mapped[str | None] = mapped_column(String(200))
