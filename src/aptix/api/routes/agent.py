"""``POST /v1/agent/execute``: run a turn (or resume one), as JSON or as Server-Sent Events."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from aptix.api.errors import ApiError, error_body
from aptix.api.routes.deps import CallerDep, RuntimeDep
from aptix.api.routes.sessions import owned_session
from aptix.api.schemas import ExecuteRequest
from aptix.errors import AptixError
from aptix.reasoner import AgentReasoner, ToolResultInput, TurnEvent

router = APIRouter(tags=["agent"])

NO_MODEL = (
    "No model is configured, so turns cannot run. Set APTIX_LLM_MODEL, and APTIX_LLM_BASE_URL "
    "(with APTIX_LLM_API_KEY if the endpoint needs one), then restart the server."
)


@router.post("/v1/agent/execute", response_model=None)
async def execute(
    body: ExecuteRequest, request: Request, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any] | StreamingResponse:
    """Run ``instruction`` in the session, or resume it with ``toolResults``."""
    reasoner: AgentReasoner | None = request.app.state.reasoner
    if reasoner is None:
        raise ApiError(503, NO_MODEL, "model_not_configured")
    if not (body.instruction or "").strip() and not body.tool_results:
        raise ApiError(422, "Send a non-empty 'instruction' or 'toolResults'.")
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
        session_id = (await owned_session(runtime, caller, body.session_id)).id
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
        "instruction": body.instruction,
        "tool_results": results or None,
    }
    wants_stream = body.stream or "text/event-stream" in request.headers.get("accept", "")
    if wants_stream:
        return StreamingResponse(
            _stream(reasoner, arguments),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    result = await reasoner.execute(**arguments)
    return result.to_wire()


async def _stream(reasoner: AgentReasoner, arguments: dict[str, Any]) -> AsyncIterator[str]:
    queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()

    async def sink(event: TurnEvent) -> None:
        await queue.put(event)

    async def run() -> None:
        try:
            await reasoner.execute(**arguments, on_event=sink)
        except AptixError as exc:
            await queue.put(TurnEvent("turn_finished", error_body(type(exc).__name__, str(exc))))
        finally:
            await queue.put(None)

    task = asyncio.create_task(run())
    try:
        while (event := await queue.get()) is not None:
            yield f"event: {event.type}\ndata: {json.dumps(event.data, default=str)}\n\n"
    finally:
        if not task.done():  # the client went away: finish the turn anyway, it is stored
            with contextlib.suppress(Exception):
                await asyncio.shield(task)
