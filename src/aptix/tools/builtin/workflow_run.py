"""``agent_workflow_run``: makes a workflow the session's active workflow, and ends it.

The only way a workflow becomes active or stops being active (DESIGN §4, §6), so that
``agent_workflow_registry`` stays read-only. A second workflow cannot start while one is
active unless the active manifest's ``allowedTransitions`` names it (or ``"*"``).

Each operation decides on the session as read, then writes with a compare-and-set on the
active workflow it read: two callers (two HTTP requests, MCP and a model turn) cannot both
start a workflow on one session. The loser decides again on the session as it is now, and is
refused (or, where the winner's manifest allows it, transitions) like any later call.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.sessions.manager import SessionManager
from aptix.sessions.models import AgentSession
from aptix.tools.builtin.base import (
    BuiltinTool,
    OperationArgs,
    Payload,
    hints,
    operation_field,
    operation_refusal,
    too_long,
)
from aptix.tools.builtin.workflow_registry import enabled_manifest
from aptix.tools.context import AgentToolExecutionContext
from aptix.workflows.manifest import WorkflowManifest
from aptix.workflows.registry import WorkflowRegistry, status_note
from aptix.workflows.validation import ALWAYS_OFFERED_TOOLS

__all__ = ["WorkflowRunTool"]

OPERATIONS = ("start_workflow", "complete_workflow", "cancel_workflow")
MAX_SUMMARY_LENGTH = 4_000
#: Decisions taken on one call before giving up on a session whose workflow keeps changing.
ATTEMPTS = 3


class _Raced(Exception):
    """The session's active workflow changed between the call reading it and writing it."""


class _Args(OperationArgs):
    operation: str = operation_field(
        OPERATIONS, "start_workflow, complete_workflow or cancel_workflow."
    )
    workflow_id: str | None = Field(None, description="The workflow to start, complete or cancel.")
    summary: str | None = Field(
        None, description="complete_workflow: what the workflow achieved, for the user."
    )
    reason: str | None = Field(None, description="cancel_workflow: why it is being cancelled.")


