"""``POST /v1/chat/completions`` and ``GET /v1/models``: Aptix behind the OpenAI API.

Models are modes (``aptix-<mode key>``). The server owns the session, found from the
``X-Aptix-Session`` header, else from the fingerprint of the conversation the client resends,
else created, with the earlier messages as its starting context. The turn is an ordinary
Aptix turn: modes, workflows, approvals and the ledger apply; server tools run inside it and
only client-final calls come back as ``tool_calls``. A refused request changes nothing: every
check runs before the session is created, its turn claimed or its mode switched.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Header, Path, Request
from sse_starlette import EventSourceResponse

from aptix.api import shutdown
from aptix.api.abandoned import settled
from aptix.api.answer_headers import RATE_LIMIT, RETRY_AFTER, SESSION, with_headers
from aptix.api.auth import Caller
from aptix.api.errors import ApiError
from aptix.api.json_body import JsonBodyRoute
from aptix.api.openai.answer import last_said, refused_in, said_in
from aptix.api.openai.conversation import (
    Ask,
    AskError,
    answer_message,
    fingerprint,
    read_ask,
    starting_context,
)
from aptix.api.openai.schemas import ChatCompletionRequest, ChatMessage
from aptix.api.openai.stream import completion_chunks
from aptix.api.openai.wire import (
    completion_body,
    handed_over,
    mode_of_model,
    model_of_mode,
    openai_tool_calls,
)
from aptix.api.routes.agent import NO_MODEL, switch_claimed_mode
from aptix.api.routes.deps import CallerDep, RuntimeDep, TurnSlotDep
from aptix.api.schemas import ErrorBody
from aptix.api.storable_json import StorableJSONResponse
from aptix.errors import NotFoundError, SessionBusyError, ToolContractError, TurnError
from aptix.llm.formats import FORMAT_UNMET, schema_problem
from aptix.logger import bounded
from aptix.reasoner import AgentReasoner, TurnResult
from aptix.reasoner.endings import ERROR_CODE
from aptix.reasoner.loop import PreparedTurn
from aptix.runtime import Runtime
from aptix.sessions.access import owned_session
from aptix.sessions.fingerprints import ConversationFingerprints, Remembered
from aptix.settings_mcp import tool_prefix
from aptix.tool_names import matches
from aptix.tools.client import ClientToolSpec, client_tool_classes

router = APIRouter(tags=["openai"], route_class=JsonBodyRoute)

SESSION_HEADER = "X-Aptix-Session"


def _fingerprints(request: Request) -> ConversationFingerprints:
    store: ConversationFingerprints | None = getattr(request.app.state, "fingerprints", None)
    if store is None:
        runtime: Runtime = request.app.state.runtime
        store = request.app.state.fingerprints = ConversationFingerprints(runtime.database)
    return store


FingerprintsDep = Annotated[ConversationFingerprints, Depends(_fingerprints)]


def _model(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": 0, "owned_by": "aptix"}


def _unknown_model(model: str) -> ApiError:
    return ApiError(
        404,
        f"The model '{model}' does not exist; GET /v1/models lists the models (one per mode).",
        "model_not_found",
    )


@router.get("/v1/models")
async def list_models(runtime: RuntimeDep, _: CallerDep) -> dict[str, Any]:
    """One model per mode: picking ``aptix-<mode key>`` picks the session's mode."""
    modes = await runtime.services.modes.get_all_modes()
    return {"object": "list", "data": [_model(model_of_mode(m.key)) for m in modes]}


@router.get(
    "/v1/models/{model}",
    responses={404: {"model": ErrorBody, "description": "No mode has this model name."}},
)
async def retrieve_model(
    model: Annotated[str, Path(max_length=200)], runtime: RuntimeDep, _: CallerDep
) -> dict[str, Any]:
    """The model ``aptix-<mode key>`` of one mode (404 ``model_not_found`` for any other)."""
    if mode_of_model(model, runtime.services.modes.keys) is None:
        raise _unknown_model(model)
    return _model(model)


