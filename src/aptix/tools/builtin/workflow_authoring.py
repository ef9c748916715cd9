"""``agent_workflow_authoring``: TUL-006 §10, drafting and publishing workflows.

Every outcome, success or refusal, is the §10.3 envelope ``{ok, workflow?, workflows?,
messages?}`` or ``{ok: false, errors: [{field, message}]}``: the model treats errors as
guidance to fix the draft with the user, not as a failed call. Only an unexpected exception
becomes a failed ``InvokeResult``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.tools.args import parse_arguments
from aptix.tools.builtin.base import (
    BuiltinTool,
    OperationArgs,
    compact_json,
    hints,
    operation_field,
    operation_refusal,
)
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
#: The operations that only read: one left running at its time limit changed nothing.
_READS = frozenset(
    {"get_workflow", "validate_workflow", "list_authoring_workflows", "workflow_history"}
)
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


class _Args(OperationArgs):
    operation: str = operation_field(OPERATIONS, "One of: " + ", ".join(OPERATIONS) + ".")
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
    expected_revision: int | None = Field(
        None,
        description="Changing operations: the revision this change is based on (the "
        "'revision' of your last get_workflow); refused if the workflow changed since.",
    )

    @field_validator("expected_revision", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: Any) -> Any:
        # Lax validation would read true as revision 1: a revision is a number, never a flag.
        if isinstance(value, bool):
            raise ValueError("must be a revision number, not true or false")
        return value


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


class WorkflowAuthoringTool(BuiltinTool[_Args, dict[str, Any]]):
    """Drafts, edits, validates, publishes and lists workflows under the user's direction."""

    TOOL_NAME = "agent_workflow_authoring"
    TOOL_USAGE_METADATA = (
        "Use this tool only when the user asks to create or change a workflow. Ask before "
        "drafting, confirm every change before update_workflow, run validate_workflow and fix "
        "its errors with the user, and call request_user_approval before publish_workflow. "
        "Results are {ok, workflow?, workflows?, messages?} or {ok:false, errors:[{field, "
        "message}]}; treat errors as authoritative. Never invent workflow ids or tool names."
    )
    TOOL_ANNOTATIONS = hints(
        "Workflow authoring", read_only=False, destructive=True, idempotent=False
    )
    FAILURE = "The workflow authoring tool failed unexpectedly. The error has been logged."

    def __init__(self, authoring: WorkflowAuthoring, logger: AdminLogger) -> None:
        super().__init__(logger)
        self._authoring = authoring

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        return cls.function_schema(
            "Creates, edits, validates and publishes workflow definitions.",
            required=("operation",),
        )

    def invalid(self, message: str) -> InvokeResult[str]:
        """Arguments that do not parse are guidance in the envelope, not a failed call."""
        return InvokeResult.create(compact_json(AuthoringOutcome.fail("", message).to_wire()))

    async def current_revision(self, arguments: str, org: str) -> int | None:
        """The revision of ``org``'s workflow that ``arguments`` name, for an ``ETag``."""
        args = parse_arguments(_Args, arguments).result
        workflow_id = args.workflow_id if args is not None else None
        if not workflow_id or not workflow_id.strip():
            return None
        return await self._authoring.revision(workflow_id, org)

    def reads_only(self, arguments: str) -> bool:
        """True when ``arguments`` name an operation that only reads (get, list, history)."""
        args = parse_arguments(_Args, arguments).result
        return args is not None and args.operation.strip() in _READS

    async def run(self, args: _Args, context: AgentToolExecutionContext) -> dict[str, Any]:
        """Run one authoring operation and return its envelope."""
        return (await self._run(args, context)).to_wire()

    async def _run(self, args: _Args, context: AgentToolExecutionContext) -> AuthoringOutcome:
        operation = args.operation.strip()
        actor = context.user or None
        wrong = operation_refusal(operation, OPERATIONS)
        if wrong:
            return AuthoringOutcome.fail("operation", wrong)
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
        expected = args.expected_revision
        if operation == "draft_workflow":
            return await self._authoring.draft(
                workflow_id,
                args.title or "",
                args.description or "",
                actor,
                org,
                expected_revision=expected,
            )
        if operation == "get_workflow":
            return await self._authoring.get(workflow_id, org)
        if operation == "update_workflow":
            return await self._authoring.update(
                workflow_id, args.fields, actor, org, expected_revision=expected
            )
        if operation == "validate_workflow":
            return await self._authoring.validate(workflow_id, org)
        if operation == "publish_workflow":
            return await self._authoring.publish(
                workflow_id, actor, org, expected_revision=expected
            )
        if operation == "discard_draft":
            return await self._authoring.discard(
                workflow_id, actor, org, expected_revision=expected
            )
        if operation == "workflow_history":
            return await self._authoring.history_outcome(workflow_id, org)
        return await self._authoring.remove(workflow_id, actor, org, expected_revision=expected)
