"""The call ledger's turns: a marker that stops an Aptix from before the ledger.

Changes no table and no row. The ledger (37c1718) changed what ``turns.data`` holds without a
revision: each call of a turn keeps its ``state`` and ``outcome``, where a turn stored before
kept the client's answer to a call as a second entry of it. An Aptix from between 0008 and
the ledger sits at 0008 too, so it went on opening a database the ledger writes, and the
turns it resumed there read falsely (an approved call that ran listed twice, still
``awaiting_approval``, not run). At this revision such a version meets one it does not know
and stops at start-up, before it serves; one that refuses a newer database's revision says
so in one line.

Nothing is converted. Turns stored before the ledger stay as they are: the ledger reads each
of their calls with the state that says what happened (``aptix.reasoner.ledger``
``stated_calls``), and a turn it writes again (a waiting one answered) is stored with them.
Writing those states here would drop the second entries, the record of what the client
answered.

Revision ID: 0009_call_ledger
Revises: 0008_workflow_heads
"""

revision = "0009_call_ledger"
down_revision = "0008_workflow_heads"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing to change: reaching this revision is the mark."""


def downgrade() -> None:
    """Nothing to undo; at 0008 a version from before the ledger opens the database again."""
