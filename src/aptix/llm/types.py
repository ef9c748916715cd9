"""What the reasoner sends to a model and gets back, independent of any vendor API.

Messages use the Chat Completions shape (``role``, ``content``, ``tool_calls``,
``tool_call_id``) because it is the lingua franca of OpenAI-compatible servers; a client for
another API converts them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "LlmClient",
    "LlmRequest",
    "LlmResponse",
    "Message",
    "TextSink",
    "ToolCallRequest",
    "Usage",
]

Message = dict[str, Any]

#: Receives pieces of the model's text as they arrive (streaming).
TextSink = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One tool call the model asked for; ``arguments`` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one model request (zeros when the server does not report them)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True)
class LlmRequest:
    """The messages so far and the tools offered (flat TUL-011 schemas)."""

    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class LlmResponse:
    """The model's answer: text and/or tool calls, with usage and finish reason."""

    text: str | None = None
    tool_calls: tuple[ToolCallRequest, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model_id: str | None = None


class LlmClient(Protocol):
    """A model endpoint; raises :class:`~aptix.errors.LlmError` on every failure."""

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        """Send the request and return the model's response.

        With ``on_text`` the client streams: each piece of text is passed on as it arrives,
        and the returned response is still complete.
        """
        ...
