"""``agent_workflow_registry``: TUL-006 §5, the read-only catalog of workflows.

``list_workflows`` → ``{workflows:[{workflowId, title, description, userIntentPatterns}]}``;
``get_workflow_manifest`` → ``{workflow:{…}, warnings?:[…]}``;
``match_workflow`` → ``{matches:[{workflowId, title, matchScore, runnable, note?}]}``.
The tool never changes state (TUL-006 §5.4).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.tools.builtin.base import (
    BuiltinTool,
    OperationArgs,
    Payload,
    Refusal,
    hints,
    operation_field,
    operation_refusal,
    too_long,
)
from aptix.tools.bulkhead import run_builtin
from aptix.tools.context import AgentToolExecutionContext
from aptix.workflows.manifest import WorkflowManifest, WorkflowStatus
from aptix.workflows.registry import DEFAULT_MATCH_LIMIT, WorkflowRegistry, status_note

__all__ = ["WorkflowRegistryTool"]

OPERATIONS = ("list_workflows", "get_workflow_manifest", "match_workflow")
MAX_MESSAGE_LENGTH = 4_000
MAX_LIMIT = 20


class _Args(OperationArgs):
    operation: str = operation_field(
        OPERATIONS, "What to do: list_workflows, get_workflow_manifest or match_workflow."
    )
    workflow_id: str | None = Field(
        None, description="The workflow to return (required for get_workflow_manifest)."
    )
    user_message: str | None = Field(
        None, description="The user's message to match (required for match_workflow)."
    )
    limit: int | None = Field(
        None,
        ge=1,
        le=MAX_LIMIT,
        description=f"match_workflow: most matches to return (default {DEFAULT_MATCH_LIMIT}).",
    )


class WorkflowRegistryTool(BuiltinTool[_Args, dict[str, Any]]):
    """Lists workflows, returns a workflow's manifest, and matches user messages to workflows."""

    TOOL_NAME = "agent_workflow_registry"
    TOOL_USAGE_METADATA = (
        "This tool provides workflow metadata: the list of workflows, a workflow's full "
        "manifest, and intent matching. Call match_workflow with the user's message when a "
        "request sounds multi-step or you are unsure which workflow applies; call "
        "get_workflow_manifest before starting a workflow and follow its instructionText "
        "exactly; call list_workflows when the user asks what you can do. Never invent a "
        "workflow that this tool does not return."
    )
    TOOL_ANNOTATIONS = hints("Workflow registry", read_only=True, idempotent=True)
    FAILURE = "The workflow registry failed unexpectedly. The error has been logged."

    def __init__(self, registry: WorkflowRegistry, logger: AdminLogger) -> None:
        super().__init__(logger)
        self._registry = registry

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        return cls.function_schema(
            "Returns the workflow catalog, one workflow's manifest, or the workflows that "
            "match a user message.",
            required=("operation",),
        )

    async def run(self, args: _Args, context: AgentToolExecutionContext) -> Payload:
        """Run one read-only operation."""
        operation = args.operation.strip()
        refusal = operation_refusal(operation, OPERATIONS)
        if refusal:
            return InvokeResult.from_error(refusal)
        # Deployment-wide workflows plus the caller's org's own, never another org's.
        org = context.org
        if operation == "list_workflows":
            return self._list(org)
        if operation == "get_workflow_manifest":
            return self._manifest(args.workflow_id, org)
        return await self._match(args.user_message, args.limit or DEFAULT_MATCH_LIMIT, org)

    def _list(self, org: str) -> Payload:
        rows = [
            {
                "workflowId": m.workflow_id,
                "title": m.title,
                "description": m.description,
                "userIntentPatterns": list(m.user_intent_patterns),
            }
            for m in self._registry.listed(org)
        ]
        return {"workflows": rows}

    def _manifest(self, workflow_id: str | None, org: str) -> Payload:
        wanted = (workflow_id or "").strip()
        if not wanted:
            return InvokeResult.from_error(
                "Operation 'get_workflow_manifest' requires a non-empty 'workflowId'."
            )
        manifest = enabled_manifest(self._registry, wanted, org)
        if isinstance(manifest, InvokeResult):
            return manifest
        wid = manifest.workflow_id
        if manifest.status is WorkflowStatus.DRAFT:
            return InvokeResult.from_error(f"Workflow '{wid}' is a draft and is not published.")
        problems = self._registry.problems(manifest)
        if problems:
            detail = "; ".join(p.message for p in problems)
            return InvokeResult.from_error(f"Workflow '{wid}' is incomplete: {detail}")
        payload: dict[str, Any] = {"workflow": manifest.to_wire()}
        warnings = [w for w in (status_note(manifest), _approval_note(manifest)) if w]
        if warnings:
            payload["warnings"] = warnings
        return payload

    async def _match(self, user_message: str | None, limit: int, org: str) -> Payload:
        message = (user_message or "").strip()
        if not message:
            return InvokeResult.from_error(
                "Operation 'match_workflow' requires a non-empty 'userMessage'."
            )
        if long := too_long("'userMessage'", message, MAX_MESSAGE_LENGTH):
            return InvokeResult.from_error(long)
        # The registry matches on the built-in worker pool, off the event loop, and may ask
        # the arbiter (APTIX_MATCH_ARBITER).
        found = await self._registry.match_async(message, limit, org, run=run_builtin)
        return {"matches": [m.to_wire() for m in found]}


def enabled_manifest(
    registry: WorkflowRegistry, workflow_id: str, org: str
) -> WorkflowManifest | Refusal:
    """The manifest of ``workflow_id`` as ``org`` sees it, or why it cannot be run."""
    manifest = registry.get(workflow_id, org)
    if manifest is None:
        return InvokeResult.from_error(f"Unknown workflow '{workflow_id}'.")
    if manifest.status is WorkflowStatus.DISABLED:
        wid = manifest.workflow_id
        return InvokeResult.from_error(f"Workflow '{wid}' is disabled and cannot be run.")
    return manifest


def _approval_note(manifest: WorkflowManifest) -> str | None:
    if not manifest.requires_approval:
        return None
    return (
        f"Workflow '{manifest.workflow_id}' requires approval before use: call "
        "request_user_approval before each of its destructiveActions."
    )
