"""``POST /v1/agent/execute``: run a turn (or resume one), as JSON or as Server-Sent Events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from aptix.api import shutdown
from aptix.api.abandoned import abandon, settled
from aptix.api.answer_headers import RETRY_AFTER, TURN, with_headers
from aptix.api.auth import Caller
from aptix.api.errors import ApiError, error_body, unexpected_error
from aptix.api.json_body import JsonBodyRoute
from aptix.api.responses import TurnResultBody
from aptix.api.routes.deps import CallerDep, RuntimeDep, TurnSlotDep
from aptix.api.schemas import ErrorBody, ExecuteRequest
from aptix.api.storable_json import StorableJSONResponse
from aptix.blank import strip_blank
from aptix.errors import AptixError
from aptix.modes.catalog import unknown_mode_message
from aptix.reasoner import AgentReasoner, ToolResultInput, TurnEvent
from aptix.reasoner.loop import PreparedTurn
from aptix.runtime import Runtime
from aptix.sessions.access import owned_session

router = APIRouter(tags=["agent"], route_class=JsonBodyRoute)

#: One Server-Sent Event as the OpenAPI document describes it (``data`` is a JSON document).
_SSE_EVENT = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {
            "type": "string",
            "description": "text_delta, text, tool_call_started, tool_call_finished, "
            "mode_changed, client_calls_pending or turn_finished (the last event).",
        },
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}

NO_MODEL = (
    "No model is configured, so turns cannot run. Set APTIX_LLM_MODEL, and APTIX_LLM_BASE_URL "
    "(with APTIX_LLM_API_KEY if the endpoint needs one), then restart the server."
)


@router.post(
    "/v1/agent/execute",
    response_model=None,
    responses={
        200: with_headers(
            {
                "model": TurnResultBody,
                "description": "The turn's result as JSON, or with `stream: true` (or `Accept: "
                "text/event-stream`) its events as Server-Sent Events, the last one "
                "`turn_finished` carrying the same body; a stream's `X-Aptix-Turn` header names "
                "its turn first.",
                "content": {"text/event-stream": {"schema": _SSE_EVENT}},
            },
            TURN,
        ),
        409: {
            "model": ErrorBody,
            "description": "The session's state refuses the request, such as: another turn of "
            "it runs (`session_busy`), an instruction comes while calls are pending, or "
            "`toolResults` come with a `mode` other than the waiting turn's (`conflict`: the "
            "mode changes with the next instruction).",
        },
        502: {"model": ErrorBody, "description": "The model endpoint failed."},
        503: with_headers(
            {
                "model": ErrorBody,
                "description": "No model is configured (`model_not_configured`), the database "
                "is unreachable (before any call of the turn ran; after, the turn is answered as "
                'it ended, `kind: "error"`), or the server shut down before the turn finished '
                "(`shutting_down`, with `Retry-After`).",
            },
            RETRY_AFTER,
        ),
    },
)
async def execute(
    body: ExecuteRequest,
    request: Request,
    runtime: RuntimeDep,
    caller: CallerDep,
    _: TurnSlotDep,
) -> StorableJSONResponse | EventSourceResponse:
    """Run ``instruction`` in the session, or resume it with ``toolResults``."""
    reasoner: AgentReasoner | None = request.app.state.reasoner
    if reasoner is None:
        raise ApiError(503, NO_MODEL, "model_not_configured")
    if not strip_blank(body.instruction or "") and not body.tool_results:
        raise ApiError(422, "Send a non-empty 'instruction' or 'toolResults'.")
    if body.mode is not None and body.mode not in runtime.services.modes.keys:
        raise ApiError(422, unknown_mode_message(body.mode, runtime.services.modes.keys))
    if body.mode is not None and body.session_id is not None and body.tool_results:
        await _refuse_mode_change_on_resume(runtime, caller, body.session_id, body.mode)
    if body.session_id is None:
        if body.tool_results:
            raise ApiError(422, "'toolResults' need the 'sessionId' of the waiting session.")
        created = await runtime.services.sessions.create_session(
            org=caller.org, user=caller.user, mode=body.mode
        )
        if created.result is None:
            raise ApiError(422, created.error_message or "Could not create the session.")
        session_id = created.result.id
    else:
        session_id = body.session_id  # the claim checks the owner (404 like a missing one)
        # A stream of the session its client just closed: its turn is ending, not busy.
        await settled(session_id)
    results = [
        ToolResultInput(
            r.call_id, r.result if isinstance(r.result, str) else json.dumps(r.result), r.is_error
        )
        for r in body.tool_results or ()
    ]
    arguments: dict[str, Any] = {
        "session_id": session_id,
        "org": caller.org,
        "user": caller.user,
        "role": caller.role,
        "instruction": body.instruction,
        "tool_results": results or None,
    }
    # A new session was created in the mode; an existing one switches once its turn is claimed.
    switch_to = body.mode if body.session_id is not None and body.instruction else None
    wants_stream = body.stream or "text/event-stream" in request.headers.get("accept", "")
    if wants_stream:
        # Claimed before streaming, so a busy session or a bad resume is a plain 4xx.
        prepared = await reasoner.prepare(**arguments)
        if switch_to is not None:
            await switch_claimed_mode(runtime, caller, prepared, switch_to, _asked(switch_to))
        stopping = anyio.Event()
        return EventSourceResponse(
            _stream(reasoner, prepared, session_id, stopping),
            headers=_turn_header(prepared),
            sep="\n",
            shutdown_event=stopping,
            shutdown_grace_period=shutdown.STREAM_GRACE_SECONDS,
        )
    with shutdown.answer_shutting_down():
        prepared = await reasoner.prepare(**arguments)
        if switch_to is not None:
            await switch_claimed_mode(runtime, caller, prepared, switch_to, _asked(switch_to))
        result = await reasoner.run(prepared)
    # Already JSON values (the same body is stored for replays): FastAPI's generic encoder
    # walking it again cost a tenth of a turn.
    return StorableJSONResponse(result.to_wire())


async def switch_claimed_mode(
    runtime: Runtime, caller: Caller, prepared: PreparedTurn, mode: str, reason: str
) -> None:
    """Switch the session of a claimed turn to ``mode`` (recorded in its mode history).

    Only once the turn is claimed: a request refused (another turn runs) switches nothing.
    """
    turn = prepared.turn
    if turn is None or turn.session.mode == mode:
        return
    switched = await runtime.services.sessions.set_session_mode(
        turn.session.id, mode, reason, caller.org, caller.user
    )
    if switched.result is not None:
        turn.session = switched.result


def _turn_header(prepared: PreparedTurn) -> dict[str, str]:
    """``X-Aptix-Turn``: the claimed (or replayed) turn, named before any event is sent.

    A client whose stream is cut short finds its turn by this id: the session may hold turns
    other clients added since it last read it, so "the turn after the last one I read" may be
    theirs (and deciding from theirs can send the instruction again after its calls ran).
    """
    if prepared.turn is not None:
        return {"X-Aptix-Turn": prepared.turn.record.id}
    if prepared.replay is not None:
        return {"X-Aptix-Turn": prepared.replay.turn_id}
    return {}


def _asked(mode: str) -> str:
    """The mode history's reason when ``mode`` comes beside an existing ``sessionId``."""
    return f"Mode {mode} picked by the client with the instruction."


