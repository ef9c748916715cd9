"""Turn records of the reasoner.

Revision ID: 0003_turns
Revises: 0002_workflows
"""

import sqlalchemy as sa
from alembic import op

from aptix.db.types import UtcDateTime

revision = "0003_turns"
down_revision = "0002_workflows"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``turns``."""
    op.create_table(
        "turns",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("session_id", sa.String(32), nullable=False),
        sa.Column("org", sa.String(200), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("instruction", sa.Text(), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name="fk_turns_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_turns"),
    )
    op.create_index("ix_turns_session_seq", "turns", ["session_id", "seq"], unique=True)


def downgrade() -> None:
    """Drop ``turns``."""
    op.drop_table("turns")
