"""``POST /v1/chat/completions`` and ``GET /v1/models``: Aptix behind the OpenAI API.

Models are modes (``aptix-<mode key>``). The server owns the session, found from the
``X-Aptix-Session`` header, else from the fingerprint of the conversation the client resends,
else created, with the earlier messages as its starting context. The turn is an ordinary
Aptix turn: modes, workflows, approvals and the ledger apply; server tools run inside it and
only client-final calls come back as ``tool_calls``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Header, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from aptix.api import shutdown
from aptix.api.auth import Caller
from aptix.api.errors import ApiError, openai_error_body, unexpected_error
from aptix.api.openai.conversation import (
    Ask,
    answer_message,
    fingerprint,
    read_ask,
    starting_context,
)
from aptix.api.openai.schemas import ChatCompletionRequest
from aptix.api.openai.wire import (
    completion_body,
    completion_chunk,
    extension,
    finish_reason,
    handed_over,
    mode_of_model,
    model_of_mode,
    openai_tool_calls,
    usage_body,
)
from aptix.api.routes.agent import NO_MODEL
from aptix.api.routes.deps import CallerDep, RuntimeDep, TurnSlotDep
from aptix.api.schemas import ErrorBody
from aptix.api.storable_json import StorableJSONResponse
from aptix.errors import AptixError, ToolContractError
from aptix.reasoner import AgentReasoner, TurnEvent, TurnResult
from aptix.runtime import Runtime
from aptix.sessions.fingerprints import ConversationFingerprints
from aptix.settings_mcp import tool_prefix
from aptix.tool_names import matches
from aptix.tools.client import ClientToolSpec, client_tool_classes

router = APIRouter(tags=["openai"])

SESSION_HEADER = "X-Aptix-Session"


def _fingerprints(request: Request) -> ConversationFingerprints:
    store: ConversationFingerprints | None = getattr(request.app.state, "fingerprints", None)
    if store is None:
        runtime: Runtime = request.app.state.runtime
        store = request.app.state.fingerprints = ConversationFingerprints(runtime.database)
    return store


FingerprintsDep = Annotated[ConversationFingerprints, Depends(_fingerprints)]


@router.get("/v1/models")
async def list_models(runtime: RuntimeDep, _: CallerDep) -> dict[str, Any]:
    """One model per mode: picking ``aptix-<mode key>`` picks the session's mode."""
    modes = await runtime.services.modes.get_all_modes()
    return {
        "object": "list",
        "data": [
            {"id": model_of_mode(m.key), "object": "model", "created": 0, "owned_by": "aptix"}
            for m in modes
        ],
    }


