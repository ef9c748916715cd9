"""``/v1/sessions``: create, list and inspect the caller's sessions."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query

from aptix.api.auth import Caller
from aptix.api.errors import ApiError
from aptix.api.routes.deps import CallerDep, RuntimeDep
from aptix.api.schemas import SessionCreate
from aptix.runtime import Runtime
from aptix.sessions.models import AgentSession
from aptix.sessions.wire import session_to_json

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


async def owned_session(runtime: Runtime, caller: Caller, session_id: str) -> AgentSession:
    """The caller's session, or a 404 (another org's or user's id looks missing)."""
    session = await runtime.services.sessions.get_session(session_id, caller.org)
    if session is None or session.user != caller.user:
        raise ApiError(404, f"Unknown session '{session_id}'.")
    return session


@router.post("", status_code=201)
async def create_session(
    body: SessionCreate, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Create a session (in the default mode unless ``mode`` is given)."""
    created = await runtime.services.sessions.create_session(
        org=caller.org, user=caller.user, mode=body.mode, title=body.title
    )
    if created.result is None:
        raise ApiError(422, created.error_message or "Could not create the session.")
    return session_to_json(created.result)


@router.get("")
async def list_sessions(
    runtime: RuntimeDep,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[dict[str, Any]]:
    """The caller's sessions, most recently updated first."""
    sessions = await runtime.services.sessions.list_sessions(
        caller.org, caller.user, limit=limit, offset=offset
    )
    return [session_to_json(s) for s in sessions]


@router.get("/{session_id}")
async def get_session(session_id: str, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """One session with its mode history, branched sessions and turns."""
    session = await owned_session(runtime, caller, session_id)
    children = await runtime.services.sessions.list_children(session_id, caller.org)
    turns = await runtime.turns.list_turns(session_id, caller.org)
    return {
        **session_to_json(session),
        "childSessionIds": [c.id for c in children],
        "turns": [
            {
                "turnId": t.id,
                "seq": t.seq,
                "status": t.status,
                "instruction": t.instruction,
                "text": t.text,
                "toolCalls": t.tool_calls,
                "modelCalls": t.model_calls,
                "warnings": t.warnings,
                "pendingCalls": t.pending_calls,
                "createdAt": t.created_at.isoformat(),
                "updatedAt": t.updated_at.isoformat(),
            }
            for t in turns
        ],
    }


@router.post("/{session_id}/workflow/cancel")
async def cancel_workflow(
    session_id: str, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Cancel the session's active workflow on the user's behalf."""
    session = await owned_session(runtime, caller, session_id)
    if not session.active_workflow_id:
        raise ApiError(409, "The session has no active workflow.")
    context = runtime.tool_context(session_id=session_id, org=caller.org, user=caller.user)
    arguments = {
        "operation": "cancel_workflow",
        "workflowId": session.active_workflow_id,
        "reason": "Cancelled by the user.",
    }
    outcome = await runtime.executor.invoke("agent_workflow_run", json.dumps(arguments), context)
    if outcome.result is None:
        raise ApiError(409, outcome.error_message or "The workflow could not be cancelled.")
    return {"sessionId": session_id, "cancelled": session.active_workflow_id}
