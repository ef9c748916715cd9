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
from aptix.api.errors import ApiError, error_body, unexpected_error
from aptix.api.responses import TurnResultBody
from aptix.api.routes.deps import CallerDep, RuntimeDep, TurnSlotDep
from aptix.api.schemas import ErrorBody, ExecuteRequest
from aptix.api.storable_json import StorableJSONResponse
from aptix.blank import strip_blank
from aptix.errors import AptixError
from aptix.modes.catalog import unknown_mode_message
from aptix.reasoner import AgentReasoner, ToolResultInput, TurnEvent
from aptix.reasoner.loop import PreparedTurn

router = APIRouter(tags=["agent"])

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
        200: {
            "model": TurnResultBody,
            "description": "The turn's result as JSON, or with `stream: true` (or `Accept: "
            "text/event-stream`) its events as Server-Sent Events, the last one "
            "`turn_finished` carrying the same body.",
            "content": {"text/event-stream": {"schema": _SSE_EVENT}},
        },
        502: {"model": ErrorBody, "description": "The model endpoint failed."},
        503: {
            "model": ErrorBody,
            "description": "No model is configured (`model_not_configured`), the database is "
            "unreachable, or the server shut down before the turn finished (`shutting_down`, "
            "with `Retry-After`).",
        },
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
        # Checked even beside a sessionId (where it is not used), as the schema's enum says.
        raise ApiError(422, unknown_mode_message(body.mode, runtime.services.modes.keys))
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
    wants_stream = body.stream or "text/event-stream" in request.headers.get("accept", "")
    if wants_stream:
        # Claimed before streaming, so a busy session or a bad resume is a plain 4xx.
        prepared = await reasoner.prepare(**arguments)
        stopping = anyio.Event()
        return EventSourceResponse(
            _stream(reasoner, prepared, stopping),
            sep="\n",
            shutdown_event=stopping,
            shutdown_grace_period=shutdown.STREAM_GRACE_SECONDS,
        )
    with shutdown.answer_shutting_down():
        result = await reasoner.execute(**arguments)
    # Already JSON values (the same body is stored for replays): FastAPI's generic encoder
    # walking it again cost a tenth of a turn.
    return StorableJSONResponse(result.to_wire())


#: Turns whose client went away, kept referenced until their cancellation is recorded.
_ORPHANS: set[asyncio.Task[None]] = set()


async def _stream(
    reasoner: AgentReasoner, prepared: PreparedTurn, stopping: anyio.Event
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
            # The reasoner logged it and stored the turn as an error (TurnEndings.broken); the
            # stream still ends with its last event, as the non-streamed answer ends in a 5xx.
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
            task.cancel()
            _ORPHANS.add(task)
            task.add_done_callback(_ORPHANS.discard)
