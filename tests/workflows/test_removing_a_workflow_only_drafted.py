"""``remove_workflow`` on a workflow with only a draft says so, and points to ``discard_draft``.

It answered "Unknown workflow 'X'." while ``get_workflow`` returned the draft. Removal stays
refused: TUL-006 §8.9 removes a served workflow once it is disabled, and a draft is never
served; ``discard_draft`` is what drops it.
"""

from __future__ import annotations

from typing import Any

from tests.workflows.conftest import succeeded
from tests.workflows.test_authoring_tool import COMPLETE, draft, publish, update

NO_PUBLISHED = (
    "Workflow 'onboard_hire' has no published version to remove, only a draft (version "
    "{version}); drop it with discard_draft."
)


async def test_a_workflow_never_published_is_not_unknown_to_remove(tool, context) -> None:
    await draft(tool, context)
    refused = await succeeded(tool, context, operation="remove_workflow", workflowId="onboard_hire")
    assert refused == {
        "ok": False,
        "errors": [{"field": "status", "message": NO_PUBLISHED.format(version="0.1.0")}],
    }
    got = await succeeded(tool, context, operation="get_workflow", workflowId="onboard_hire")
    assert got["ok"] is True
    assert got["workflow"]["status"] == "draft"
    discarded = await succeeded(tool, context, operation="discard_draft", workflowId="onboard_hire")
    assert discarded["ok"] is True


async def test_a_removed_workflow_drafted_again_is_refused_the_same_way(tool, context) -> None:
    await draft(tool, context)
    await update(tool, context, COMPLETE)
    await publish(tool, context)
    await update(tool, context, {"status": "disabled"})
    await succeeded(tool, context, operation="remove_workflow", workflowId="onboard_hire")
    await draft(tool, context)
    refused: Any = await succeeded(
        tool, context, operation="remove_workflow", workflowId="onboard_hire"
    )
    assert refused["errors"] == [
        {"field": "status", "message": NO_PUBLISHED.format(version="0.2.0")}
    ]


async def test_a_workflow_never_drafted_is_still_unknown(tool, context) -> None:
    refused = await succeeded(tool, context, operation="remove_workflow", workflowId="nothing")
    assert refused["errors"] == [{"field": "workflowId", "message": "Unknown workflow 'nothing'."}]
