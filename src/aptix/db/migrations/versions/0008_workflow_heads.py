"""Authoring across processes: a head row per workflow, and one publication per version.

Adds ``workflow_heads`` (org, workflow_id, revision): every authoring change is a
compare-and-set on its ``revision``, and its primary key lets exactly one draft create a
workflow. It starts at the newest stored revision of every workflow.

Adds the unique index ``uq_workflow_revisions_publication`` on (org, workflow_id, version)
for ``publish`` rows. Before it, two processes could publish one version twice (issue 25);
such a later duplicate is kept, relabelled ``status`` (a re-publication of the served
version, which is what it did), so no history is lost and the index can hold.

Revision ID: 0008_workflow_heads
Revises: 0007_session_fingerprints
"""

import sqlalchemy as sa
from alembic import op

from aptix.db.types import UtcDateTime

revision = "0008_workflow_heads"
down_revision = "0007_session_fingerprints"
branch_labels = None
depends_on = None

_PUBLISHED = sa.text("action = 'publish'")


def upgrade() -> None:
    """Create and fill the heads, relabel duplicate publications, add the unique index."""
    op.create_table(
        "workflow_heads",
        sa.Column("org", sa.String(200), primary_key=True),
        sa.Column("workflow_id", sa.String(64), primary_key=True),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
    )
    bind = op.get_bind()
    bind.execute(
        sa.text(
            "INSERT INTO workflow_heads (org, workflow_id, revision, updated_at)"
            " SELECT org, workflow_id, MAX(revision), MAX(created_at)"
            " FROM workflow_revisions GROUP BY org, workflow_id"
        )
    )
    revisions = sa.table(
        "workflow_revisions",
        sa.column("id", sa.Integer),
        sa.column("org", sa.String),
        sa.column("workflow_id", sa.String),
        sa.column("revision", sa.Integer),
        sa.column("version", sa.String),
        sa.column("action", sa.String),
    )
    published = bind.execute(
        sa.select(revisions.c.id, revisions.c.org, revisions.c.workflow_id, revisions.c.version)
        .where(revisions.c.action == "publish")
        .order_by(revisions.c.org, revisions.c.workflow_id, revisions.c.revision)
    ).all()
    seen: set[tuple[str, str, str]] = set()
    duplicates = []
    for row_id, org, workflow_id, version in published:
        key = (org, workflow_id, version)
        if key in seen:
            duplicates.append(row_id)
        seen.add(key)
    if duplicates:
        bind.execute(
            sa.update(revisions).where(revisions.c.id.in_(duplicates)).values(action="status")
        )
    op.create_index(
        "uq_workflow_revisions_publication",
        "workflow_revisions",
        ["org", "workflow_id", "version"],
        unique=True,
        sqlite_where=_PUBLISHED,
        postgresql_where=_PUBLISHED,
    )


def downgrade() -> None:
    """Drop the index and the heads (relabelled duplicates stay ``status``)."""
    op.drop_index("uq_workflow_revisions_publication", table_name="workflow_revisions")
    op.drop_table("workflow_heads")
