"""``agent_workflow_authoring``: TUL-006 §10, drafting and publishing workflows.

Every outcome, success or refusal, is the §10.3 envelope ``{ok, workflow?, workflows?,
messages?}`` or ``{ok: false, errors: [{field, message}]}``: the model treats errors as
guidance to fix the draft with the user, not as a failed call. Only an unexpected exception
becomes a failed ``InvokeResult``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import Field

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.tools.args import ToolArgs, function_schema, parse_arguments
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolExecutionContext
from aptix.workflows.authoring import WorkflowAuthoring
from aptix.workflows.outcome import UPDATABLE_FIELDS, AuthoringOutcome, normalise_fields

__all__ = ["WorkflowAuthoringTool"]

OPERATIONS = (
    "draft_workflow",
    "get_workflow",
    "update_workflow",
    "validate_workflow",
    "publish_workflow",
    "list_authoring_workflows",
    "remove_workflow",
    "discard_draft",
    "workflow_history",
)
_NEEDS_ID = frozenset(OPERATIONS) - {"list_authoring_workflows"}
#: The weakest API key role each changing operation needs (reading needs none).
_ROLE_NEEDED = {
    "draft_workflow": "author",
    "update_workflow": "author",
    "validate_workflow": "author",
    "discard_draft": "author",
    "publish_workflow": "admin",
    "remove_workflow": "admin",
}
_RANK = {"user": 0, "author": 1, "admin": 2}


class _Args(ToolArgs):
    operation: str = Field(
        "",
        description="One of: " + ", ".join(OPERATIONS) + ".",
        json_schema_extra={"enum": list(OPERATIONS)},
    )
    workflow_id: str | None = Field(
        None, description="The workflow's snake_case id (every operation but the list)."
    )
    title: str | None = Field(None, description="draft_workflow: the new workflow's title.")
    description: str | None = Field(
        None, description="draft_workflow: one or two sentences on what the workflow does."
    )
    fields: dict[str, Any] | None = Field(
        None,
        description="update_workflow: the fields to set, from: " + ", ".join(UPDATABLE_FIELDS),
    )


def _envelope(outcome: AuthoringOutcome) -> InvokeResult[str]:
    return InvokeResult.create(
        json.dumps(outcome.to_wire(), ensure_ascii=False, separators=(",", ":"))
    )


def _role_refusal(operation: str, args: _Args, role: str) -> AuthoringOutcome | None:
    """Why ``role`` may not run ``operation``, or None when it may."""
    needed = _ROLE_NEEDED.get(operation)
    if operation == "update_workflow" and _changes_status(args.fields):
        # Deprecating, disabling or re-publishing is governance: an admin's call.
        needed = "admin"
    if needed is None or _RANK.get(role, -1) >= _RANK[needed]:
        return None
    what = "a status change" if operation == "update_workflow" and needed == "admin" else operation
    return AuthoringOutcome.fail(
        "role",
        f"{what} needs the '{needed}' role (or higher); this API key's role is '{role}'. "
        "Ask an administrator.",
    )


def _changes_status(fields: dict[str, Any] | None) -> bool:
    changes, _ = normalise_fields(fields or {})
    status = changes.get("status")
    return status is not None and str(status).strip().lower() != "draft"


class WorkflowAuthoringTool(AgentTool):
    """Drafts, edits, validates, publishes and lists workflows under the user's direction."""

    TOOL_NAME = "agent_workflow_authoring"
    TOOL_USAGE_METADATA = (
        "Use this tool only when the user asks to create or change a workflow. Ask before "
        "drafting, confirm every change before update_workflow, run validate_workflow and fix "
        "its errors with the user, and call request_user_approval before publish_workflow. "
        "Results are {ok, workflow?, workflows?, messages?} or {ok:false, errors:[{field, "
        "message}]}; treat errors as authoritative. Never invent workflow ids or tool names."
    )
    is_fully_executed_on_server = True
    TOOL_ANNOTATIONS: ClassVar[dict[str, Any] | None] = {
        "title": "Workflow authoring",
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    }

    def __init__(self, authoring: WorkflowAuthoring, logger: AdminLogger) -> None:
        self._authoring = authoring
        self._logger = logger

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        return function_schema(
            cls.TOOL_NAME,
            "Creates, edits, validates and publishes workflow definitions.",
            _Args,
            required=("operation",),
        )

    async def execute(
        self, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Run one authoring operation and return its envelope."""
        parsed = parse_arguments(_Args, arguments_json)
        if parsed.result is None:
            return _envelope(AuthoringOutcome.fail("", parsed.error_message or "Bad arguments."))
        args = parsed.result
        try:
            return _envelope(await self._run(args, context))
        except Exception as exc:
            self._logger.add_exception(
                f"[{self.TOOL_NAME}_ExecuteAsync__Exception]",
                exc,
                *context.log_pairs(),
                ("Operation", args.operation),
            )
            return InvokeResult.from_error(
                "The workflow authoring tool failed unexpectedly. The error has been logged."
            )

    async def _run(self, args: _Args, context: AgentToolExecutionContext) -> AuthoringOutcome:
        operation = args.operation.strip()
        actor = context.user or None
        if not operation:
            return AuthoringOutcome.fail(
                "operation", f"Missing 'operation'. Use one of: {', '.join(OPERATIONS)}."
            )
        if operation not in OPERATIONS:
            return AuthoringOutcome.fail(
                "operation",
                f"Unknown operation '{operation}'. Use one of: {', '.join(OPERATIONS)}.",
            )
        refusal = _role_refusal(operation, args, context.role)
        if refusal is not None:
            return refusal
        org = context.org
        if operation == "list_authoring_workflows":
            return await self._authoring.list_workflows(org)
        workflow_id = (args.workflow_id or "").strip()
        if operation in _NEEDS_ID and not workflow_id:
            return AuthoringOutcome.fail(
                "workflowId", f"Operation '{operation}' requires a non-empty 'workflowId'."
            )
        if operation == "draft_workflow":
            return await self._authoring.draft(
                workflow_id, args.title or "", args.description or "", actor, org
            )
        if operation == "get_workflow":
            return await self._authoring.get(workflow_id, org)
        if operation == "update_workflow":
            return await self._authoring.update(workflow_id, args.fields, actor, org)
        if operation == "validate_workflow":
            return await self._authoring.validate(workflow_id, org)
        if operation == "publish_workflow":
            return await self._authoring.publish(workflow_id, actor, org)
        if operation == "discard_draft":
            return await self._authoring.discard(workflow_id, actor, org)
        if operation == "workflow_history":
            return await self._authoring.history_outcome(workflow_id, org)
        return await self._authoring.remove(workflow_id, actor, org)
