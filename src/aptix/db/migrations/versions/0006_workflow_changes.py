"""A change counter for authored workflows, so that every process sees a publish.

Adds ``workflow_changes``: one row whose ``counter`` grows in the same transaction as every
appended revision. A process compares it with the value it last loaded (one primary-key
read) and reloads the published workflows only when it moved.

Revision ID: 0006_workflow_changes
Revises: 0005_workflow_org
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_workflow_changes"
down_revision = "0005_workflow_org"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the counter row, starting at the number of revisions already stored."""
    changes = op.create_table(
        "workflow_changes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("counter", sa.BigInteger, nullable=False),
    )
    stored = op.get_bind().execute(sa.text("SELECT COUNT(*) FROM workflow_revisions")).scalar()
    op.bulk_insert(changes, [{"id": 1, "counter": int(stored or 0)}])


def downgrade() -> None:
    """Drop the counter."""
    op.drop_table("workflow_changes")