@router.post(
    "/v1/chat/completions",
    response_model=None,
    responses={
        200: with_headers(
            {
                "description": "A `chat.completion`, or with `stream: true` its "
                "`chat.completion.chunk`s as Server-Sent Events ending with `[DONE]`.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            SESSION,
        ),
        400: with_headers(
            {
                "model": ErrorBody,
                "description": "The messages are not a Chat Completions conversation, a field "
                "asks for what Aptix does not do (`n` > 1, `tool_choice`, `functions`, "
                "`modalities`, `logprobs`, ...), a `response_format` the model cannot answer in, "
                "or the turn is over the context budget (`context_length_exceeded`). Errors on "
                "this route add OpenAI's `type` and `param` (the field) to the envelope.",
            },
            SESSION,
        ),
        409: with_headers(
            {
                "model": ErrorBody,
                "description": "Another turn of the session runs (`session_busy`, with "
                "`Retry-After`), or the tool messages do not answer the calls waiting.",
            },
            SESSION,
            RETRY_AFTER,
        ),
        422: with_headers(
            {
                "model": ErrorBody,
                "description": "The turn stopped before a final answer (`iteration_cap`, "
                "`turn_token_budget`), its final answer is not the JSON a strict "
                "`response_format` asked for (`response_format_unmet`), or the database failed "
                "or a bug struck after its tools ran (`database_unavailable`, "
                "`database_refused`, `internal_error`: a 5xx would be retried by the SDKs, "
                "running the tools again).",
            },
            SESSION,
        ),
        429: with_headers(
            {
                "model": ErrorBody,
                "description": "A limit is reached, also the org's token budget during the "
                "turn; see `Retry-After`.",
            },
            SESSION,
            RETRY_AFTER,
            RATE_LIMIT,
        ),
        502: with_headers(
            {"model": ErrorBody, "description": "The model endpoint failed."}, SESSION
        ),
        503: with_headers(
            {
                "model": ErrorBody,
                "description": "No model is configured (`model_not_configured`), the database "
                "is unreachable (before any tool of the turn ran), or the server shut down "
                "before the turn finished (`shutting_down`, with `Retry-After`).",
            },
            SESSION,
            RETRY_AFTER,
        ),
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
        raise _unknown_model(body.model)
    if (unsupported := body.unsupported()) is not None:
        field, why = unsupported
        raise ApiError(400, why, "invalid_request_error", param=field)
    answer_format = await _answer_format(body, reasoner)
    try:
        ask = read_ask(body.messages)
    except AskError as exc:
        raise ApiError(400, str(exc), "invalid_request_error", param=exc.param) from exc
    reasoner = _with_client_tools(reasoner, body, runtime)
    for looked in range(2):
        target = await _session_for(runtime, caller, fingerprints, body, ask, mode, x_aptix_session)
        headers = {SESSION_HEADER: target.session_id}
        await settled(target.session_id)  # a stream of it the client just closed: its ending
        try:
            prepared = await reasoner.prepare(
                session_id=target.session_id,
                org=caller.org,
                user=caller.user,
                role=caller.role,
                instruction=target.instruction,
                tool_results=ask.tool_results or None,
                # A chat client's new message leaves the calls it did not answer behind.
                supersede_pending=True,
                response_format=answer_format,
            )
        except NotFoundError:
            if x_aptix_session is not None or looked:
                raise
            # The session the conversation's fingerprint found was pruned since (with its
            # fingerprints): looked up again, the conversation is one Aptix does not know.
            continue
        except TurnError as exc:
            raise _refused(exc, headers) from exc
        break
    if prepared.replay is not None:
        raise ApiError(
            409,
            "These tool results were already posted and their calls answered; each call "
            "takes its result once. Continue with a new user message.",
            "tool_results_already_posted",
            headers=headers,
        )
    assert prepared.turn is not None
    turn = prepared.turn
    if target.picked_model:
        await _pick_mode(runtime, caller, prepared, mode, body.model)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    start = len(turn.record.messages)
    # This request's format or, for a resume that names none, the one its turn started with.
    formatted = (turn.record.response_format or {}).get("type", "text") != "text"

    def content() -> str:
        # Every model call's text, as streamed, or in a response_format the last call's alone
        # (the answer the client parses).
        added = turn.record.messages[start:]
        return last_said(added) if formatted else said_in(added)

    def refusal() -> str | None:
        return refused_in(turn.record.messages[start:])

    async def answered(result: TurnResult, content: str) -> None:
        answer = answer_message(content or None, openai_tool_calls(handed_over(result)))
        held = fingerprint([*body.messages, answer])
        if held is not None:
            await fingerprints.remember(
                org=caller.org,
                user=caller.user,
                session_id=target.session_id,
                fingerprint=held,
                model=model_of_mode(result.mode),
            )

    async def failed(result: TurnResult) -> ApiError:
        return await _failure(runtime, caller, prepared, result, headers)

    if body.stream:
        stopping = anyio.Event()
        chunks = completion_chunks(
            reasoner,
            prepared,
            completion_id,
            include_usage=body.stream_options is not None and body.stream_options.include_usage,
            answered=answered,
            failed=failed,
            stopping=stopping,
            held=content if formatted else None,
            refusal=refusal,
        )
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
        raise await failed(result)
    # The same content a stream of this turn sends.
    said = content()
    await answered(result, said)
    answer = completion_body(result, completion_id, said, refusal())
    return StorableJSONResponse(answer, headers=headers)


#: How long a request refused because the session runs another turn is told to wait.
BUSY_RETRY_SECONDS = 1


def _refused(exc: TurnError, headers: dict[str, str]) -> ApiError:
    """The 409 for a turn that cannot start or resume, naming the session it was for."""
    if isinstance(exc, SessionBusyError):
        headers = {**headers, "Retry-After": str(BUSY_RETRY_SECONDS)}
    return ApiError(409, str(exc), exc.code, headers=headers)


async def _failure(
    runtime: Runtime,
    caller: Caller,
    prepared: PreparedTurn,
    result: TurnResult,
    headers: dict[str, str],
) -> ApiError:
    """How a failed turn answers: only a failure of the model endpoint is a 502."""
    message = result.error or "The model endpoint failed."
    stored = (prepared.turn.record.result if prepared.turn is not None else None) or {}
    if stored.get(ERROR_CODE) == "context_overflow":
        # OpenAI's code for a request too long for the model: retrying it cannot succeed.
        return ApiError(400, message, "context_length_exceeded", headers=headers, param="messages")
    if stored.get(ERROR_CODE) in ("iteration_cap", "turn_token_budget", FORMAT_UNMET):
        # The turn's own limit stopped it before a final answer, or its final answer is not
        # in the strict format asked for, after its tools ran: a 4xx the openai SDK does not
        # retry on its own (a retry would run the tools again).
        return ApiError(422, message, str(stored[ERROR_CODE]), headers=headers)
    if stored.get(ERROR_CODE) in ("database_unavailable", "database_refused", "internal_error"):
        # Answered (not raised) only once its calls ran: not the 503 an outage or the 500 a
        # bug is otherwise, which the SDK retries, running them again. The turn and what ran
        # are named, since an OpenAI error has no field for them.
        ran = ", ".join(f"{bounded(c['name'])} ({c['outcome']})" for c in result.tool_calls)
        message = f"{message} Turn {result.turn_id} ran: {ran}."
        return ApiError(422, message, str(stored[ERROR_CODE]), headers=headers)
    refusal = await runtime.quotas.tokens(caller.org)
    if refusal is not None:  # the org's token budget ran out during the turn
        return ApiError(
            refusal.status,
            refusal.message,
            refusal.code,
            headers={**headers, **refusal.headers()},
        )
    code = stored.get(ERROR_CODE)
    if code in _LIMITS_REFUSED:
        # The limits refused a model call and answer otherwise by now (Redis back): still
        # not the model endpoint's fault, and worth a retry later.
        status = _LIMITS_REFUSED[str(code)]
        retry = {"Retry-After": str(LIMITS_RETRY_SECONDS)}
        return ApiError(status, message, str(code), headers={**headers, **retry})
    return ApiError(502, message, "model_error", headers=headers)


#: The status of a turn a model call refused by the limits ended, when they no longer refuse.
_LIMITS_REFUSED = {"limits_unavailable": 503, "token_budget_exhausted": 429}
#: How long a client is told to wait before retrying such a turn.
LIMITS_RETRY_SECONDS = 5


async def _answer_format(
    body: ChatCompletionRequest, reasoner: AgentReasoner
) -> dict[str, Any] | None:
    """The request's ``response_format`` as the model is asked; 400 for one it cannot honour."""
    answer_format = body.answer_format()
    if answer_format is None or answer_format["type"] == "text":
        return answer_format
    if not reasoner.structured_output:
        raise ApiError(
            400,
            f"response_format: {answer_format['type']!r} cannot be honoured: this deployment's "
            "model (the built-in demo model, say) answers in free text only. Send "
            '{"type": "text"} or no response_format, and ask for JSON in the message instead.',
            "invalid_request_error",
            param="response_format",
        )
    # In a thread: checking the caller's schema compiles the caller's patterns.
    if (problem := await anyio.to_thread.run_sync(schema_problem, answer_format)) is not None:
        raise ApiError(
            400, f"response_format: {problem}", "invalid_request_error", param="response_format"
        )
    return answer_format


def _with_client_tools(
    reasoner: AgentReasoner, body: ChatCompletionRequest, runtime: Runtime
) -> AgentReasoner:
    """The reasoner for this request: with the client's ``tools``, unless the setting is off."""
    if not body.tools or not runtime.settings.openai_client_tools:
        return reasoner
    for server, config in runtime.settings.mcp_servers.items():
        # `<prefix>_*` in a mode or workflow names that server's tools and no others.
        pattern = f"{tool_prefix(server, config)}_*"
        for index, t in enumerate(body.tools):
            if matches(t.function.name, pattern):
                raise ApiError(
                    400,
                    f"The client tool {t.function.name!r} falls under {pattern!r}, the tool "
                    f"names of the MCP server {server!r} (compared case-insensitively); "
                    "rename it.",
                    "invalid_request_error",
                    param=f"tools[{index}]",
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
        raise ApiError(400, str(exc), "invalid_request_error", param="tools") from exc


@dataclass(frozen=True, slots=True)
class _Target:
    """The session a request goes to and the instruction to run there."""

    session_id: str
    instruction: str | None
    #: The client picked another model than the session's last answer carried.
    picked_model: bool = False


async def _session_for(
    runtime: Runtime,
    caller: Caller,
    fingerprints: ConversationFingerprints,
    body: ChatCompletionRequest,
    ask: Ask,
    mode: str,
    header: str | None,
) -> _Target:
    """The session this request continues (or a new one), and the instruction to run."""
    sessions = runtime.services.sessions
    if header is not None:
        if await owned_session(sessions, header, caller.org, caller.user) is None:
            raise ApiError(404, f"Unknown session '{header}'.", "not_found")
        shown = await fingerprints.last_model(header)
        return _Target(header, ask.instruction, _picks(ask, body.model, shown))
    found = await _remembered(fingerprints, caller, body.messages, ask)
    if found is not None:
        return _Target(found.session_id, ask.instruction, _picks(ask, body.model, found.model))
    if ask.tool_results:
        raise ApiError(
            400,
            "No session is waiting for these tool results: send the conversation as it "
            f"was answered, or the {SESSION_HEADER} header of its session.",
            "invalid_request_error",
            param="messages",
        )
    assert ask.instruction is not None
    created = await sessions.create_session(org=caller.org, user=caller.user, mode=mode)
    if created.result is None:
        raise ApiError(422, created.error_message or "Could not create the session.")
    session_id = created.result.id
    asked = fingerprint(body.messages)
    if asked is not None:
        # The same request sent again while its turn runs (an SDK retrying one that timed
        # out) finds this session, whose busy turn refuses it, rather than running it twice.
        await fingerprints.remember(
            org=caller.org,
            user=caller.user,
            session_id=session_id,
            fingerprint=asked,
            model=body.model,
        )
    return _Target(session_id, starting_context(ask.earlier, ask.instruction))


def _picks(ask: Ask, model: str, shown: str | None) -> bool:
    """Whether a new instruction picks ``model`` over the one the last answer carried."""
    return ask.instruction is not None and model != shown


async def _remembered(
    fingerprints: ConversationFingerprints,
    caller: Caller,
    messages: list[ChatMessage],
    ask: Ask,
) -> Remembered | None:
    """The caller's session holding this request (sent again) or its earlier conversation."""
    if ask.instruction is not None and (asked := fingerprint(messages)) is not None:
        same = await fingerprints.find(caller.org, caller.user, asked)
        if same is not None:
            return same
    held = fingerprint(ask.earlier)
    if held is None:
        return None
    # A new message never continues an older state; tool results may name one.
    return await fingerprints.find(caller.org, caller.user, held, current=not ask.tool_results)


async def _pick_mode(
    runtime: Runtime, caller: Caller, prepared: PreparedTurn, mode: str, model: str
) -> None:
    """Switch the session of the claimed turn to ``mode``, the model the client picked."""
    await switch_claimed_mode(
        runtime, caller, prepared, mode, f"Model {model} picked by the client."
    )
