"""An ``update_workflow`` that sets nothing is refused, and one that changes nothing is
answered so; neither writes a revision."""

from __future__ import annotations

from typing import Any

import pytest

from aptix.workflows.store import InMemoryWorkflowStore
from tests.workflows.conftest import OFFSITE_FIELDS, succeeded, update_offsite


@pytest.mark.parametrize(
    "fields", [{"status": None}, {"Status": None}, {"notes": None, "title": None}]
)
@pytest.mark.usefixtures("published")
async def test_fields_whose_values_are_all_null_are_refused_like_no_fields(
    tool, context, store: InMemoryWorkflowStore, fields: dict[str, Any]
) -> None:
    result = await update_offsite(tool, context, fields)
    assert result["ok"] is False
    assert result["errors"] == [
        {
            "field": "fields",
            "message": "fields must name at least one field to set: every value given is null.",
        }
    ]
    assert len(await store.history("offsite", context.org)) == 3


@pytest.mark.parametrize("status", [None, 3, True, ["disabled"]])
@pytest.mark.usefixtures("published")
async def test_a_status_that_is_not_text_is_refused_on_its_field(
    tool, context, store: InMemoryWorkflowStore, status: Any
) -> None:
    result = await update_offsite(tool, context, {"status": status, "notes": ["bring snacks"]})
    assert result["ok"] is False
    assert result["errors"] == [
        {"field": "status", "message": "status must be draft, published, deprecated or disabled."}
    ]
    assert len(await store.history("offsite", context.org)) == 3


@pytest.mark.usefixtures("published")
async def test_status_draft_alone_starts_a_draft_once_and_then_sets_nothing(
    tool, context, store: InMemoryWorkflowStore
) -> None:
    started = await update_offsite(tool, context, {"status": "draft"})
    assert started["ok"], started
    assert started["workflow"]["version"] == "0.1.1"
    assert not any("Updated" in m for m in started["messages"])
    again = await update_offsite(tool, context, {"status": "draft"})
    assert again["ok"] is False
    assert again["errors"][0]["field"] == "status"
    assert "is a draft already" in again["errors"][0]["message"]
    assert len(await store.history("offsite", context.org)) == 4


# Review r3-F3: a field set to the value it holds wrote a revision, said "Updated title" and,
# on a published workflow, left an empty pending draft that then blocked disabling it.


@pytest.mark.parametrize(
    "fields",
    [
        {"title": "Offsite"},
        {"Title": "  Offsite  "},  # stored trimmed: the same value
        {"title": "Offsite", "permittedTools": ["agent_calculator"], "version": "0.1.0"},
        {"userIntentPatterns": "plan a team offsite"},  # one string is a one-item list
    ],
)
@pytest.mark.usefixtures("published")
async def test_fields_that_hold_the_values_given_change_nothing(
    tool, context, store: InMemoryWorkflowStore, fields: dict[str, Any]
) -> None:
    result = await update_offsite(tool, context, fields)
    assert result["ok"] is True, result
    names = ", ".join(sorted(k[0].lower() + k[1:] for k in fields))
    held = "holds the value" if len(fields) == 1 else "hold the values"
    assert result["messages"] == [
        f"Nothing changed: {names} of 'offsite' already {held} given, so no revision "
        "was written (the workflow stays at revision 3).",
        "No draft was created; version 0.1.0 stays served.",
    ]
    assert result["revision"] == 3
    assert (result["workflow"]["status"], result["workflow"]["version"]) == ("published", "0.1.0")
    assert len(await store.history("offsite", context.org)) == 3
    # No pending draft is left to block an admin's status change.
    disabled = await update_offsite(tool, context, {"status": "disabled"})
    assert disabled["ok"] is True, disabled


async def test_a_draft_given_its_own_values_writes_no_revision(
    tool, context, store: InMemoryWorkflowStore
) -> None:
    args = {"workflowId": "offsite", "title": "Offsite", "description": "Plans it."}
    assert (await succeeded(tool, context, operation="draft_workflow", **args))["ok"]
    assert (await update_offsite(tool, context, OFFSITE_FIELDS))["ok"]
    again = await update_offsite(tool, context, {**OFFSITE_FIELDS, "description": "Plans it."})
    assert again["ok"] is True, again
    assert again["revision"] == 2
    assert again["messages"][0].startswith(
        "Nothing changed: completionCriteria, description, instructionText, permittedTools, "
        "userIntentPatterns of 'offsite' already hold the values given"
    )
    assert len(again["messages"]) == 1
    assert len(await store.history("offsite", context.org)) == 2


@pytest.mark.usefixtures("published")
async def test_only_the_fields_that_change_are_named_as_updated(
    tool, context, store: InMemoryWorkflowStore
) -> None:
    result = await update_offsite(
        tool, context, {"title": "Offsite", "description": "Plans it well."}
    )
    assert result["ok"] is True, result
    assert result["messages"][0] == "Updated description of draft 'offsite'."
    assert result["workflow"]["version"] == "0.1.1"
    assert len(await store.history("offsite", context.org)) == 4


@pytest.mark.usefixtures("published")
async def test_status_draft_with_unchanged_fields_still_starts_the_draft_asked_for(
    tool, context, store: InMemoryWorkflowStore
) -> None:
    result = await update_offsite(tool, context, {"status": "draft", "title": "Offsite"})
    assert result["ok"] is True, result
    assert result["workflow"]["status"] == "draft"
    assert not any(m.startswith(("Updated", "Nothing")) for m in result["messages"])
    assert len(await store.history("offsite", context.org)) == 4