class WorkflowRunTool(BuiltinTool[_Args, dict[str, Any]]):
    """Starts, completes and cancels the session's active workflow."""

    TOOL_NAME = "agent_workflow_run"
    TOOL_USAGE_METADATA = (
        "Call start_workflow with the workflowId once the user has confirmed (unless the "
        "workflow is auto-start) and you have read its manifest; while it is active only its "
        "permittedTools are available. When the completion criteria are met call "
        "complete_workflow with a summary and offer the returned followUpOptions. Call "
        "cancel_workflow when the user wants to stop."
    )
    TOOL_ANNOTATIONS = hints("Run a workflow", read_only=False, destructive=False, idempotent=False)
    FAILURE = "The workflow run tool failed unexpectedly. The error has been logged."

    def __init__(
        self, registry: WorkflowRegistry, sessions: SessionManager, logger: AdminLogger
    ) -> None:
        super().__init__(logger)
        self._registry = registry
        self._sessions = sessions

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """Return the function-tool schema."""
        return cls.function_schema(
            "Starts a workflow in this session, or completes or cancels the active one.",
            required=("operation", "workflowId"),
        )

    async def run(self, args: _Args, context: AgentToolExecutionContext) -> Payload:
        """Run one operation on the session's active workflow."""
        operation = args.operation.strip()
        workflow_id = (args.workflow_id or "").strip()
        refusal = operation_refusal(operation, OPERATIONS)
        if refusal:
            return InvokeResult.from_error(refusal)
        if not workflow_id:
            return InvokeResult.from_error(
                f"Operation '{operation}' requires a non-empty 'workflowId'."
            )
        if not context.session_id:
            return InvokeResult.from_error(
                "agent_workflow_run needs a session: this call has no session id."
            )
        for _ in range(ATTEMPTS):
            session = await self._sessions.get_session(context.session_id, context.org)
            if session is None:
                return InvokeResult.from_error(f"Session '{context.session_id}' was not found.")
            try:
                return await self._operate(operation, session, workflow_id, args, context)
            except _Raced:
                continue  # decide again on the session as another caller has left it
        return InvokeResult.from_error(
            "The session's active workflow kept changing while this call ran: nothing was "
            "changed. Read the session again and retry."
        )

    async def _operate(
        self,
        operation: str,
        session: AgentSession,
        workflow_id: str,
        args: _Args,
        context: AgentToolExecutionContext,
    ) -> Payload:
        if operation == "start_workflow":
            return await self._start(session, workflow_id, context)
        if operation == "complete_workflow":
            return await self._complete(session, workflow_id, args.summary, context)
        return await self._cancel(session, workflow_id, args.reason, context)

    async def _start(
        self, session: AgentSession, workflow_id: str, context: AgentToolExecutionContext
    ) -> Payload:
        manifest = enabled_manifest(self._registry, workflow_id, context.org)
        if isinstance(manifest, InvokeResult):
            return manifest
        wid = manifest.workflow_id
        if not manifest.runnable:
            return InvokeResult.from_error(f"Workflow '{wid}' is not published.")
        active = session.active_workflow_id
        if active == wid:
            return InvokeResult.from_error(f"Workflow '{wid}' is already active in this session.")
        if active and not _allows(self._registry.get(active, context.org), wid):
            return InvokeResult.from_error(
                f"Workflow '{active}' is active; complete or cancel it before starting "
                f"'{wid}' (its manifest does not allow that transition)."
            )
        changed = await self._swap(session, wid, context)
        if changed is not None:
            return changed
        payload: dict[str, Any] = {
            "workflowId": wid,
            "title": manifest.title,
            "version": manifest.version,
            "state": "active",
            "permittedTools": sorted(set(manifest.permitted_tools) | ALWAYS_OFFERED_TOOLS),
            "requiredInputs": [i.model_dump(by_alias=True) for i in manifest.required_inputs],
            "requiresApproval": manifest.requires_approval,
        }
        if active:
            payload["previousWorkflowId"] = active
        note = status_note(manifest)
        if note:
            payload["warnings"] = [note]
        return payload

    async def _complete(
        self,
        session: AgentSession,
        workflow_id: str,
        summary: str | None,
        context: AgentToolExecutionContext,
    ) -> Payload:
        text = (summary or "").strip()
        if not text:
            return InvokeResult.from_error(
                "Operation 'complete_workflow' requires a non-empty 'summary' of what the "
                "workflow achieved."
            )
        if long := too_long("'summary'", text, MAX_SUMMARY_LENGTH):
            return InvokeResult.from_error(long)
        ended = await self._end(session, workflow_id, context)
        if ended is not None:
            return ended
        manifest = self._registry.get(workflow_id, context.org)
        return {
            "workflowId": session.active_workflow_id,
            "state": "completed",
            "summary": text,
            "followUpOptions": list(manifest.follow_up_options) if manifest else [],
        }

    async def _cancel(
        self,
        session: AgentSession,
        workflow_id: str,
        reason: str | None,
        context: AgentToolExecutionContext,
    ) -> Payload:
        ended = await self._end(session, workflow_id, context)
        if ended is not None:
            return ended
        payload: dict[str, Any] = {"workflowId": session.active_workflow_id, "state": "cancelled"}
        if reason and reason.strip():
            payload["reason"] = reason.strip()
        return payload

    async def _end(
        self, session: AgentSession, workflow_id: str, context: AgentToolExecutionContext
    ) -> InvokeResult[Any] | None:
        """Clear the active workflow ``workflow_id``; a failed result says why it cannot."""
        refusal = _not_active(session, workflow_id)
        if refusal:
            return InvokeResult.from_error(refusal)
        return await self._swap(session, None, context)

    async def _swap(
        self, session: AgentSession, workflow_id: str | None, context: AgentToolExecutionContext
    ) -> InvokeResult[Any] | None:
        """Make ``workflow_id`` active if the session's is still what ``session`` says.

        Raises :class:`_Raced` when another caller changed it since; a failed result says
        why it could not be written otherwise.
        """
        read = session.active_workflow_id
        changed = await self._sessions.set_active_workflow(
            session.id, workflow_id, context.org, context.user, expected=read
        )
        if changed.successful:
            return None
        now = await self._sessions.get_session(session.id, context.org)
        if now is not None and now.active_workflow_id != read:
            raise _Raced
        return changed


def _allows(active: WorkflowManifest | None, target: str) -> bool:
    # A vanished or disabled active workflow (its next turn releases it) must not trap the
    # session.
    if active is None or not active.runnable:
        return True
    return "*" in active.allowed_transitions or target in active.allowed_transitions


def _not_active(session: AgentSession, workflow_id: str) -> str | None:
    active = session.active_workflow_id
    if not active:
        return "No workflow is active in this session."
    if active != workflow_id:
        return f"Workflow '{workflow_id}' is not the active workflow ('{active}' is)."
    return None
