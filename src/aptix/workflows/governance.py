"""Governance of a served workflow: status changes and removal (TUL-006 §8.2, §8.9).

Unlike content, which changes through a draft, governance acts on the served version at
once: ``deprecated`` and ``disabled`` (and back to ``published``), and removal of a disabled
workflow, whose history is kept. Neither happens while a draft is pending, and
deployment-wide workflows are read-only here. :class:`~aptix.workflows.authoring.
WorkflowAuthoring` calls these with a state it read under its lock.
"""

from __future__ import annotations

from aptix.workflows.manifest import WorkflowStatus
from aptix.workflows.outcome import AuthoringOutcome
from aptix.workflows.registry import WorkflowRegistry
from aptix.workflows.revisions import WorkflowState, commit
from aptix.workflows.store import RevisionAction, WorkflowStore
from aptix.workflows.validation import validate_manifest

__all__ = ["change_status", "parse_status", "read_only", "remove", "unchangeable"]


def parse_status(status: str) -> WorkflowStatus | AuthoringOutcome:
    """The status an ``update_workflow`` names (``active`` is ``published``), or the refusal."""
    try:
        return WorkflowStatus("published" if status == "active" else status)
    except ValueError:
        return AuthoringOutcome.fail(
            "status", "status must be draft, published, deprecated or disabled."
        )


async def change_status(
    store: WorkflowStore,
    registry: WorkflowRegistry,
    state: WorkflowState,
    target: WorkflowStatus,
    actor: str | None,
    org: str,
    expected_revision: int | None,
) -> AuthoringOutcome:
    """Deprecate, disable or re-publish the served version of ``state``'s workflow."""
    served = state.served
    if served is None and state.draft is None:
        # Another org's, never drafted or removed: no advice to publish what is not there.
        return AuthoringOutcome.fail("workflowId", f"Unknown workflow '{state.workflow_id}'.")
    if served is None:
        return AuthoringOutcome.fail(
            "status",
            f"Workflow '{state.workflow_id}' has no published version; use publish_workflow.",
        )
    refusal = _refusal(registry, state, expected_revision)
    if refusal is not None:
        return refusal
    if target is WorkflowStatus.PUBLISHED and served.status is WorkflowStatus.PUBLISHED:
        return AuthoringOutcome.fail("status", "Use publish_workflow to publish a draft.")
    problems = validate_manifest(served, registry.known_tools)
    if target is WorkflowStatus.PUBLISHED and problems:
        return AuthoringOutcome.failures(problems)
    changed = served.model_copy(update={"status": target})
    stored = await commit(store, state, changed, RevisionAction.STATUS, actor, org)
    if isinstance(stored, AuthoringOutcome):
        return stored
    registry.publish(changed, org=org)
    return AuthoringOutcome(
        ok=True,
        workflow=changed.to_wire(),
        revision=stored.revision,
        messages=(f"Workflow '{changed.workflow_id}' is now {target.value}.",),
    )


async def remove(
    store: WorkflowStore,
    registry: WorkflowRegistry,
    state: WorkflowState,
    actor: str | None,
    org: str,
    expected_revision: int | None,
) -> AuthoringOutcome:
    """Stop serving ``state``'s disabled workflow; its history is kept."""
    served = state.served
    if served is None:
        draft = state.draft
        if draft is None:
            return AuthoringOutcome.fail("workflowId", f"Unknown workflow '{state.workflow_id}'.")
        # Never published, or drafted again after a removal: get_workflow shows the draft,
        # so "unknown" would be untrue. Removal (TUL-006 §8.9) is of a disabled, served
        # workflow; a draft is dropped by discard_draft.
        return AuthoringOutcome.fail(
            "status",
            f"Workflow '{state.workflow_id}' has no published version to remove, only a draft "
            f"(version {draft.manifest.version}); drop it with discard_draft.",
        )
    refusal = _refusal(registry, state, expected_revision)
    if refusal is not None:
        return refusal
    if served.status is not WorkflowStatus.DISABLED:
        return AuthoringOutcome.fail(
            "status", f"Workflow '{served.workflow_id}' must be disabled before it is removed."
        )
    stored = await commit(store, state, served, RevisionAction.REMOVE, actor, org)
    if isinstance(stored, AuthoringOutcome):
        return stored
    registry.remove(served.workflow_id, org=org)
    return AuthoringOutcome(
        ok=True,
        revision=stored.revision,
        messages=(f"Workflow '{served.workflow_id}' was removed; its history is kept.",),
    )


def read_only(registry: WorkflowRegistry, workflow_id: str) -> AuthoringOutcome:
    """The refusal to change a built-in or file workflow, naming where it is defined."""
    source = registry.file_source(workflow_id) or "the deployment's files"
    return AuthoringOutcome.fail(
        "workflowId",
        f"Workflow '{workflow_id}' is defined in {source} for the whole deployment and is "
        "read-only to authoring; it changes through its file and a review (TUL-006 §8.2).",
    )


def unchangeable(
    registry: WorkflowRegistry, state: WorkflowState, expected_revision: int | None
) -> AuthoringOutcome | None:
    """The refusal when ``state``'s workflow is read-only or the caller's revision is stale."""
    if state.deployment_wide is not None:
        return read_only(registry, state.workflow_id)
    return state.stale(expected_revision)


def _refusal(
    registry: WorkflowRegistry, state: WorkflowState, expected_revision: int | None
) -> AuthoringOutcome | None:
    """Why governance may not act now: read-only, a stale caller, or a pending draft."""
    refusal = unchangeable(registry, state, expected_revision)
    if refusal is not None:
        return refusal
    draft = state.draft
    if draft is None:
        return None
    return AuthoringOutcome.fail(
        "status",
        f"Workflow '{state.workflow_id}' has a pending draft (version "
        f"{draft.manifest.version}); publish it with publish_workflow or drop it with "
        "discard_draft first, so that it is not lost.",
    )
