"""``/v1/sessions``: create, list and inspect the caller's sessions."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from aptix.api.auth import Caller
from aptix.api.errors import ApiError
from aptix.api.json_body import JsonBodyRoute
from aptix.api.responses import CancelledWorkflow, Session, SessionDetail, Turn
from aptix.api.routes.deps import CallerDep, RuntimeDep
from aptix.api.schemas import SessionCreate
from aptix.db.types import utc_now
from aptix.reasoner import TurnRecord, ledger, pre_ledger
from aptix.reasoner.claims import mark_dead
from aptix.reasoner.endings import ERROR_CODE
from aptix.runtime import Runtime
from aptix.sessions.access import owned_session as owned
from aptix.sessions.models import AgentSession
from aptix.sessions.wire import session_to_json

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], route_class=JsonBodyRoute)

MAX_TURNS_PAGE = 200


async def owned_session(runtime: Runtime, caller: Caller, session_id: str) -> AgentSession:
    """The caller's session, or a 404 (another org's or user's id looks missing)."""
    session = await owned(runtime.services.sessions, session_id, caller.org, caller.user)
    if session is None:
        raise ApiError(404, f"Unknown session '{session_id}'.")
    return session


@router.post(
    "",
    status_code=201,
    response_model=Session,
    responses={
        201: {
            "description": "The new session.",
            "headers": {
                "Location": {"description": "The session's URL.", "schema": {"type": "string"}}
            },
        }
    },
)
async def create_session(
    body: SessionCreate, response: Response, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Create a session (in the default mode unless ``mode`` is given)."""
    created = await runtime.services.sessions.create_session(
        org=caller.org, user=caller.user, mode=body.mode, title=body.title
    )
    if created.result is None:
        raise ApiError(422, created.error_message or "Could not create the session.")
    response.headers["Location"] = f"/v1/sessions/{created.result.id}"
    return session_to_json(created.result)


@router.get("", response_model=list[Session])
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


@router.get("/{session_id}", response_model=SessionDetail)
async def get_session(
    session_id: str,
    runtime: RuntimeDep,
    caller: CallerDep,
    turns_limit: Annotated[int, Query(alias="turnsLimit", ge=1, le=MAX_TURNS_PAGE)] = 50,
    turns_before: Annotated[int | None, Query(alias="turnsBefore", ge=1, le=2**31 - 1)] = None,
) -> dict[str, Any]:
    """One session with its mode history, branched sessions and a page of its turns.

    Turns come oldest first: the newest ``turnsLimit`` with ``seq < turnsBefore``;
    ``turnsNextBefore`` is the ``turnsBefore`` of the previous page (null on the first turn).
    """
    session = await owned_session(runtime, caller, session_id)
    children = await runtime.services.sessions.list_children(session_id, caller.org)
    turns = await runtime.turns.list_turns(
        session_id, caller.org, limit=turns_limit + 1, before=turns_before
    )
    more = len(turns) > turns_limit
    page = turns[1:] if more else turns
    now = utc_now()
    for turn in page:  # a turn whose process died shows as interrupted at once
        mark_dead(turn, now)
    return {
        **session_to_json(session),
        "childSessionIds": [c.id for c in children],
        "turns": [turn_to_json(t) for t in page],
        "turnsNextBefore": page[0].seq if more and page else None,
    }


@router.post("/{session_id}/turns/{turn_id}/cancel", response_model=Turn)
async def cancel_turn(
    session_id: str, turn_id: str, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Cancel a running or pending turn; 409 ``turn_finished`` when it already ended."""
    await owned_session(runtime, caller, session_id)
    record = await runtime.turns.cancel(session_id, caller.org, turn_id)
    # Runs in this process (whichever reasoner of the runtime started it): stop it now, and
    # answer with the calls it ran and their outcomes. Elsewhere its process sees the cancel
    # at its next lease renewal (within a third of the lease) or save, whichever comes
    # first, stops it as this one would, and merges its outcomes into the record then.
    if await runtime.turn_tasks.stop(turn_id):
        [record] = await runtime.turns.list_turns(session_id, caller.org, limit=1)
    return turn_to_json(record)


def turn_to_json(turn: TurnRecord) -> dict[str, Any]:
    """A turn as the sessions API shows it."""
    # Turns stored before the ledger kept no state per call: the ledger reads them as it
    # does when it runs them, so GET and a resume agree (an old approval waits as one).
    calls = pre_ledger.stated_calls(turn.tool_calls, waiting=turn.status == "pending")
    return {
        "turnId": turn.id,
        "seq": turn.seq,
        "status": turn.status,
        "instruction": turn.instruction,
        "text": turn.text,
        "refusal": turn.refusal,
        "toolCalls": [ledger.wire(e) for e in calls],
        "modelCalls": turn.model_calls,
        "warnings": turn.warnings,
        "pendingCalls": _pending(turn, calls),
        "contextDropped": _context_dropped(turn),
        "error": _failure(turn),
        "createdAt": turn.created_at.isoformat(),
        "updatedAt": turn.updated_at.isoformat(),
    }


def _pending(turn: TurnRecord, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls a pending turn waits on, each in the state its ledger entry holds."""
    # Kept while a resume runs (a failed attempt waits for the same results again), but
    # nothing waits for the client until the turn is pending once more.
    if turn.status != "pending":
        return []
    # The stored list is the hand-off's snapshot (the claims and aptix chat read it as
    # such); the call's state is its ledger entry's. After a resume whose model call
    # failed, the result stored for it then reads the same here as in toolCalls.
    ledger_of = {e["callId"]: e for e in calls}
    snapshot = pre_ledger.stated_calls(turn.pending_calls, waiting=True)
    return [ledger.wire(ledger_of.get(c["callId"], c)) for c in snapshot]


def _context_dropped(turn: TurnRecord) -> dict[str, Any] | None:
    """What the turn's last request left out, with the summary it was sent in their place."""
    if turn.context_dropped is None:
        return None
    summary = turn.context_summary if turn.context_dropped.get("summarized") else None
    return {**turn.context_dropped, "summary": summary["text"] if summary else None}


def _failure(turn: TurnRecord) -> dict[str, str] | None:
    """Why an ``error`` turn failed, as the error envelope's ``{code, message}``."""
    if turn.status != "error":
        return None
    # The answer stored with the turn says why (claims.mark_dead restores it for a turn
    # whose ending could not be stored); a turn stored before the code was kept has none.
    stored = turn.result or {}
    message = stored.get("error") or (turn.warnings[-1] if turn.warnings else None)
    return {
        "code": stored.get(ERROR_CODE) or "turn_failed",
        "message": message or "The turn failed.",
    }


@router.post("/{session_id}/workflow/cancel", response_model=CancelledWorkflow)
async def cancel_workflow(
    session_id: str, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Cancel the session's active workflow on the user's behalf."""
    await owned_session(runtime, caller, session_id)
    cancelled = await runtime.cancel_workflow(
        org=caller.org, user=caller.user, role=caller.role, session_id=session_id
    )
    if cancelled.result is None:
        raise ApiError(409, cancelled.error_message or "The workflow could not be cancelled.")
    return {"sessionId": session_id, "cancelled": cancelled.result}