@router.post(
    "/v1/chat/completions",
    response_model=None,
    responses={
        200: {
            "description": "A `chat.completion`, or with `stream: true` its "
            "`chat.completion.chunk`s as Server-Sent Events ending with `[DONE]`.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        400: {
            "model": ErrorBody,
            "description": "The messages are not a Chat Completions conversation. Errors "
            "on this route add OpenAI's `type` and `param` to the envelope.",
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
async def create_chat_completion(
    body: ChatCompletionRequest,
    request: Request,
    runtime: RuntimeDep,
    caller: CallerDep,
    fingerprints: FingerprintsDep,
    _: TurnSlotDep,
    x_aptix_session: Annotated[str | None, Header(max_length=64)] = None,
) -> StorableJSONResponse | EventSourceResponse:
    """Run the last user message as a turn, or resume it with the trailing tool messages."""
    reasoner: AgentReasoner | None = request.app.state.reasoner
    if reasoner is None:
        raise ApiError(503, NO_MODEL, "model_not_configured")
    mode = mode_of_model(body.model, runtime.services.modes.keys)
    if mode is None:
        raise ApiError(
            404,
            f"The model '{body.model}' does not exist; GET /v1/models lists the models "
            "(one per mode).",
            "model_not_found",
        )
    try:
        ask = read_ask(body.messages)
    except ValueError as exc:
        raise ApiError(400, str(exc), "invalid_request_error") from exc
    session_id, instruction = await _session_for(
        runtime, caller, fingerprints, ask, body.model, mode, x_aptix_session
    )
    reasoner = _with_client_tools(reasoner, body, runtime)
    prepared = await reasoner.prepare(
        session_id=session_id,
        org=caller.org,
        user=caller.user,
        role=caller.role,
        instruction=instruction,
        tool_results=ask.tool_results or None,
    )
    if prepared.replay is not None:
        raise ApiError(
            409,
            "These tool results were already posted and their calls answered; each call "
            "takes its result once. Continue with a new user message.",
            "tool_results_already_posted",
            headers={SESSION_HEADER: session_id},
        )
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    headers = {SESSION_HEADER: session_id}

    async def remember(result: TurnResult) -> None:
        answer = answer_message(result.text, openai_tool_calls(handed_over(result)))
        held = fingerprint([*body.messages, answer])
        if held is not None:
            await fingerprints.remember(
                org=caller.org,
                user=caller.user,
                session_id=session_id,
                fingerprint=held,
                model=model_of_mode(result.mode),
            )

    if body.stream:
        usage = body.stream_options is not None and body.stream_options.include_usage
        stopping = anyio.Event()
        chunks = _chunks(reasoner, prepared, completion_id, body.model, usage, remember, stopping)
        return EventSourceResponse(
            chunks,
            sep="\n",
            headers=headers,
            shutdown_event=stopping,
            shutdown_grace_period=shutdown.STREAM_GRACE_SECONDS,
        )
    with shutdown.answer_shutting_down(headers):
        result = await reasoner.run(prepared)
    if result.kind == "error":
        raise ApiError(
            502, result.error or "The model endpoint failed.", "model_error", headers=headers
        )
    await remember(result)
    return StorableJSONResponse(completion_body(result, completion_id), headers=headers)


def _with_client_tools(
    reasoner: AgentReasoner, body: ChatCompletionRequest, runtime: Runtime
) -> AgentReasoner:
    """The reasoner for this request: with the client's ``tools``, unless the setting is off."""
    if not body.tools or not runtime.settings.openai_client_tools:
        return reasoner
    for server, config in runtime.settings.mcp_servers.items():
        # `<prefix>_*` in a mode or workflow names that server's tools and no others.
        pattern = f"{tool_prefix(server, config)}_*"
        for t in body.tools:
            if matches(t.function.name, pattern):
                raise ApiError(
                    400,
                    f"The client tool {t.function.name!r} falls under {pattern!r}, the tool "
                    f"names of the MCP server {server!r} (compared case-insensitively); "
                    "rename it.",
                    "invalid_request_error",
                )
    specs = [
        ClientToolSpec(
            t.function.name,
            t.function.description or "",
            t.function.parameters or {"type": "object", "properties": {}, "required": []},
        )
        for t in body.tools
    ]
    try:
        return reasoner.with_client_tools(client_tool_classes(specs))
    except ToolContractError as exc:
        raise ApiError(400, str(exc), "invalid_request_error") from exc


async def _session_for(
    runtime: Runtime,
    caller: Caller,
    fingerprints: ConversationFingerprints,
    ask: Ask,
    model: str,
    mode: str,
    header: str | None,
) -> tuple[str, str | None]:
    """The session this request continues (or a new one), and the instruction to run."""
    sessions = runtime.services.sessions
    session_id = header
    shown_model: str | None = None
    if session_id is None:
        held = fingerprint(ask.earlier)
        current = not ask.tool_results  # a new message never continues an older state
        found = (
            None
            if held is None
            else await fingerprints.find(caller.org, caller.user, held, current=current)
        )
        if found is not None:
            session_id, shown_model = found.session_id, found.model
    elif await sessions.get_session(session_id, caller.org) is None:
        raise ApiError(404, f"Unknown session '{session_id}'.", "not_found")
    else:
        shown_model = await fingerprints.last_model(session_id)
    if session_id is None:
        if ask.tool_results:
            raise ApiError(
                400,
                "No session is waiting for these tool results: send the conversation as it "
                f"was answered, or the {SESSION_HEADER} header of its session.",
                "invalid_request_error",
            )
        created = await sessions.create_session(org=caller.org, user=caller.user, mode=mode)
        if created.result is None:
            raise ApiError(422, created.error_message or "Could not create the session.")
        assert ask.instruction is not None
        return created.result.id, starting_context(ask.earlier, ask.instruction)
    if ask.instruction is not None and model != shown_model:
        # The client picked another model since the last answer: that picks the mode.
        session = await sessions.get_session(session_id, caller.org)
        if session is not None and session.mode != mode:
            await sessions.set_session_mode(
                session_id, mode, f"Model {model} picked by the client.", caller.org, caller.user
            )
    return session_id, ask.instruction


#: Turns whose client went away, kept referenced until their cancellation is recorded.
_ORPHANS: set[asyncio.Task[None]] = set()


async def _chunks(
    reasoner: AgentReasoner,
    prepared: Any,
    completion_id: str,
    model: str,
    include_usage: bool,
    remember: Any,
    stopping: anyio.Event,
) -> AsyncIterator[ServerSentEvent]:
    """The turn's chunks; set ``stopping`` when the server stops, to end with a 503 error."""
    # A dict is an error body to send as it is.
    queue: asyncio.Queue[TurnEvent | TurnResult | AptixError | dict[str, Any] | None]
    queue = asyncio.Queue()

    async def sink(event: TurnEvent) -> None:
        await queue.put(event)

    async def run() -> None:
        try:
            await queue.put(await reasoner.run(prepared, on_event=sink))
        except AptixError as exc:
            await queue.put(exc)
        except Exception as exc:
            # Logged and stored as an error by the reasoner (TurnEndings.broken).
            await queue.put(openai_error_body(*unexpected_error(exc)))
        except asyncio.CancelledError:
            # Only the shutdown's cut or the client going away cancel it; the latter reads no
            # more chunks.
            await queue.put(openai_error_body(503, "shutting_down", shutdown.SHUTTING_DOWN))
            raise
        finally:
            await queue.put(None)

    task = asyncio.create_task(run())
    watcher = asyncio.create_task(shutdown.cut_short_when_stopping(stopping, task))
    streamed = False
    try:
        first = {"role": "assistant", "content": ""}
        yield ServerSentEvent(data=completion_chunk(completion_id, model, first))
        while (item := await queue.get()) is not None:
            if isinstance(item, AptixError):
                code = getattr(item, "code", type(item).__name__)
                yield ServerSentEvent(data=_json(openai_error_body(409, code, str(item))))
            elif isinstance(item, dict):
                yield ServerSentEvent(data=_json(item))
            elif isinstance(item, TurnResult):
                if item.text and not streamed:  # a model that answered without streaming
                    delta = {"content": item.text}
                    yield ServerSentEvent(data=completion_chunk(completion_id, model, delta))
                async for event in _final_chunks(item, completion_id, include_usage, remember):
                    yield event
            elif item.type == "text_delta":
                streamed = True
                delta = {"content": item.data.get("delta", "")}
                yield ServerSentEvent(data=completion_chunk(completion_id, model, delta))
            elif item.type not in ("text", "turn_finished", "client_calls_pending"):
                aptix = {"event": item.type, "data": item.data}
                yield ServerSentEvent(data=completion_chunk(completion_id, model, {}, aptix=aptix))
        yield ServerSentEvent(data="[DONE]")
    finally:
        watcher.cancel()
        if not task.done():  # the client went away: cancel the turn (recorded as cancelled)
            task.cancel()
            _ORPHANS.add(task)
            task.add_done_callback(_ORPHANS.discard)


async def _final_chunks(
    result: TurnResult, completion_id: str, include_usage: bool, remember: Any
) -> AsyncIterator[ServerSentEvent]:
    model = model_of_mode(result.mode)
    if result.kind == "error":
        message = result.error or "The model endpoint failed."
        yield ServerSentEvent(data=_json(openai_error_body(502, "model_error", message)))
        return
    calls = openai_tool_calls(handed_over(result))
    if calls:
        delta = {"tool_calls": [{"index": i, **call} for i, call in enumerate(calls)]}
        yield ServerSentEvent(data=completion_chunk(completion_id, model, delta))
    await remember(result)
    yield ServerSentEvent(
        data=completion_chunk(
            completion_id, model, {}, finish=finish_reason(result), aptix=extension(result)
        )
    )
    if include_usage:
        yield ServerSentEvent(
            data=completion_chunk(completion_id, model, None, usage=usage_body(result))
        )


def _json(value: Any) -> str:
    return json.dumps(value)
