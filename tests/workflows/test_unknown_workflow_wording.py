"""Every authoring operation answers "Unknown workflow" for an id the caller's org lacks.

``discard_draft`` and status changes spoke as if the workflow existed ("has no pending
draft", "has no published version; use publish_workflow") for another org's id, one never
drafted and one removed; get, publish and remove already answered "Unknown workflow".
"""

from __future__ import annotations

import pytest

from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.outcome import AuthoringOutcome
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.store import InMemoryWorkflowStore
from tests.workflows.conftest import KNOWN_TOOLS

FIELDS = {
    "userIntentPatterns": ["plan a team offsite"],
    "instructionText": "Ask where and when.",
    "permittedTools": ["agent_hello_world"],
    "completionCriteria": ["The offsite is planned."],
}


def _error(outcome: AuthoringOutcome) -> tuple[str, str]:
    assert not outcome.ok
    [error] = outcome.errors
    return error.field, error.message


@pytest.fixture
def authoring() -> WorkflowAuthoring:
    registry = WorkflowRegistry(known_tools=KNOWN_TOOLS)
    return WorkflowAuthoring(InMemoryWorkflowStore(), registry)


async def _retired(authoring: WorkflowAuthoring) -> None:
    """acme: 'drafted' only drafted, 'served' published, 'removed' published then removed."""
    for wid in ("drafted", "served", "removed"):
        assert (await authoring.draft(wid, "T", "D.", "ada", "acme")).ok
    for wid in ("served", "removed"):
        assert (await authoring.update(wid, FIELDS, "ada", "acme")).ok
        assert (await authoring.publish(wid, "root", "acme")).ok
    assert (await authoring.update("removed", {"status": "disabled"}, "root", "acme")).ok
    assert (await authoring.remove("removed", "root", "acme")).ok


@pytest.mark.parametrize(
    ("workflow_id", "org"),
    [
        ("drafted", "globex"),  # another org's draft
        ("served", "globex"),  # another org's published workflow
        ("never_existed", "acme"),
        ("removed", "acme"),
    ],
)
async def test_discard_and_status_changes_answer_unknown_workflow(
    authoring: WorkflowAuthoring, workflow_id: str, org: str
) -> None:
    await _retired(authoring)
    unknown = ("workflowId", f"Unknown workflow '{workflow_id}'.")
    assert _error(await authoring.get(workflow_id, org)) == unknown
    assert _error(await authoring.discard(workflow_id, "carol", org)) == unknown
    for status in ("deprecated", "disabled", "published"):
        changed = await authoring.update(workflow_id, {"status": status}, "carol", org)
        assert _error(changed) == unknown, status
    assert await authoring.history(workflow_id, "globex") == []  # nothing written for globex


async def test_the_org_that_has_the_workflow_still_gets_the_specific_answers(
    authoring: WorkflowAuthoring,
) -> None:
    await _retired(authoring)
    assert _error(await authoring.discard("served", "ada", "acme")) == (
        "workflowId",
        "Workflow 'served' has no pending draft.",
    )
    assert _error(await authoring.update("drafted", {"status": "deprecated"}, "ada", "acme")) == (
        "status",
        "Workflow 'drafted' has no published version; use publish_workflow.",
    )
