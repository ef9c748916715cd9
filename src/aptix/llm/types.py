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
    "answers_in_formats",
    "chat_finish",
]

Message = dict[str, Any]

#: Receives pieces of the model's text as they arrive (streaming).
TextSink = Callable[[str], Awaitable[None]]

#: A Responses API ``status`` that ends an answer, as a Chat Completions ``finish_reason``:
#: what a response's ending reads on both APIs. Turns stored before round 67 with the
#: Responses API kept the status itself as the finish reason: read back as this too.
RESPONSES_FINISH = {"completed": "stop", "incomplete": "length"}


def chat_finish(reason: Any, *, calls: bool = False) -> Any:
    """A finish reason in Chat Completions' words (``stop``, ``tool_calls``, ``length``...).

    A Responses API status (:data:`RESPONSES_FINISH`) is mapped: ``completed`` is
    ``tool_calls`` when the answer asked for ``calls``, else ``stop``; ``incomplete`` is
    ``length`` (its ``incomplete_details`` were not kept). Anything else is as given.
    """
    if not isinstance(reason, str) or reason not in RESPONSES_FINISH:
        return reason
    finish = RESPONSES_FINISH[reason]
    return "tool_calls" if calls and finish == "stop" else finish


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
    """The messages so far, the tools offered (flat TUL-011 schemas), and the answer's format.

    ``response_format`` is in the Chat Completions shape (``{"type": "json_schema",
    "json_schema": {...}}``, ``{"type": "json_object"}`` or ``{"type": "text"}``); a client for
    another API converts it. None (as ``text``) asks for free text.
    """

    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()
    response_format: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class LlmResponse:
    """The model's answer: text and/or tool calls, with usage and finish reason.

    ``refusal`` is the model declining to answer (OpenAI's ``message.refusal``), said instead
    of text.
    """

    text: str | None = None
    tool_calls: tuple[ToolCallRequest, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model_id: str | None = None
    refusal: str | None = None


class LlmClient(Protocol):
    """A model endpoint; raises :class:`~aptix.errors.LlmError` on every failure."""

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        """Send the request and return the model's response.

        With ``on_text`` the client streams: each piece of text is passed on as it arrives,
        and the returned response is still complete.
        """
        ...


def answers_in_formats(model: LlmClient) -> bool:
    """Whether ``model`` honours ``LlmRequest.response_format``.

    A client that cannot declares ``structured_output = False`` (the demo model does), so a
    request for a format is refused before its turn starts; any other is taken to honour it.
    """
    return getattr(model, "structured_output", True) is not False
