"""Turn leases: which process runs a turn and until when it is presumed alive.

Revision ID: 0004_turn_leases
Revises: 0003_turns
"""

import sqlalchemy as sa
from alembic import op

from aptix.db.types import UtcDateTime

revision = "0004_turn_leases"
down_revision = "0003_turns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``lease_until`` and ``owner`` to ``turns``; index running turns for the sweep."""
    with op.batch_alter_table("turns") as batch:
        batch.add_column(sa.Column("lease_until", UtcDateTime(), nullable=True))
        batch.add_column(sa.Column("owner", sa.String(200), nullable=True))
    op.create_index("ix_turns_status", "turns", ["status"])


def downgrade() -> None:
    """Drop the lease columns."""
    op.drop_index("ix_turns_status", table_name="turns")
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("owner")
        batch.drop_column("lease_until")
