"""A session's active workflow as the model is told of it, and when it stops being runnable.

Every model request states the session's workflow, active or none (TUL-006 §6.4, §7.5): it
may have been started, inherited or cancelled outside the model's own calls (HTTP, MCP, the
CLI, a branch, a user cancel), and the model's transcript would say otherwise or nothing. An
active workflow that is no longer served, or no longer runnable (disabled), is released at the
session's next turn (``Runtime``), and :func:`ended_note` tells the model why.
"""

from __future__ import annotations

import json

from aptix.workflows.manifest import WorkflowManifest, WorkflowStatus
from aptix.workflows.registry import WorkflowRegistry

__all__ = ["active_workflow_lines", "ended_note", "running_manifest"]

NONE_ACTIVE = (
    "Active workflow: none. This is the session's state now, whatever earlier messages say."
)


def running_manifest(
    registry: WorkflowRegistry, workflow_id: str, org: str | None
) -> WorkflowManifest | None:
    """The manifest a session may keep running, or None when it is not served or runnable.

    ``WorkflowRegistry.get`` returns a disabled manifest too: disabling is how an admin stops
    a workflow, so it stops granting its tools where it already runs (DESIGN §6).
    """
    manifest = registry.get(workflow_id, org)
    return manifest if manifest is not None and manifest.runnable else None


def active_workflow_lines(
    registry: WorkflowRegistry, workflow_id: str | None, org: str | None
) -> str:
    """The system message's lines on the session's active workflow (or that none is)."""
    manifest = running_manifest(registry, workflow_id, org) if workflow_id else None
    if manifest is None:
        # An active workflow not runnable any more is released before the model is asked.
        return NONE_ACTIVE
    # The title is an author's text: a JSON string, so it cannot pass for more of this message.
    title = json.dumps(" ".join(manifest.title.split()), ensure_ascii=False)
    return "\n".join(
        [
            f"Active workflow: {manifest.workflow_id}, title {title}, version "
            f"{manifest.version}. This is the session's state now, whatever earlier messages "
            "say: treat the workflow as the context of this conversation and tell the user "
            "which workflow is active if there is any confusion.",
            "Follow its instructionText (read it with agent_workflow_registry "
            "get_workflow_manifest if it is not in this conversation), use only the tools "
            "offered, and end it with agent_workflow_run: complete_workflow once its "
            "completion criteria are met, cancel_workflow if the user wants to stop.",
        ]
    )


def ended_note(workflow_id: str, manifest: WorkflowManifest | None) -> str:
    """The one line telling the model that ``workflow_id`` was active and has been released."""
    if manifest is not None and manifest.status is WorkflowStatus.DISABLED:
        why = "has been disabled"
    elif manifest is not None:  # served, in a status no session may run
        why = f"is now {manifest.status.value}, which cannot run"
    else:
        why = "is no longer served (it was removed or no longer validates)"
    return (
        f"Note: workflow '{workflow_id}' was active in this session but {why}, so it has "
        "ended and its rules no longer apply. Tell the user if they were relying on it."
    )
