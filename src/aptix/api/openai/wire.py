"""A turn's result as a Chat Completions answer: one body, or chunks when streamed.

Aptix's own detail (the session, the turn, server calls that ran, warnings) travels in an
``aptix`` field that OpenAI clients ignore.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from aptix.reasoner import TurnResult

__all__ = [
    "MODEL_PREFIX",
    "completion_body",
    "completion_chunk",
    "handed_over",
    "mode_of_model",
    "model_of_mode",
    "openai_tool_calls",
]

MODEL_PREFIX = "aptix-"


def model_of_mode(mode: str) -> str:
    """The model name that stands for ``mode``."""
    return f"{MODEL_PREFIX}{mode}"


def mode_of_model(model: str, modes: Sequence[str]) -> str | None:
    """The mode ``model`` names, or None when it names none of ``modes``."""
    if not model.startswith(MODEL_PREFIX):
        return None
    key = model[len(MODEL_PREFIX) :]
    return key if key in modes else None


def handed_over(result: TurnResult) -> list[dict[str, Any]]:
    """The calls the turn hands to the client (client-final calls waiting for results).

    A client-final call the turn already settled (an approval denied on resume, say) is
    listed with its outcome, but nothing waits for it: handed over again, its answer would
    be refused.
    """
    return [
        c
        for c in result.tool_calls
        if c.get("requiresClientExecution") and c.get("outcome", "pending") == "pending"
    ]


def openai_tool_calls(calls: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Aptix wire calls as Chat Completions ``tool_calls``."""
    return [
        {
            "id": call["callId"],
            "type": "function",
            "function": {"name": call["name"], "arguments": call.get("argumentsJson") or "{}"},
        }
        for call in calls
    ]


#: The endings of a model's answer an OpenAI client is told as they are (the SDK acts on
#: them: ``parse`` raises for both); any other ending of a finished turn reads ``stop``.
_CUT = ("length", "content_filter")


def finish_reason(result: TurnResult) -> str:
    """How the turn's answer ended, in the words every OpenAI client knows.

    ``tool_calls`` while the client has calls to answer; ``length`` when the output cap cut
    the answer, ``content_filter`` when the provider's filter stopped it; else ``stop``.
    """
    if handed_over(result):
        return "tool_calls"
    return result.finish_reason if result.finish_reason in _CUT else "stop"


def usage_body(result: TurnResult) -> dict[str, int]:
    """The turn's usage: the sum of its model calls."""
    return {
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "total_tokens": result.usage.total_tokens,
    }


def extension(result: TurnResult) -> dict[str, Any]:
    """What Aptix adds: the session, the turn, its mode, every call with its outcome, warnings."""
    return {
        "sessionId": result.session_id,
        "turnId": result.turn_id,
        "mode": result.mode,
        "toolCalls": list(result.tool_calls),
        "warnings": list(result.warnings),
    }


def completion_body(
    result: TurnResult, completion_id: str, content: str, refusal: str | None = None
) -> dict[str, Any]:
    """The ``chat.completion`` object for a finished (or handed-over) turn saying ``content``.

    A ``refusal`` (the model declined) goes as OpenAI sends it: ``message.refusal``, with no
    content.
    """
    calls = openai_tool_calls(handed_over(result))
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content or ("" if not calls and refusal is None else None),
    }
    if refusal is not None:
        message["refusal"] = refusal
    if calls:
        message["tool_calls"] = calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_of_mode(result.mode),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(result)}],
        "usage": usage_body(result),
        "aptix": extension(result),
    }


def completion_chunk(
    completion_id: str,
    model: str,
    delta: dict[str, Any] | None,
    *,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    aptix: dict[str, Any] | None = None,
) -> str:
    """One ``chat.completion.chunk`` as the JSON text of an SSE ``data`` line.

    ``delta=None`` makes the usage chunk, whose ``choices`` is empty as OpenAI sends it.
    """
    chunk: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    if aptix is not None:
        chunk["aptix"] = aptix
    return json.dumps(chunk, default=str)
