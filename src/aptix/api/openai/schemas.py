"""Chat Completions request bodies, as OpenAI clients send them (snake_case, as OpenAI's).

Only what Aptix reads is modelled strictly. Sampling parameters a client sends out of habit
(``temperature``, ``top_p``, ``seed``, ...) are accepted and ignored: the deployment's model
settings apply, as they do to every other surface. ``response_format`` is passed on to the
model. Fields that would change the answer's shape (``n``, ``functions``, ``logprobs``, ... in
:data:`SHAPE_FIELDS`) are read, and refused unless they ask for what Aptix answers anyway.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from aptix.nul import NUL_REFUSED, SURROGATE_REFUSED, find_nul, find_surrogate

__all__ = [
    "SHAPE_FIELDS",
    "AssistantMessage",
    "ChatCompletionRequest",
    "ChatMessage",
    "ClientTool",
    "JsonObjectFormat",
    "JsonSchema",
    "JsonSchemaFormat",
    "ResponseFormat",
    "StreamOptions",
    "SystemMessage",
    "TextFormat",
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


class TextFormat(_Body):
    """``{"type": "text"}``: the answer in free text, as without a ``response_format``."""

    type: Literal["text"]


class JsonObjectFormat(_Body):
    """``{"type": "json_object"}``: the answer is a JSON object (the model is asked for one)."""

    type: Literal["json_object"]


class JsonSchema(_Body):
    """The schema a ``json_schema`` answer follows: its name, and with ``strict`` a guarantee."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[a-zA-Z0-9_-]+$")
    description: str | None = Field(None, max_length=10_000)
    # ``schema`` would shadow BaseModel.schema: the wire name is the alias.
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class JsonSchemaFormat(_Body):
    """``{"type": "json_schema", "json_schema": {...}}``: the answer is JSON of that schema."""

    type: Literal["json_schema"]
    json_schema: JsonSchema


ResponseFormat = Annotated[
    TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")
]


class StreamOptions(_Body):
    """``stream_options``: ``include_usage`` adds a last chunk with the turn's usage."""

    include_usage: bool = False


#: The fields that would change the answer's shape: the values that ask for what Aptix answers
#: anyway, and why any other is refused. Checked in this order, so a request is told about
#: ``functions`` before the ``function_call`` that picks one of them.
SHAPE_FIELDS: tuple[tuple[str, tuple[Any, ...], str], ...] = (
    ("n", (None, 1), "only 1 is supported; a request runs one turn, which has one answer."),
    (
        "tool_choice",
        (None, "auto"),
        'only "auto" is supported; the session\'s mode and workflow decide which tools the '
        "model may call.",
    ),
    (
        "functions",
        (None, []),
        "the deprecated functions are not supported; offer client functions as tools "
        '({"type": "function", "function": {...}}).',
    ),
    (
        "function_call",
        (None, "auto"),
        'only "auto" is supported; the session\'s mode and workflow decide which tools the '
        "model may call.",
    ),
    (
        "parallel_tool_calls",
        (None, True),
        "only true is supported; an answer may hand over several tool calls at once.",
    ),
    ("modalities", (None, ["text"]), 'only ["text"] is supported; the agent answers in text.'),
    ("audio", (None,), "audio answers are not supported; the agent answers in text."),
    (
        "logprobs",
        (None, False),
        "only false is supported; an answer is the text of the turn's model calls, without "
        "log probabilities.",
    ),
    (
        "top_logprobs",
        (None, 0),
        "only 0 is supported; an answer carries no log probabilities.",
    ),
    (
        "web_search_options",
        (None,),
        "web search is not supported; the agent uses the tools its mode permits.",
    ),
    (
        "moderation",
        (None,),
        "moderation is not supported; nothing is moderated and no moderation results come back.",
    ),
)


class ChatCompletionRequest(_Body):
    """``POST /v1/chat/completions``: the model picks the mode; the last message is the ask."""

    model: str = Field(min_length=1, max_length=200, description="`aptix-<mode key>`.")
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[ClientTool] | None = Field(None, max_length=100)
    response_format: ResponseFormat | None = None
    # Read only to refuse what Aptix cannot answer (SHAPE_FIELDS): the types are OpenAI's.
    n: int | None = None
    tool_choice: str | dict[str, Any] | None = None
    functions: list[Any] | None = None
    function_call: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    web_search_options: dict[str, Any] | None = None
    moderation: dict[str, Any] | None = None

    def unsupported(self) -> tuple[str, str] | None:
        """The field Aptix cannot answer the way it asks, and why; None when it can."""
        for field, accepted, why in SHAPE_FIELDS:
            if getattr(self, field) not in accepted:
                return field, f"{field}: {why}"
        return None

    def answer_format(self) -> dict[str, Any] | None:
        """``response_format`` as the model is asked (OpenAI's shape); None when not sent."""
        if self.response_format is None:
            return None
        return self.response_format.model_dump(by_alias=True, exclude_none=True)

    @model_validator(mode="before")
    @classmethod
    def _refuse_unstorable(cls, data: Any) -> Any:
        # The same rule as every other body (aptix.api.schemas.WireModel): text that cannot
        # be stored is refused at the edge, never half-stored.
        for find, refused in ((find_nul, NUL_REFUSED), (find_surrogate, SURROGATE_REFUSED)):
            if (found := find(data)) is not None:
                # ``param`` names the field, as the other refusals do (aptix.api.errors);
                # ``where`` goes last, so that text in it is never read as a placeholder.
                context = {"param": _field_of(data, found), "where": found}
                raise PydanticCustomError(
                    "unstorable_text", f"{refused} (found in '{{where}}')", context
                )
        return data


#: A field as OpenAI's ``param`` names it: ``model``, ``messages[2]``.
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[0-9]+\])?")


def _field_of(data: Any, where: str) -> str | None:
    """The request field at the start of ``where`` (``messages[0].content`` → ``messages[0]``)."""
    head = where.split(".", 1)[0]
    if not isinstance(data, dict) or not _FIELD.fullmatch(head):
        return None
    return head if head.split("[", 1)[0] in data else None


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
