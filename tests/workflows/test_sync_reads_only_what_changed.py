"""A change costs the other processes a read of what changed, not of every workflow.

Every authoring change bumps the change counter, and every process then reloaded what it
serves by reading the whole history of every workflow of every org, one query each: with a
few thousand drafts in one org, one draft in another org held up the next request of every
org on every process for 15 to 31 s (review r4 F1, round 73). Now a process reads the rows
appended since its last read in one statement, and the served revision of only those
workflows a publish, status change or removal touched, in one batched statement; what it
then serves must be exactly what a full read gives, for every change and every org.
"""

from __future__ import annotations

import json
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import text

from aptix.db.engine import open_database
from aptix.runtime import open_runtime
from aptix.settings import AptixSettings
from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.sql_store import SqlWorkflowStore
from aptix.workflows.store import WorkflowStore
from aptix.workflows.sync import SYNC_INTERVAL, WorkflowSync, read_published
from tests.workflows.conftest import KNOWN_TOOLS
from tests.workflows.many_stored import (
    FIELDS,
    database_url,
    own_pg,
    seed_drafts,
    statements,
)

__all__ = ["database_url", "own_pg"]  # fixtures, used by name

ORGS = ("acme", "globex")
Served = dict[str, dict[str, tuple[str, str]]]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _served(registry: WorkflowRegistry) -> Served:
    return {
        org: {m.workflow_id: (m.version, m.status.value) for m in registry.authored(org)}
        for org in ORGS
    }


async def _fully_read(store: WorkflowStore) -> Served:
    """What a process that reads everything afresh serves: the oracle."""
    registry = WorkflowRegistry(known_tools=KNOWN_TOOLS)
    authored, _ = await read_published(store, registry)
    return {
        org: {w: (m.version, m.status.value) for w, m in authored.get(org, {}).items()}
        for org in ORGS
    }


class _Other:
    """The other process's registry, kept by a sync whose interval a test steps over."""

    def __init__(self, store: WorkflowStore) -> None:
        self.store = store
        self.registry = WorkflowRegistry(known_tools=KNOWN_TOOLS)
        self.clock = _Clock()
        self.sync = WorkflowSync(store, self.registry, clock=self.clock)

    async def next_request(self) -> Served:
        self.clock.now += SYNC_INTERVAL
        await self.sync.check()
        return _served(self.registry)


async def _publish(authoring: WorkflowAuthoring, wid: str, org: str) -> None:
    if (await authoring.get(wid, org)).ok:
        assert (await authoring.update(wid, {**FIELDS, "title": f"{wid} again"}, "ann", org)).ok
    else:
        assert (await authoring.draft(wid, f"Title {wid}", "Does it.", "ann", org)).ok
        assert (await authoring.update(wid, FIELDS, "ann", org)).ok
    published = await authoring.publish(wid, "root", org)
    assert published.ok, published


async def test_every_change_reaches_the_other_runtime_as_a_full_read_sees_it(
    tmp_path: Path, database_url: str
) -> None:
    settings = AptixSettings(
        data_dir=tmp_path, database_url=database_url, load_plugins=False, semantic_matching=False
    )
    async with open_runtime(settings) as a, open_runtime(settings) as b:
        other = _Other(b.workflows.store)
        await other.sync.load()
        authoring = a.workflows.authoring

        async def step(expected: Served) -> None:
            seen = await other.next_request()
            assert seen == expected
            assert seen == await _fully_read(b.workflows.store)

        await _publish(authoring, "offsite", "acme")
        await step({"acme": {"offsite": ("0.1.0", "published")}, "globex": {}})
        # Another org's draft, and a draft over the served version, serve nothing new.
        assert (await authoring.draft("trip", "Trip", "Plans.", "eve", "globex")).ok
        assert (await authoring.update("offsite", {"title": "New"}, "ann", "acme")).ok
        await step({"acme": {"offsite": ("0.1.0", "published")}, "globex": {}})
        assert (await authoring.publish("offsite", "root", "acme")).ok
        await _publish(authoring, "offsite", "globex")  # the same id, globex's own
        await step(
            {
                "acme": {"offsite": ("0.1.1", "published")},
                "globex": {"offsite": ("0.1.0", "published")},
            }
        )
        # Governance: deprecate and disable (served as such), then remove.
        assert (await authoring.update("offsite", {"status": "deprecated"}, "r", "acme")).ok
        await step(
            {
                "acme": {"offsite": ("0.1.1", "deprecated")},
                "globex": {"offsite": ("0.1.0", "published")},
            }
        )
        assert (await authoring.update("offsite", {"status": "disabled"}, "r", "acme")).ok
        await step(
            {
                "acme": {"offsite": ("0.1.1", "disabled")},
                "globex": {"offsite": ("0.1.0", "published")},
            }
        )
        assert (await authoring.remove("offsite", "r", "acme")).ok
        await step({"acme": {}, "globex": {"offsite": ("0.1.0", "published")}})
        # Drafted again after its removal: nothing served until it is published again.
        assert (await authoring.draft("offsite", "Offsite", "Again.", "ann", "acme")).ok
        await step({"acme": {}, "globex": {"offsite": ("0.1.0", "published")}})
        assert (await authoring.update("offsite", FIELDS, "ann", "acme")).ok
        assert (await authoring.publish("offsite", "root", "acme")).ok
        # A discarded draft leaves the served version as it was.
        assert (await authoring.update("offsite", {"title": "Dropped"}, "ann", "globex")).ok
        assert (await authoring.discard("offsite", "ann", "globex")).ok
        await step(
            {
                "acme": {"offsite": ("0.2.0", "published")},
                "globex": {"offsite": ("0.1.0", "published")},
            }
        )
        # And back: B changes, the other process of A's side sees it too.
        assert (
            await b.workflows.authoring.update("offsite", {"status": "disabled"}, "r", "globex")
        ).ok
        await step(
            {
                "acme": {"offsite": ("0.2.0", "published")},
                "globex": {"offsite": ("0.1.0", "disabled")},
            }
        )


