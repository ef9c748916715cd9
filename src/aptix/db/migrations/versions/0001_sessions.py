"""Sessions and their mode history.

Revision ID: 0001_sessions
Revises:
"""

import sqlalchemy as sa
from alembic import op

from aptix.db.types import UtcDateTime

revision = "0001_sessions"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``sessions`` and ``session_mode_history``."""
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("org", sa.String(200), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("title", sa.String(500), nullable=True),
        sa.Column("mode", sa.String(100), nullable=False),
        sa.Column("mode_reason", sa.Text(), nullable=True),
        sa.Column("mode_set_at", UtcDateTime(), nullable=True),
        sa.Column("parent_session_id", sa.String(32), nullable=True),
        sa.Column("active_workflow_id", sa.String(200), nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["parent_session_id"],
            ["sessions.id"],
            name="fk_sessions_parent_session_id_sessions",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_sessions"),
    )
    op.create_index("ix_sessions_org_user_updated", "sessions", ["org", "user_id", "updated_at"])
    op.create_index("ix_sessions_parent_session_id", "sessions", ["parent_session_id"])
    op.create_table(
        "session_mode_history",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("previous_mode", sa.String(100), nullable=True),
        sa.Column("mode", sa.String(100), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("changed_at", UtcDateTime(), nullable=False),
        sa.Column("changed_by", sa.String(200), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name="fk_session_mode_history_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_session_mode_history"),
        sa.UniqueConstraint("session_id", "seq", name="uq_session_mode_history_session_id"),
    )
    op.create_index("ix_session_mode_history_session_id", "session_mode_history", ["session_id"])


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("session_mode_history")
    op.drop_table("sessions")