async def _refuse_mode_change_on_resume(
    runtime: Runtime, caller: Caller, session_id: str, mode: str
) -> None:
    """409 when ``toolResults`` come with another ``mode`` than the waiting turn's.

    The waiting turn resumes where it stopped, in its mode; a change belongs with the next
    instruction. The body is valid: the session's state refuses it, as it refuses an
    instruction while calls are pending. Another owner's or a missing session is left to the
    claim's 404.
    """
    session = await owned_session(runtime.services.sessions, session_id, caller.org, caller.user)
    if session is not None and session.mode != mode:
        raise ApiError(
            409,
            f"toolResults resume the waiting turn in its mode '{session.mode}'; 'mode' "
            f"changes only with an instruction: send '{mode}' with the next one.",
        )


async def _stream(
    reasoner: AgentReasoner, prepared: PreparedTurn, session_id: str, stopping: anyio.Event
) -> AsyncIterator[ServerSentEvent]:
    """The turn's events; set ``stopping`` when the server stops, to end with a 503 event."""
    queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()

    async def sink(event: TurnEvent) -> None:
        await queue.put(event)

    async def run() -> None:
        try:
            await reasoner.run(prepared, on_event=sink)
        except AptixError as exc:
            code = getattr(exc, "code", type(exc).__name__)
            await queue.put(TurnEvent("turn_finished", error_body(code, str(exc))))
        except Exception as exc:
            # The reasoner logged it and stored how the turn ended (TurnEndings.broken: an
            # error, or a resume that ran nothing waiting for it again); the stream still
            # ends with its last event, as the non-streamed answer ends in a 5xx.
            _, code, message = unexpected_error(exc)
            await queue.put(TurnEvent("turn_finished", error_body(code, message)))
        except asyncio.CancelledError:
            # Only cut_short (the server stops) or the client going away cancel it; the
            # latter reads no more events.
            await queue.put(
                TurnEvent("turn_finished", error_body("shutting_down", shutdown.SHUTTING_DOWN))
            )
            raise
        finally:
            await queue.put(None)

    task = asyncio.create_task(run())
    watcher = asyncio.create_task(shutdown.cut_short_when_stopping(stopping, task))
    try:
        while (event := await queue.get()) is not None:
            yield ServerSentEvent(data=json.dumps(event.data, default=str), event=event.type)
    finally:
        watcher.cancel()
        if not task.done():  # the client went away: cancel the turn (recorded as cancelled)
            abandon(session_id, task)
