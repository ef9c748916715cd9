"""Reading a Chat Completions conversation: what is asked now, and what came before.

A client resends the whole conversation each time. The last message is the request: a user
message is a new instruction, and trailing ``tool`` messages answer the calls the last turn
handed over. Everything before it is the *earlier* conversation, which Aptix never replays:
it identifies the session (by fingerprint) and, for a new session, becomes starting context.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aptix.api.openai.schemas import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
    message_text,
)
from aptix.blank import strip_blank
from aptix.reasoner import ToolResultInput

__all__ = ["Ask", "AskError", "answer_message", "fingerprint", "read_ask", "starting_context"]


class AskError(ValueError):
    """A conversation Aptix cannot read; ``param`` names the message (``messages[2]``)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True, slots=True)
class Ask:
    """What a request asks: an instruction or tool results, and the conversation before it."""

    earlier: tuple[ChatMessage, ...]
    instruction: str | None = None
    tool_results: tuple[ToolResultInput, ...] = ()


def read_ask(messages: Sequence[ChatMessage]) -> Ask:
    """Split ``messages`` into the earlier conversation and the request.

    Raises :class:`AskError` with a readable message when the conversation does not end with
    a user message or with tool results, or when a message's content is not text.
    """
    for index, message in enumerate(messages):
        # Earlier messages are read too (fingerprint, starting context): a part Aptix cannot
        # read is refused here, with the message's place, not met later as a failure.
        try:
            message_text(message.content)
        except ValueError as exc:
            raise AskError(f"messages[{index}]: {exc}", f"messages[{index}]") from None
    last, last_param = messages[-1], f"messages[{len(messages) - 1}]"
    if isinstance(last, UserMessage):
        text = message_text(last.content)
        if not strip_blank(text):  # blank as the reasoner reads it: refused before any write
            raise AskError("The last user message is empty.", last_param)
        return Ask(tuple(messages[:-1]), instruction=text)
    if isinstance(last, ToolMessage):
        start = len(messages)
        while start > 0 and isinstance(messages[start - 1], ToolMessage):
            start -= 1
        results = []
        seen: set[str] = set()
        for index, message in enumerate(messages[start:], start):
            assert isinstance(message, ToolMessage)
            if message.tool_call_id in seen:
                raise AskError(
                    f"Tool call '{message.tool_call_id}' is answered twice.", f"messages[{index}]"
                )
            seen.add(message.tool_call_id)
            results.append(ToolResultInput(message.tool_call_id, message_text(message.content)))
        return Ask(tuple(messages[:start]), tool_results=tuple(results))
    raise AskError(
        "The last message must be a user message (a new request) or tool messages "
        f"(results for the calls handed over), not '{last.role}'.",
        last_param,
    )


def _canonical(message: ChatMessage) -> list[Any] | None:
    # System prompts are left out: chat UIs rewrite them (dates, settings) between requests.
    if isinstance(message, SystemMessage):
        return None
    if isinstance(message, ToolMessage):
        return ["tool", message.tool_call_id, message_text(message.content).strip()]
    if isinstance(message, AssistantMessage):
        calls = [
            [call.id, call.function.name, _arguments(call.function.arguments)]
            for call in message.tool_calls or ()
        ]
        return ["assistant", message_text(message.content).strip(), calls]
    return ["user", message_text(message.content).strip()]


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def fingerprint(messages: Sequence[ChatMessage]) -> str | None:
    """The sha256 of a conversation's user, assistant and tool messages; None when empty."""
    canonical = [c for c in map(_canonical, messages) if c is not None]
    if not canonical:
        return None
    text = json.dumps(canonical, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def answer_message(text: str | None, tool_calls: Sequence[dict[str, Any]]) -> AssistantMessage:
    """The assistant message a client will append for an answer (for the next fingerprint)."""
    return AssistantMessage.model_validate(
        {"role": "assistant", "content": text, "tool_calls": list(tool_calls) or None}
    )


def starting_context(earlier: Sequence[ChatMessage], instruction: str) -> str:
    """A new session's first instruction: the client's earlier conversation, then the ask.

    The earlier messages are quoted as context, never replayed: tool calls in them are not
    run again.
    """
    if not earlier:
        return instruction
    lines = ["Earlier conversation, as the client sent it (context only):"]
    for message in earlier:
        if isinstance(message, AssistantMessage):
            text = message_text(message.content)
            for call in message.tool_calls or ():
                text += f"\n[called {call.function.name} {call.function.arguments}]"
            lines.append(f"assistant: {text.strip()}")
        elif isinstance(message, ToolMessage):
            lines.append(f"tool result ({message.tool_call_id}): {message_text(message.content)}")
        else:
            lines.append(f"{message.role}: {message_text(message.content)}")
    lines += ["", "The request now:", instruction]
    return "\n".join(lines)
