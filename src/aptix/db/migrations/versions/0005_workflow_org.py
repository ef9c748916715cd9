"""Authored workflows belong to an org.

Adds ``workflow_revisions.org`` and makes revisions unique per (org, workflow id, revision).
Rows written before there was an org column get the org of the user who drafted the
workflow, when the sessions table knows that user in exactly one org; otherwise ``local``
(the org of the key-less, single-user server, which is where such rows were usually made).
Each workflow given ``local`` that way is logged (a warning naming it and its author), so
the operator can move it to its org (docs/deployment.md shows how).

Revision ID: 0005_workflow_org
Revises: 0004_turn_leases
"""

import logging

import sqlalchemy as sa
from alembic import op

revision = "0005_workflow_org"
down_revision = "0004_turn_leases"
branch_labels = None
depends_on = None

FALLBACK_ORG = "local"

_log = logging.getLogger("aptix.db")


def upgrade() -> None:
    """Add ``org``, fill it for existing rows, and re-key the revisions on it."""
    with op.batch_alter_table("workflow_revisions") as batch:
        batch.add_column(sa.Column("org", sa.String(200), nullable=True))
    bind = op.get_bind()
    revisions = sa.table(
        "workflow_revisions",
        sa.column("workflow_id", sa.String),
        sa.column("revision", sa.Integer),
        sa.column("created_by", sa.String),
        sa.column("org", sa.String),
    )
    sessions = sa.table("sessions", sa.column("org", sa.String), sa.column("user_id", sa.String))
    first_authors = bind.execute(
        sa.select(revisions.c.workflow_id, revisions.c.created_by).where(revisions.c.revision == 1)
    ).all()
    for workflow_id, author in first_authors:
        orgs = (
            bind.execute(sa.select(sessions.c.org).where(sessions.c.user_id == author).distinct())
            .scalars()
            .all()
            if author
            else []
        )
        org = orgs[0] if len(orgs) == 1 else FALLBACK_ORG
        if org == FALLBACK_ORG and orgs != [FALLBACK_ORG]:
            why = "is in several orgs" if orgs else "has no session, so no known org"
            _report_fallback(workflow_id, author, why)
        bind.execute(
            sa.update(revisions).where(revisions.c.workflow_id == workflow_id).values(org=org)
        )
    authorless = bind.execute(
        sa.select(revisions.c.workflow_id).where(revisions.c.org.is_(None)).distinct()
    ).scalars()
    for workflow_id in authorless:
        _report_fallback(workflow_id, None, "")
    bind.execute(sa.update(revisions).where(revisions.c.org.is_(None)).values(org=FALLBACK_ORG))
    with op.batch_alter_table("workflow_revisions") as batch:
        batch.alter_column("org", existing_type=sa.String(200), nullable=False)
        batch.drop_constraint("uq_workflow_revisions_workflow_id", type_="unique")
        batch.create_unique_constraint(
            "uq_workflow_revisions_org", ["org", "workflow_id", "revision"]
        )
        batch.drop_index("ix_workflow_revisions_workflow_id")
        batch.create_index("ix_workflow_revisions_org", ["org"])


def _report_fallback(workflow_id: str, author: str | None, why: str) -> None:
    """Say that a workflow went to ``local`` for want of a known org, so it can be moved."""
    who = f"its author {author!r} {why}" if author else "its author is not recorded"
    _log.warning(
        "Migration 0005: workflow %r was given org %r: %s. If it belongs to another org, "
        "move it as docs/deployment.md shows.",
        workflow_id,
        FALLBACK_ORG,
        who,
    )


def downgrade() -> None:
    """Drop ``org`` (only possible while no two orgs share a workflow id)."""
    with op.batch_alter_table("workflow_revisions") as batch:
        batch.drop_index("ix_workflow_revisions_org")
        batch.create_index("ix_workflow_revisions_workflow_id", ["workflow_id"])
        batch.drop_constraint("uq_workflow_revisions_org", type_="unique")
        batch.create_unique_constraint(
            "uq_workflow_revisions_workflow_id", ["workflow_id", "revision"]
        )
        batch.drop_column("org")
