"""The authoring tables: the revision log and the change counter.

``workflow_revisions`` holds one row per revision, never updated; ``workflow_changes`` holds
one counter row, bumped with every revision.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from aptix.db.base import Base
from aptix.db.types import UtcDateTime

__all__ = ["CHANGES_ROW_ID", "WorkflowChangesRow", "WorkflowRevisionRow"]

#: The one row of ``workflow_changes``.
CHANGES_ROW_ID = 1


class WorkflowRevisionRow(Base):
    """One stored revision of an authored workflow manifest."""

    __tablename__ = "workflow_revisions"
    __table_args__ = (UniqueConstraint("org", "workflow_id", "revision"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    #: The org that drafted the workflow: only it sees, matches and boots with it.
    org: Mapped[str] = mapped_column(String(200), index=True)
    workflow_id: Mapped[str] = mapped_column(String(64))
    revision: Mapped[int] = mapped_column(Integer)
    action: Mapped[str] = mapped_column(String(16))
    version: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    manifest_json: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    created_by: Mapped[str | None] = mapped_column(String(200))


class WorkflowChangesRow(Base):
    """The change counter: grows in the same transaction as every appended revision."""

    __tablename__ = "workflow_changes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    counter: Mapped[int] = mapped_column(BigInteger)
