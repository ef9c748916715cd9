"""Chat Completions request bodies, as OpenAI clients send them (snake_case, as OpenAI's).

Only what Aptix reads is modelled strictly. Sampling parameters a client sends out of habit
(``temperature``, ``top_p``, ``seed``, ...) are accepted and ignored: the deployment's model
settings apply, as they do to every other surface. Fields that would change the answer's
shape (``n``, ``response_format``, ``tool_choice``) are read, and refused unless they ask for
what Aptix answers anyway.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from aptix.nul import NUL_REFUSED, SURROGATE_REFUSED, find_nul, find_surrogate

__all__ = [
    "AssistantMessage",
    "ChatCompletionRequest",
    "ChatMessage",
    "ClientTool",
    "StreamOptions",
    "SystemMessage",
    "ToolMessage",
    "UserMessage",
    "message_text",
]

#: The longest text Aptix reads from one message (the body limit bounds the whole request).
MAX_TEXT = 100_000


class _Body(BaseModel):
    # strict: what Aptix reads must have the type OpenAI's schema gives it (no ``"stream": 0``).
    model_config = ConfigDict(extra="ignore", strict=True)


class TextPart(_Body):
    """A ``{"type": "text", "text": ...}`` content part."""

    type: Literal["text"]
    text: str = Field(max_length=MAX_TEXT)


class OtherPart(_Body):
    """Any other content part (images, audio, files): refused with a readable message."""

    type: str = Field(min_length=1, max_length=100)


Content = Annotated[
    str | list[TextPart | OtherPart], Field(description="Text, or a list of content parts.")
]


class SystemMessage(_Body):
    """A ``system`` or ``developer`` message."""

    role: Literal["system", "developer"]
    content: Content


class UserMessage(_Body):
    """A ``user`` message."""

    role: Literal["user"]
    content: Content


class FunctionCall(_Body):
    """The function a tool call names, with its arguments as JSON text."""

    name: str = Field(min_length=1, max_length=200)
    arguments: str = Field("{}", max_length=MAX_TEXT)


class ToolCall(_Body):
    """One tool call of an earlier assistant message."""

    id: str = Field(min_length=1, max_length=200)
    type: Literal["function"] = "function"
    function: FunctionCall


class AssistantMessage(_Body):
    """An earlier ``assistant`` message: text, tool calls, or both."""

    role: Literal["assistant"]
    content: Content | None = None
    tool_calls: list[ToolCall] | None = Field(None, max_length=100)


class ToolMessage(_Body):
    """A client's result for one tool call."""

    role: Literal["tool"]
    tool_call_id: str = Field(min_length=1, max_length=200)
    content: Content


ChatMessage = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]


class FunctionDefinition(_Body):
    """A function the client offers: its name, description and JSON Schema parameters."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    description: str | None = Field(None, max_length=10_000)
    parameters: dict[str, Any] | None = None


class ClientTool(_Body):
    """A tool the client offers (``{"type": "function", "function": {...}}``)."""

    type: Literal["function"]
    function: FunctionDefinition


class StreamOptions(_Body):
    """``stream_options``: ``include_usage`` adds a last chunk with the turn's usage."""

    include_usage: bool = False


class ChatCompletionRequest(_Body):
    """``POST /v1/chat/completions``: the model picks the mode; the last message is the ask."""

    model: str = Field(min_length=1, max_length=200, description="`aptix-<mode key>`.")
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[ClientTool] | None = Field(None, max_length=100)
    n: int | None = None
    response_format: dict[str, Any] | None = None
    tool_choice: str | dict[str, Any] | None = None

    def unsupported(self) -> tuple[str, str] | None:
        """The field Aptix cannot answer the way it asks, and why; None when it can."""
        if self.n not in (None, 1):
            return "n", "n: only 1 is supported; a request runs one turn, which has one answer."
        if self.response_format not in (None, {"type": "text"}):
            return "response_format", (
                'response_format: only {"type": "text"} is supported; the agent answers in '
                "free text (ask for JSON in the message instead)."
            )
        if self.tool_choice not in (None, "auto"):
            return "tool_choice", (
                'tool_choice: only "auto" is supported; the session\'s mode and workflow '
                "decide which tools the model may call."
            )
        return None

    @model_validator(mode="before")
    @classmethod
    def _refuse_unstorable(cls, data: Any) -> Any:
        # The same rule as every other body (aptix.api.schemas.WireModel): text that cannot
        # be stored is refused at the edge, never half-stored.
        if (found := find_nul(data)) is not None:
            raise ValueError(f"{NUL_REFUSED} (found in '{found}')")
        if (lone := find_surrogate(data)) is not None:
            raise ValueError(f"{SURROGATE_REFUSED} (found in '{lone}')")
        return data


def message_text(content: str | list[TextPart | OtherPart] | None) -> str:
    """The text of a message's content (parts joined by newlines).

    Raises ``ValueError`` for a non-text part, which Aptix cannot pass on.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if isinstance(part, OtherPart):
            if part.type == "text":
                # Not a TextPart, so its ``text`` is missing or not a string.
                raise ValueError("A content part of type 'text' has no 'text' string.")
            raise ValueError(f"Content parts of type '{part.type}' are not supported; send text.")
        texts.append(part.text)
    return "\n".join(texts)