async def test_a_workflow_moved_to_its_org_by_hand_is_served_there(
    tmp_path: Path, database_url: str
) -> None:
    """deployment.md's statements for moving a workflow to its org reach running processes."""
    settings = AptixSettings(
        data_dir=tmp_path, database_url=database_url, load_plugins=False, semantic_matching=False
    )
    async with open_runtime(settings) as a, open_runtime(settings) as b:
        other = _Other(b.workflows.store)
        await other.sync.load()
        await _publish(a.workflows.authoring, "gamma_flow", "local")
        await _publish(a.workflows.authoring, "offsite", "acme")
        assert (await other.next_request())["acme"] == {"offsite": ("0.1.0", "published")}

        async with a.database.transaction() as session:
            for statement in (
                "UPDATE workflow_revisions SET org = 'acme' "
                "WHERE org = 'local' AND workflow_id = 'gamma_flow'",
                "UPDATE workflow_heads SET org = 'acme' "
                "WHERE org = 'local' AND workflow_id = 'gamma_flow'",
                "UPDATE workflow_changes SET counter = counter + 1",
            ):
                await session.execute(text(statement))
        assert (await other.next_request())["acme"] == {
            "offsite": ("0.1.0", "published"),
            "gamma_flow": ("0.1.0", "published"),
        }
        assert other.registry.authored("local") == []


@pytest.mark.parametrize("drafts", [50, 400])
async def test_a_change_costs_the_other_process_the_same_few_statements_however_many_workflows(
    database_url: str, drafts: int
) -> None:
    writer_db = await open_database(database_url)
    reader_db = await open_database(database_url)
    try:
        await seed_drafts(writer_db, "acme", drafts)
        writer = WorkflowAuthoring(
            SqlWorkflowStore(writer_db), WorkflowRegistry(known_tools=KNOWN_TOOLS)
        )
        other = _Other(SqlWorkflowStore(reader_db))
        await other.sync.load()

        # One draft in another org: the counter, then the rows appended since, in one read.
        assert (await writer.draft("trip", "Trip", "Plans.", "eve", "globex")).ok
        async with statements(reader_db) as sent:
            assert await other.next_request() == {"acme": {}, "globex": {}}
        assert len(sent) <= 2, sent

        # A publish adds one read: the served revision of that workflow alone.
        await _publish(writer, "trip", "globex")
        async with statements(reader_db) as sent:
            assert await other.next_request() == {
                "acme": {},
                "globex": {"trip": ("0.1.0", "published")},
            }
        assert len(sent) <= 3, sent

        # Many changes at once are still read in the same few statements.
        for n in range(12):
            await _publish(writer, f"w{n}", "acme")
        async with statements(reader_db) as sent:
            served = await other.next_request()
        assert len(sent) <= 3, sent
        assert served["acme"] == {f"w{n}": ("0.1.0", "published") for n in range(12)}
        assert served == await _fully_read(other.store)
    finally:
        await writer_db.close()
        await reader_db.close()


async def test_a_revision_committed_after_a_later_one_is_not_missed(own_pg: str) -> None:
    """Row ids are handed out before commit: one may become visible after a higher one."""
    writer_db = await open_database(own_pg)
    reader_db = await open_database(own_pg)
    late = await asyncpg.connect(own_pg.replace("postgresql+asyncpg", "postgresql"))
    try:
        writer = WorkflowAuthoring(
            SqlWorkflowStore(writer_db), WorkflowRegistry(known_tools=KNOWN_TOOLS)
        )
        await _publish(writer, "early", "acme")
        other = _Other(SqlWorkflowStore(reader_db))
        await other.sync.load()
        manifest = (await writer.get("early", "acme")).workflow
        assert manifest is not None
        disabled = json.dumps({**manifest, "status": "disabled"})

        # A transaction takes its row id now and commits after another append committed.
        transaction = late.transaction()
        await transaction.start()
        await late.execute(
            "UPDATE workflow_heads SET revision = 4 WHERE org = 'acme' AND workflow_id = 'early'"
        )
        await late.execute(
            "INSERT INTO workflow_revisions (org, workflow_id, revision, action, version, status,"
            " manifest_json, created_at, created_by) VALUES ('acme', 'early', 4, 'status',"
            " '0.1.0', 'disabled', $1, now(), 'root')",
            disabled,
        )
        await _publish(writer, "later", "globex")
        assert await other.next_request() == {
            "acme": {"early": ("0.1.0", "published")},
            "globex": {"later": ("0.1.0", "published")},
        }
        await late.execute("UPDATE workflow_changes SET counter = counter + 1")
        await transaction.commit()
        # Read as the id it had skipped, with the workflow it touched: no read of everything.
        async with statements(reader_db) as sent:
            assert await other.next_request() == {
                "acme": {"early": ("0.1.0", "disabled")},
                "globex": {"later": ("0.1.0", "published")},
            }
        assert len(sent) == 3, sent
        assert await other.next_request() == await _fully_read(other.store)
    finally:
        await late.close()
        await writer_db.close()
        await reader_db.close()
