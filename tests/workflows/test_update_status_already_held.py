"""An ``update_workflow`` status the workflow already has changes nothing, and fields re-sent
as read do not turn a status change into a refused two-part change (review s2-F2)."""

from __future__ import annotations

import pytest

from aptix.workflows.store import InMemoryWorkflowStore
from tests.workflows.conftest import succeeded, update_offsite


def _nothing_changed(names: str, revision: int) -> str:
    held = "holds the value" if "," not in names else "hold the values"
    return (
        f"Nothing changed: {names} of 'offsite' already {held} given, so no revision was "
        f"written (the workflow stays at revision {revision})."
    )


@pytest.mark.parametrize("status", ["published", "Active", " published "])
@pytest.mark.usefixtures("published")
async def test_published_on_a_published_workflow_changes_nothing(
    tool, context, store: InMemoryWorkflowStore, status: str
) -> None:
    result = await update_offsite(tool, context, {"status": status})
    assert result["ok"] is True, result
    assert result["messages"] == [_nothing_changed("status", 3)]
    assert result["revision"] == 3
    assert result["workflow"]["status"] == "published"
    assert len(await store.history("offsite", context.org)) == 3


@pytest.mark.parametrize("status", ["deprecated", "disabled"])
@pytest.mark.usefixtures("published")
async def test_a_status_set_again_writes_no_revision(
    tool, context, store: InMemoryWorkflowStore, status: str
) -> None:
    first = await update_offsite(tool, context, {"status": status})
    assert first["ok"] is True, first
    assert first["messages"] == [f"Workflow 'offsite' is now {status}."]
    assert first["revision"] == 4
    for _ in range(2):
        again = await update_offsite(tool, context, {"status": status})
        assert again["ok"] is True, again
        assert again["messages"] == [_nothing_changed("status", 4)]
        assert again["revision"] == 4
        assert again["workflow"]["status"] == status
    assert len(await store.history("offsite", context.org)) == 4
    # A real change back is still a status change, written once.
    back = await update_offsite(tool, context, {"status": "published"})
    assert back["messages"] == ["Workflow 'offsite' is now published."]
    assert back["revision"] == 5


@pytest.mark.usefixtures("published")
async def test_a_new_status_with_fields_resent_as_read_is_a_status_change(
    tool, context, store: InMemoryWorkflowStore
) -> None:
    fields = {"title": " Offsite ", "userIntentPatterns": "plan a team offsite"}
    result = await update_offsite(tool, context, {**fields, "status": "disabled"})
    assert result["ok"] is True, result
    assert result["messages"] == ["Workflow 'offsite' is now disabled."]
    assert (result["workflow"]["status"], result["workflow"]["version"]) == ("disabled", "0.1.0")
    assert result["revision"] == 4
    # The whole workflow sent back as read, status included, changes nothing.
    again = await update_offsite(tool, context, {**fields, "status": "disabled"})
    assert again["ok"] is True, again
    assert again["messages"] == [_nothing_changed("status, title, userIntentPatterns", 4)]
    assert len(await store.history("offsite", context.org)) == 4


@pytest.mark.parametrize("status", ["published", "deprecated"])
@pytest.mark.usefixtures("published")
async def test_a_status_with_a_field_that_changes_is_still_refused(
    tool, context, store: InMemoryWorkflowStore, status: str
) -> None:
    result = await update_offsite(tool, context, {"title": "Offsite 2", "status": status})
    assert result["ok"] is False
    assert result["errors"] == [
        {"field": "status", "message": "Change status in an update_workflow call of its own."}
    ]
    assert len(await store.history("offsite", context.org)) == 3


@pytest.mark.usefixtures("published")
async def test_a_pending_draft_still_blocks_a_status_the_served_version_has(
    tool, context, store: InMemoryWorkflowStore
) -> None:
    assert (await update_offsite(tool, context, {"description": "Plans it well."}))["ok"]
    result = await update_offsite(tool, context, {"status": "published"})
    assert result["ok"] is False
    assert "has a pending draft (version 0.1.1)" in result["errors"][0]["message"]
    assert len(await store.history("offsite", context.org)) == 4


async def test_a_never_published_draft_is_still_told_to_publish(
    tool, context, store: InMemoryWorkflowStore
) -> None:
    args = {"workflowId": "offsite", "title": "Offsite", "description": "Plans it."}
    assert (await succeeded(tool, context, operation="draft_workflow", **args))["ok"]
    result = await update_offsite(tool, context, {"title": "Offsite", "status": "published"})
    assert result["ok"] is False
    assert result["errors"] == [
        {
            "field": "status",
            "message": "Workflow 'offsite' has no published version; use publish_workflow.",
        }
    ]
    assert len(await store.history("offsite", context.org)) == 1
