"""Workflow authoring: the append-only revision log.

Revision ID: 0002_workflows
Revises: 0001_sessions
"""

import sqlalchemy as sa
from alembic import op

from aptix.db.types import UtcDateTime

revision = "0002_workflows"
down_revision = "0001_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``workflow_revisions``."""
    op.create_table(
        "workflow_revisions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("workflow_id", sa.String(64), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("manifest_json", sa.Text(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_workflow_revisions"),
        sa.UniqueConstraint("workflow_id", "revision", name="uq_workflow_revisions_workflow_id"),
    )
    op.create_index("ix_workflow_revisions_workflow_id", "workflow_revisions", ["workflow_id"])


def downgrade() -> None:
    """Drop ``workflow_revisions``."""
    op.drop_index("ix_workflow_revisions_workflow_id", table_name="workflow_revisions")
    op.drop_table("workflow_revisions")
