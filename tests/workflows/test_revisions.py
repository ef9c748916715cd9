"""Authoring is a compare-and-set on the workflow's revision (issue 25, DESIGN §15).

Two ``WorkflowAuthoring`` on one database, each with its own registry and lock, stand for two
processes: the loser of every race is refused naming the current revision, nothing is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from aptix.db.engine import Database, open_database
from aptix.errors import RevisionConflict
from aptix.workflows.outcome import AuthoringOutcome
from aptix.workflows.services import WorkflowServices, build_workflow_services
from aptix.workflows.sql_store import SqlWorkflowStore
from aptix.workflows.store import InMemoryWorkflowStore, RevisionAction, WorkflowStore
from tests.databases import create_pg_database, drop_pg_database
from tests.workflows.conftest import KNOWN_TOOLS, make_manifest

FIELDS = {
    "userIntentPatterns": ["plan a team offsite"],
    "instructionText": "1. Ask for dates.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["Dates agreed."],
}
#: Eight fields eight concurrent updates each set, one field per update.
RACED_FIELDS = (
    "title",
    "description",
    "userIntentPatterns",
    "instructionText",
    "completionCriteria",
    "followUpOptions",
    "preconditions",
    "notes",
)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'aptix.db'}"
        return
    made = create_pg_database()
    yield made
    drop_pg_database(made)


@pytest.fixture
async def database(url: str) -> AsyncIterator[Database]:
    database = await open_database(url)
    yield database
    await database.close()


def _process(store: WorkflowStore) -> WorkflowServices:
    services = build_workflow_services(store)
    services.load_files(KNOWN_TOOLS, None)
    return services


def value_for(field: str, round_no: int, index: int) -> Any:
    text = f"round {round_no} update {index}"
    return text if field in ("title", "description", "instructionText") else [text]


async def test_the_store_refuses_an_append_based_on_an_old_revision(database: Database) -> None:
    for store in (SqlWorkflowStore(database), InMemoryWorkflowStore()):
        draft = make_manifest("trip", status="draft")
        first = await store.append(draft, RevisionAction.DRAFT, "ann", "acme", expected_revision=0)
        assert first.revision == 1
        with pytest.raises(RevisionConflict) as again:
            await store.append(draft, RevisionAction.DRAFT, "bob", "acme", expected_revision=0)
        assert (again.value.expected, again.value.current) == (0, 1)
        await store.append(draft, RevisionAction.UPDATE, "ann", "acme", expected_revision=1)
        with pytest.raises(RevisionConflict) as stale:
            await store.append(draft, RevisionAction.UPDATE, "bob", "acme", expected_revision=1)
        assert (stale.value.expected, stale.value.current) == (1, 2)
        assert [h.created_by for h in await store.history("trip", "acme")] == ["ann", "ann"]
        # Revisions are per org: globex's first revision of the same id is its own.
        theirs = await store.append(
            draft, RevisionAction.DRAFT, "eve", "globex", expected_revision=0
        )
        assert theirs.revision == 1


async def test_two_processes_racing_lose_no_acknowledged_change(database: Database) -> None:
    """Regression (issue 25): with only a per-process lock, 2 drafts were "created", a
    version was published twice and acknowledged updates were lost."""
    a, b = _process(SqlWorkflowStore(database)), _process(SqlWorkflowStore(database))
    both = (a.authoring, b.authoring)
    for round_no in range(2):
        wid = f"race_{round_no}"
        drafts = await asyncio.gather(
            *(
                both[i % 2].draft(wid, "Plan an offsite", "Plans one.", f"u{i}", "acme")
                for i in range(8)
            )
        )
        assert sum(d.ok for d in drafts) == 1, drafts
        assert (await a.authoring.update(wid, FIELDS, "ann", "acme")).ok
        updates = await asyncio.gather(
            *(
                both[i % 2].update(wid, {field: value_for(field, round_no, i)}, f"u{i}", "acme")
                for i, field in enumerate(RACED_FIELDS)
            )
        )
        final = (await b.authoring.get(wid, "acme")).workflow
        assert final is not None
        for i, (field, done) in enumerate(zip(RACED_FIELDS, updates, strict=True)):
            if done.ok:
                assert final[field] == value_for(field, round_no, i), (field, final)
            else:
                _assert_refused_naming_the_revision(done)
        published = await asyncio.gather(
            *(both[i % 2].publish(wid, f"u{i}", "acme") for i in range(8))
        )
        assert sum(p.ok for p in published) == 1, published
        history = await a.authoring.history(wid, "acme")
        assert [h.action for h in history].count(RevisionAction.DRAFT) == 1
        assert [h.action for h in history].count(RevisionAction.PUBLISH) == 1


def _assert_refused_naming_the_revision(done: AuthoringOutcome) -> None:
    assert done.current_revision is not None, done
    wire = done.to_wire()
    assert wire["currentRevision"] == done.current_revision
    message = wire["errors"][0]["message"]
    assert f"revision {done.current_revision}" in message
    assert "nothing was changed" in message


async def test_expected_revision_is_checked_by_every_change(tmp_path: Path) -> None:
    services = _process(InMemoryWorkflowStore())
    authoring = services.authoring
    drafted = await authoring.draft("offsite", "Offsite", "Plans.", "ann", "acme")
    assert drafted.revision == 1
    updated = await authoring.update("offsite", FIELDS, "ann", "acme", expected_revision=1)
    assert updated.ok
    assert updated.revision == 2
    stale = await authoring.update("offsite", {"notes": ["x"]}, "ann", "acme", expected_revision=1)
    assert stale.current_revision == 2
    assert stale.to_wire()["errors"] == [
        {
            "field": "expectedRevision",
            "message": "Workflow 'offsite' is now at revision 2, but this change was based on "
            "revision 1: nothing was changed. Read it again with get_workflow, then repeat "
            "the change on revision 2 if it still applies.",
        }
    ]
    assert (await authoring.get("offsite", "acme")).workflow["notes"] == []  # type: ignore[index]
    assert (await authoring.publish("offsite", "root", "acme", expected_revision=1)).conflict
    published = await authoring.publish("offsite", "root", "acme", expected_revision=2)
    assert published.ok
    assert published.revision == 3
    changed = {"status": "deprecated"}
    assert (
        await authoring.update("offsite", changed, "root", "acme", expected_revision=2)
    ).conflict
    assert (await authoring.update("offsite", changed, "root", "acme", expected_revision=3)).ok
    assert (await authoring.update("offsite", {"notes": ["n"]}, "ann", "acme")).revision == 5
    assert (await authoring.discard("offsite", "ann", "acme", expected_revision=4)).conflict
    assert (await authoring.discard("offsite", "ann", "acme", expected_revision=5)).ok
    disable = {"status": "disabled"}
    assert (await authoring.update("offsite", disable, "root", "acme", expected_revision=6)).ok
    assert (await authoring.remove("offsite", "root", "acme", expected_revision=6)).conflict
    assert (await authoring.remove("offsite", "root", "acme", expected_revision=7)).ok
    # Reads name the revision they saw; nothing refused above was written.
    assert (await authoring.get("offsite", "acme")).ok is False
    assert [h.revision for h in await authoring.history("offsite", "acme")] == list(range(1, 9))
    assert (await authoring.draft("offsite", "Again", "Plans.", "ann", "acme")).revision == 9
