"""A streamed turn as ``chat.completion.chunk`` Server-Sent Events, ending with ``[DONE]``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from sse_starlette import ServerSentEvent

from aptix.api import shutdown
from aptix.api.abandoned import abandon
from aptix.api.errors import ApiError, openai_error_body, unexpected_error
from aptix.api.openai.answer import StreamedText
from aptix.api.openai.wire import (
    completion_chunk,
    extension,
    finish_reason,
    handed_over,
    model_of_mode,
    openai_tool_calls,
    usage_body,
)
from aptix.errors import AptixError
from aptix.reasoner import AgentReasoner, TurnEvent, TurnResult
from aptix.reasoner.loop import PreparedTurn

__all__ = ["Answered", "Failed", "completion_chunks"]

#: Stores what the client now holds: the turn's result and the content it was sent.
Answered = Callable[[TurnResult, str], Awaitable[None]]
#: The error a failed turn answers (its status, code and message).
Failed = Callable[[TurnResult], Awaitable[ApiError]]


async def completion_chunks(
    reasoner: AgentReasoner,
    prepared: PreparedTurn,
    completion_id: str,
    *,
    include_usage: bool,
    answered: Answered,
    failed: Failed,
    stopping: anyio.Event,
    held: Callable[[], str] | None = None,
    refusal: Callable[[], str | None] = lambda: None,
) -> AsyncIterator[ServerSentEvent]:
    """The turn's chunks; set ``stopping`` when the server stops, to end with a 503 error.

    ``held`` (an answer in a ``response_format``) gives the content once the turn has
    answered: it is sent whole then, rather than each model call's text as it comes, since
    only the last call's text is the answer, and only the turn's end tells which call that is.
    ``refusal`` gives the model's refusal once the turn has answered, sent as
    ``delta.refusal``.
    """
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
            # Logged and stored by the reasoner (TurnEndings.broken: an error, or a resume
            # that ran nothing waiting for this same request again).
            await queue.put(openai_error_body(*unexpected_error(exc)))
        except asyncio.CancelledError:
            # Only the shutdown's cut or the client going away cancel it; the latter reads no
            # more chunks.
            await queue.put(openai_error_body(503, "shutting_down", shutdown.SHUTTING_DOWN))
            raise
        finally:
            await queue.put(None)

    assert prepared.turn is not None
    # Every chunk names the session's mode as it is when the chunk is sent.
    model = model_of_mode(prepared.turn.session.mode)
    text = StreamedText()

    def chunk(delta: dict[str, Any], aptix: dict[str, Any] | None = None) -> ServerSentEvent:
        return ServerSentEvent(data=completion_chunk(completion_id, model, delta, aptix=aptix))

    task = asyncio.create_task(run())
    watcher = asyncio.create_task(shutdown.cut_short_when_stopping(stopping, task))
    try:
        yield chunk({"role": "assistant", "content": ""})
        while (item := await queue.get()) is not None:
            if isinstance(item, AptixError):
                code = getattr(item, "code", type(item).__name__)
                yield ServerSentEvent(data=_json(openai_error_body(409, code, str(item))))
            elif isinstance(item, dict):
                yield ServerSentEvent(data=_json(item))
            elif isinstance(item, TurnResult):
                async for event in _final_chunks(
                    item,
                    completion_id,
                    include_usage,
                    text.content,
                    answered,
                    failed,
                    held,
                    refusal,
                ):
                    yield event
            elif item.type in ("text_delta", "text"):
                if held is not None:
                    continue
                # A model that answered without streaming sends its text whole, at its end.
                if item.type == "text_delta":
                    piece = text.piece(item.data.get("delta", ""))
                else:
                    piece = text.call_ended(item.data.get("text") or "")
                if piece:
                    yield chunk({"content": piece})
            elif item.type not in ("turn_finished", "client_calls_pending"):
                if item.type == "mode_changed":
                    model = model_of_mode(item.data["mode"])
                yield chunk({}, {"event": item.type, "data": item.data})
        yield ServerSentEvent(data="[DONE]")
    finally:
        watcher.cancel()
        if not task.done() and prepared.turn is not None:
            # The client went away: cancel the turn (recorded as cancelled); the session's
            # next request here waits for that record rather than meeting the turn running.
            abandon(prepared.turn.record.session_id, task)


async def _final_chunks(
    result: TurnResult,
    completion_id: str,
    include_usage: bool,
    content: str,
    answered: Answered,
    failed: Failed,
    held: Callable[[], str] | None,
    refusal: Callable[[], str | None],
) -> AsyncIterator[ServerSentEvent]:
    model = model_of_mode(result.mode)
    if result.kind == "error":
        error = await failed(result)
        body = openai_error_body(error.status, error.code, error.message, error.param)
        yield ServerSentEvent(data=_json(body))
        return
    if held is not None:
        content = held()
        if content:
            yield ServerSentEvent(data=completion_chunk(completion_id, model, {"content": content}))
    if (declined := refusal()) is not None:
        yield ServerSentEvent(data=completion_chunk(completion_id, model, {"refusal": declined}))
    calls = openai_tool_calls(handed_over(result))
    if calls:
        delta = {"tool_calls": [{"index": i, **call} for i, call in enumerate(calls)]}
        yield ServerSentEvent(data=completion_chunk(completion_id, model, delta))
    await answered(result, content)
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
