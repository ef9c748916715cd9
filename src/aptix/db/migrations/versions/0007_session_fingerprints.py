"""Conversation fingerprints for the OpenAI-compatible endpoint.

Adds ``session_fingerprints``: after each answer on ``POST /v1/chat/completions`` the
fingerprint of the conversation the client now holds, so that a stateless client's next
request (which resends the conversation) finds its session.

Revision ID: 0007_session_fingerprints
Revises: 0006_workflow_changes
"""

import sqlalchemy as sa
from alembic import op

from aptix.db.types import UtcDateTime

revision = "0007_session_fingerprints"
down_revision = "0006_workflow_changes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the table and its two indexes."""
    op.create_table(
        "session_fingerprints",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("org", sa.String(200), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column(
            "session_id",
            sa.String(32),
            sa.ForeignKey("sessions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
    )
    op.create_index(
        "ix_session_fingerprints_lookup", "session_fingerprints", ["org", "user_id", "fingerprint"]
    )
    op.create_index("ix_session_fingerprints_session", "session_fingerprints", ["session_id", "id"])


def downgrade() -> None:
    """Drop the table."""
    op.drop_table("session_fingerprints")
