"""The ``sessions``, ``session_mode_history`` and ``session_fingerprints`` tables."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from aptix.db.base import Base
from aptix.db.types import UtcDateTime

__all__ = ["FingerprintRow", "ModeHistoryRow", "SessionRow"]


class SessionRow(Base):
    """One agent session, owned by an org and a user."""

    __tablename__ = "sessions"
    __table_args__ = (Index("ix_sessions_org_user_updated", "org", "user_id", "updated_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    org: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    title: Mapped[str | None] = mapped_column(String(500))
    mode: Mapped[str] = mapped_column(String(100))
    mode_reason: Mapped[str | None] = mapped_column(Text)
    mode_set_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    parent_session_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("sessions.id", ondelete="SET NULL"), index=True
    )
    active_workflow_id: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    version: Mapped[int] = mapped_column(Integer, default=1)

    history: Mapped[list[ModeHistoryRow]] = relationship(
        order_by="ModeHistoryRow.seq", cascade="all, delete-orphan", lazy="selectin"
    )


class ModeHistoryRow(Base):
    """One mode change of a session, in order (``seq`` starts at 1)."""

    __tablename__ = "session_mode_history"
    __table_args__ = (UniqueConstraint("session_id", "seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("sessions.id", ondelete="CASCADE"), index=True
    )
    seq: Mapped[int] = mapped_column(Integer)
    previous_mode: Mapped[str | None] = mapped_column(String(100))
    mode: Mapped[str] = mapped_column(String(100))
    reason: Mapped[str] = mapped_column(Text)
    changed_at: Mapped[datetime] = mapped_column(UtcDateTime)
    changed_by: Mapped[str] = mapped_column(String(200))


class FingerprintRow(Base):
    """One conversation state a client may continue from, and the model name it was shown."""

    __tablename__ = "session_fingerprints"
    __table_args__ = (
        Index("ix_session_fingerprints_lookup", "org", "user_id", "fingerprint"),
        Index("ix_session_fingerprints_session", "session_id", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    org: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[str] = mapped_column(String(200))
    session_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("sessions.id", ondelete="CASCADE")
    )
    fingerprint: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
