"""The authoring tables: the revision log, each workflow's head and the change counter.

``workflow_revisions`` holds one row per revision, never updated; at most one of them
publishes a given version of a workflow (a partial unique index). ``workflow_heads`` holds
one row per (org, workflow) whose ``revision`` is the newest revision: every append is a
compare-and-set on it, and its primary key lets exactly one draft create a workflow.
``workflow_changes`` holds one counter row, bumped with every revision.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from aptix.db.base import Base
from aptix.db.types import UtcDateTime

__all__ = ["CHANGES_ROW_ID", "WorkflowChangesRow", "WorkflowHeadRow", "WorkflowRevisionRow"]

#: The one row of ``workflow_changes``.
CHANGES_ROW_ID = 1

_PUBLISHED = text("action = 'publish'")


class WorkflowRevisionRow(Base):
    """One stored revision of an authored workflow manifest."""

    __tablename__ = "workflow_revisions"
    __table_args__ = (
        UniqueConstraint("org", "workflow_id", "revision"),
        # One publication per version: the version rule holds even against a bug.
        Index(
            "uq_workflow_revisions_publication",
            "org",
            "workflow_id",
            "version",
            unique=True,
            sqlite_where=_PUBLISHED,
            postgresql_where=_PUBLISHED,
        ),
    )

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


class WorkflowHeadRow(Base):
    """The newest revision of one authored workflow: what every change compares and sets."""

    __tablename__ = "workflow_heads"

    org: Mapped[str] = mapped_column(String(200), primary_key=True)
    workflow_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    revision: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class WorkflowChangesRow(Base):
    """The change counter: grows in the same transaction as every appended revision."""

    __tablename__ = "workflow_changes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    counter: Mapped[int] = mapped_column(BigInteger)
