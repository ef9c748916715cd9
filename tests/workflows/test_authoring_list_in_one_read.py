"""``list_authoring_workflows`` reads an org's workflows in one statement, not one each.

It read each workflow's whole history in a transaction of its own: 11.6 s for an org with
1,000 drafts, and a 504 after 30 s at 3,000 (review r4 F2, round 73). Now one statement
reads, per workflow of the org, its newest revision and the one that decides what is
served; every row is the one the per-workflow read gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from aptix.db.engine import Database, open_database
from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.revisions import read_state
from aptix.workflows.sql_store import SqlWorkflowStore
from aptix.workflows.store import InMemoryWorkflowStore, RevisionAction, WorkflowStore
from tests.workflows.conftest import KNOWN_TOOLS, make_manifest
from tests.workflows.many_stored import FIELDS, database_url, own_pg, seed_drafts, statements

__all__ = ["database_url", "own_pg"]  # fixtures, used by name


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    db = await open_database(database_url)
    yield db
    await db.close()


async def _every_state(store: WorkflowStore, registry: WorkflowRegistry) -> WorkflowAuthoring:
    """An org with a workflow in each state a list row shows, and another org's."""
    authoring = WorkflowAuthoring(store, registry)
    org = "acme"

    async def published(wid: str) -> None:
        assert (await authoring.draft(wid, f"Title {wid}", "Does it.", "ann", org)).ok
        assert (await authoring.update(wid, FIELDS, "ann", org)).ok
        assert (await authoring.publish(wid, "root", org)).ok

    assert (await authoring.draft("only_drafted", "Only drafted", "Draft.", "ann", org)).ok
    await published("served")
    await published("draft_over_served")
    assert (await authoring.update("draft_over_served", {"title": "Newer"}, "ann", org)).ok
    await published("deprecated")
    assert (await authoring.update("deprecated", {"status": "deprecated"}, "r", org)).ok
    await published("disabled")
    assert (await authoring.update("disabled", {"status": "disabled"}, "r", org)).ok
    assert (await authoring.update("disabled", {"title": "Draft over off"}, "ann", org)).ok
    await published("removed")
    assert (await authoring.update("removed", {"status": "disabled"}, "r", org)).ok
    assert (await authoring.remove("removed", "r", org)).ok
    await published("drafted_again")
    assert (await authoring.update("drafted_again", {"status": "disabled"}, "r", org)).ok
    assert (await authoring.remove("drafted_again", "r", org)).ok
    assert (await authoring.draft("drafted_again", "Again", "Again.", "ann", org)).ok
    await published("discarded")
    assert (await authoring.update("discarded", {"title": "Dropped"}, "ann", org)).ok
    assert (await authoring.discard("discarded", "ann", org)).ok
    # Published, then its tool went away: listed as not served.
    stale = make_manifest("stale_tool", version="1.0.0", permittedTools=["agent_gone"])
    await store.append(stale, RevisionAction.PUBLISH, "root", org)
    # Another org's workflow of the same id, and one of its own: never in acme's list.
    assert (await authoring.draft("served", "Theirs", "Theirs.", "eve", "globex")).ok
    assert (await authoring.draft("theirs", "Theirs", "Theirs.", "eve", "globex")).ok
    return authoring


async def _one_by_one(
    store: WorkflowStore, registry: WorkflowRegistry, org: str
) -> list[dict[str, Any]]:
    """The rows as the per-workflow read gives them: the reference."""
    ids = {m.workflow_id for m in registry.all(org)} | set(await store.workflow_ids(org))
    rows = [(await read_state(store, registry, wid, org)).list_row() for wid in sorted(ids)]
    return [row for row in rows if row is not None]


def _registry() -> WorkflowRegistry:
    shared = make_manifest("shared_report")  # a deployment-wide (file) workflow
    return WorkflowRegistry([shared], known_tools=KNOWN_TOOLS)


async def test_each_row_is_what_the_per_workflow_read_gives(database: Database) -> None:
    store = SqlWorkflowStore(database)
    registry = _registry()
    authoring = await _every_state(store, registry)
    for org in ("acme", "globex", "initech"):
        listed = await authoring.list_workflows(org)
        assert listed.ok
        assert listed.workflows == await _one_by_one(store, registry, org)
    rows = {r["workflowId"]: r for r in (await authoring.list_workflows("acme")).workflows or []}
    assert sorted(rows) == [
        "deprecated",
        "disabled",
        "discarded",
        "draft_over_served",
        "drafted_again",
        "only_drafted",
        "served",
        "shared_report",
        "stale_tool",
    ]
    assert rows["stale_tool"]["served"] is False
    assert rows["disabled"]["publishedStatus"] == "disabled"
    assert rows["shared_report"]["readOnly"] is True
    assert rows["served"]["title"] == "Title served"


async def test_the_in_memory_store_lists_alike() -> None:
    store = InMemoryWorkflowStore()
    registry = _registry()
    authoring = await _every_state(store, registry)
    listed = await authoring.list_workflows("acme")
    assert listed.workflows == await _one_by_one(store, registry, "acme")


@pytest.mark.parametrize("drafts", [20, 300])
async def test_listing_is_one_statement_however_many_workflows(
    database: Database, drafts: int
) -> None:
    await seed_drafts(database, "acme", drafts)
    store = SqlWorkflowStore(database)
    registry = WorkflowRegistry(known_tools=KNOWN_TOOLS)
    authoring = WorkflowAuthoring(store, registry)
    assert (await authoring.update("w3", FIELDS, "ann", "acme")).ok
    assert (await authoring.publish("w3", "root", "acme")).ok
    async with statements(database) as sent:
        listed = await authoring.list_workflows("acme")
    assert len(sent) == 1, sent
    rows = listed.workflows or []
    assert len(rows) == drafts
    assert {r["workflowId"]: (r["status"], r["revision"]) for r in rows}["w3"] == ("published", 3)
