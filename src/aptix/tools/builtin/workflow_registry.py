"""``agent_workflow_registry``: TUL-006 §5, the read-only catalog of workflows.

``list_workflows`` → ``{workflows:[{workflowId, title, description, userIntentPatterns}]}``;
``get_workflow_manifest`` → ``{workflow:{…}, warnings?:[…]}``;
``match_workflow`` → ``{matches:[{workflowId, title, matchScore, runnable, note?}]}``.
The tool never changes state (TUL-006 §5.4).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import Field

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.tools.args import ToolArgs, function_schema, parse_arguments
from aptix.tools.base import AgentTool
from aptix.tools.bulkhead import run_builtin
from aptix.tools.context import AgentToolExecutionContext
from aptix.workflows.manifest import WorkflowManifest, WorkflowStatus
from aptix.workflows.registry import DEFAULT_MATCH_LIMIT, WorkflowRegistry, status_note

__all__ = ["WorkflowRegistryTool"]

OPERATIONS = ("list_workflows", "get_workflow_manifest", "match_workflow")
MAX_MESSAGE_LENGTH = 4_000
MAX_LIMIT = 20


class _Args(ToolArgs):
    operation: str = Field(
        "",
        description="What to do: list_workflows, get_workflow_manifest or match_workflow.",
        json_schema_extra={"enum": list(OPERATIONS)},
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


def _dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


class WorkflowRegistryTool(AgentTool):
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
    is_fully_executed_on_server = True
    TOOL_ANNOTATIONS: ClassVar[dict[str, Any] | None] = {
        "title": "Workflow registry",
        "readOnlyHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }

    def __init__(self, registry: WorkflowRegistry, logger: AdminLogger) -> None:
        self._registry = registry
        self._logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        return function_schema(
            cls.TOOL_NAME,
            "Returns the workflow catalog, one workflow's manifest, or the workflows that "
            "match a user message.",
            _Args,
            required=("operation",),
        )

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Run one read-only operation."""
        parsed = parse_arguments(_Args, arguments_json)
        if parsed.result is None:
            return InvokeResult(errors=parsed.errors)
        args = parsed.result
        operation = args.operation.strip()
        try:
            if not operation:
                return InvokeResult.from_error(
                    f"Missing 'operation'. Use one of: {', '.join(OPERATIONS)}."
                )
            # Deployment-wide workflows plus the caller's org's own, never another org's.
            org = context.org
            if operation == "list_workflows":
                return self._list(org)
            if operation == "get_workflow_manifest":
                return self._manifest(args.workflow_id, org)
            if operation == "match_workflow":
                return await self._match(args.user_message, args.limit or DEFAULT_MATCH_LIMIT, org)
            return InvokeResult.from_error(
                f"Unknown operation '{operation}'. Use one of: {', '.join(OPERATIONS)}."
            )
        except Exception as exc:
            self._logger.add_exception(
                f"[{self.TOOL_NAME}_ExecuteAsync__Exception]",
                exc,
                *context.log_pairs(),
                ("Operation", operation),
            )
            return InvokeResult.from_error(
                "The workflow registry failed unexpectedly. The error has been logged."
            )

    def _list(self, org: str) -> InvokeResult[str]:
        rows = [
            {
                "workflowId": m.workflow_id,
                "title": m.title,
                "description": m.description,
                "userIntentPatterns": list(m.user_intent_patterns),
            }
            for m in self._registry.listed(org)
        ]
        return InvokeResult.create(_dump({"workflows": rows}))

    def _manifest(self, workflow_id: str | None, org: str) -> InvokeResult[str]:
        wanted = (workflow_id or "").strip()
        if not wanted:
            return InvokeResult.from_error(
                "Operation 'get_workflow_manifest' requires a non-empty 'workflowId'."
            )
        manifest = self._registry.get(wanted, org)
        if manifest is None:
            return InvokeResult.from_error(f"Unknown workflow '{wanted}'.")
        wid = manifest.workflow_id
        if manifest.status is WorkflowStatus.DISABLED:
            return InvokeResult.from_error(f"Workflow '{wid}' is disabled and cannot be run.")
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
        return InvokeResult.create(_dump(payload))

    async def _match(self, user_message: str | None, limit: int, org: str) -> InvokeResult[str]:
        message = (user_message or "").strip()
        if not message:
            return InvokeResult.from_error(
                "Operation 'match_workflow' requires a non-empty 'userMessage'."
            )
        if len(message) > MAX_MESSAGE_LENGTH:
            return InvokeResult.from_error(
                f"'userMessage' is too long ({len(message)} characters; "
                f"the limit is {MAX_MESSAGE_LENGTH})."
            )
        # Encoding a message with the semantic model takes milliseconds of CPU: keep it off
        # the event loop.
        found = await run_builtin(self._registry.match, message, limit, org)
        matches = [m.to_wire() for m in found]
        return InvokeResult.create(_dump({"matches": matches}))


def _approval_note(manifest: WorkflowManifest) -> str | None:
    if not manifest.requires_approval:
        return None
    return (
        f"Workflow '{manifest.workflow_id}' requires approval before use: call "
        "request_user_approval before each of its destructiveActions."
    )
