"""An ``update_workflow`` that sets nothing is refused and writes no revision."""

from __future__ import annotations

from typing import Any

import pytest

from aptix.workflows.store import InMemoryWorkflowStore
from tests.workflows.conftest import succeeded

FIELDS = {
    "userIntentPatterns": ["plan a team offsite"],
    "instructionText": "1. Ask for dates.",
    "permittedTools": ["agent_calculator"],
    "completionCriteria": ["Dates agreed."],
}


async def _update(tool, context, fields: Any) -> Any:
    return await succeeded(
        tool, context, operation="update_workflow", workflowId="offsite", fields=fields
    )


@pytest.fixture
async def published(tool, context) -> None:
    """``offsite`` published at revision 3."""
    args = {"workflowId": "offsite", "title": "Offsite", "description": "Plans it."}
    assert (await succeeded(tool, context, operation="draft_workflow", **args))["ok"]
    assert (await _update(tool, context, FIELDS))["ok"]
    assert (await succeeded(tool, context, operation="publish_workflow", workflowId="offsite"))[
        "ok"
    ]


@pytest.mark.parametrize(
    "fields", [{"status": None}, {"Status": None}, {"notes": None, "title": None}]
)
@pytest.mark.usefixtures("published")
async def test_fields_whose_values_are_all_null_are_refused_like_no_fields(
    tool, context, store: InMemoryWorkflowStore, fields: dict[str, Any]
) -> None:
    result = await _update(tool, context, fields)
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
    result = await _update(tool, context, {"status": status, "notes": ["bring snacks"]})
    assert result["ok"] is False
    assert result["errors"] == [
        {"field": "status", "message": "status must be draft, published, deprecated or disabled."}
    ]
    assert len(await store.history("offsite", context.org)) == 3


@pytest.mark.usefixtures("published")
async def test_status_draft_alone_starts_a_draft_once_and_then_sets_nothing(
    tool, context, store: InMemoryWorkflowStore
) -> None:
    started = await _update(tool, context, {"status": "draft"})
    assert started["ok"], started
    assert started["workflow"]["version"] == "0.1.1"
    assert not any("Updated" in m for m in started["messages"])
    again = await _update(tool, context, {"status": "draft"})
    assert again["ok"] is False
    assert again["errors"][0]["field"] == "status"
    assert "is a draft already" in again["errors"][0]["message"]
    assert len(await store.history("offsite", context.org)) == 4
