"""Typed request and response bodies (camelCase on the wire)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from aptix.api.answer_headers import RATE_LIMIT, RETRY_AFTER, with_headers
from aptix.blank import NOT_BLANK_PATTERN
from aptix.casing import from_pascal_case
from aptix.nul import (
    NUL_REFUSED,
    SURROGATE_REFUSED,
    find_nul,
    find_nul_in_json,
    find_surrogate,
    find_surrogate_in_json,
)
from aptix.sessions.models import MAX_TITLE_LENGTH
from aptix.tools.builtin.workflow_registry import MAX_MESSAGE_LENGTH

__all__ = [
    "ERROR_RESPONSES",
    "REQUEST_BODIES",
    "ErrorBody",
    "ExecuteRequest",
    "InvokeRequest",
    "InvokeResponse",
    "MatchRequest",
    "SessionCreate",
    "ToolResultBody",
    "WireModel",
]


class WireModel(BaseModel):
    """camelCase JSON; PascalCase read too (one casing per object); no NUL or lone surrogate."""

    # strict: a body is JSON as its schema says it, so ``"stream": 0.0`` or ``"5"`` for a number
    # is refused, not coerced (schemathesis ST201 found the coercion).
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=False, extra="forbid", strict=True
    )

    @model_validator(mode="before")
    @classmethod
    def _refuse_nul(cls, data: Any) -> Any:
        data = from_pascal_case(data)
        found = find_nul(data)
        if found is None and isinstance(data, dict):
            # Tool arguments may come as JSON text: what it decodes to is stored too.
            text = data.get("arguments")
            found = find_nul_in_json(text) if isinstance(text, str) else None
        if found is not None:
            raise ValueError(f"{NUL_REFUSED} (found in '{found}')")
        lone = find_surrogate(data)
        if lone is None and isinstance(data, dict) and isinstance(data.get("arguments"), str):
            lone = find_surrogate_in_json(data["arguments"])
        if lone is not None:
            raise ValueError(f"{SURROGATE_REFUSED} (found in '{lone}')")
        return data


class InvokeRequest(WireModel):
    """``POST /v1/tools/{name}/invoke``."""

    # ``None`` is in the type so the documented schema admits the null the validator takes.
    arguments: dict[str, Any] | str | None = Field(
        default_factory=dict,
        description="Tool arguments: a JSON object (or its text); null means none.",
    )
    session_id: str | None = Field(None, max_length=64, description="Session the tool runs in.")

    @field_validator("arguments", mode="before")
    @classmethod
    def _an_object(cls, value: Any) -> Any:
        """Null is no arguments; a list or a number is refused in JSON's words, not Python's."""
        if value is None:
            return {}
        if not isinstance(value, dict | str):
            raise PydanticCustomError("arguments_type", "must be a JSON object (or its text)")
        return value


class ErrorItem(WireModel):
    """One error message."""

    message: str


class InvokeResponse(WireModel):
    """The tool's ``InvokeResult``."""

    successful: bool
    result: Any = None
    errors: list[ErrorItem] = Field(default_factory=list)


class SessionCreate(WireModel):
    """``POST /v1/sessions``."""

    mode: str | None = Field(None, max_length=100, description="Mode key; default mode if absent.")
    title: str | None = Field(None, max_length=MAX_TITLE_LENGTH)


class ToolResultBody(WireModel):
    """A client's result for one pending client-final tool call."""

    call_id: str = Field(min_length=1, max_length=200)
    result: Any = Field(None, description="The result: any JSON value (text is sent as is).")
    is_error: bool = False


class ExecuteRequest(WireModel):
    """``POST /v1/agent/execute``: an instruction, or results for the pending client calls."""

    session_id: str | None = Field(None, max_length=64, description="None creates a session.")
    mode: str | None = Field(
        None,
        max_length=100,
        description="Mode of a new session; beside a sessionId with an instruction, the mode "
        "the session switches to before the turn runs (recorded in its mode history).",
    )
    instruction: str | None = Field(
        None, max_length=100_000, pattern=NOT_BLANK_PATTERN, description="Not blank."
    )
    tool_results: list[ToolResultBody] | None = Field(None, min_length=1, max_length=100)
    stream: bool = Field(False, description="Answer with Server-Sent Events as the turn runs.")

    model_config = ConfigDict(
        json_schema_extra={
            # The route's own rule, said in the schema: an instruction, or results for the
            # calls a session is waiting on.
            "anyOf": [
                {
                    "required": ["instruction"],
                    "properties": {
                        "instruction": {"type": "string"},
                        "toolResults": {"type": "null"},
                    },
                },
                {
                    "required": ["toolResults", "sessionId"],
                    "properties": {
                        "toolResults": {"type": "array"},
                        "sessionId": {"type": "string"},
                    },
                },
            ]
        }
    )


class MatchRequest(WireModel):
    """``POST /v1/workflows/match``."""

    user_message: str = Field(
        min_length=1,
        max_length=MAX_MESSAGE_LENGTH,  # the registry tool's own limit
        pattern=NOT_BLANK_PATTERN,
        description="Not blank.",
    )


#: The bodies we read, documented in both casings (``aptix.casing``).
REQUEST_BODIES: tuple[type[WireModel], ...] = (
    ExecuteRequest,
    InvokeRequest,
    MatchRequest,
    SessionCreate,
    ToolResultBody,
)


class ModeOut(WireModel):
    """A mode as listed by ``GET /v1/modes``."""

    id: str
    key: str
    display_name: str
    description: str
    is_default: bool
    welcome_message: str
    tools: list[str]
    status: Literal["active", "experimental", "deprecated"]


class ErrorDetail(BaseModel):
    """What failed: a stable ``code`` and a readable ``message``."""

    code: str
    message: str


class ErrorBody(BaseModel):
    """The envelope of every error answer."""

    error: ErrorDetail


_ERRORS = {
    400: "The request is malformed.",
    401: "A missing or invalid API key (see the `WWW-Authenticate` header).",
    404: "No such route, or no such thing for this caller.",
    409: "The request conflicts with the current state.",
    413: "The body is larger than the limit (`APTIX_MAX_BODY_BYTES`).",
    422: "The request is invalid; the message says which part and why.",
    429: "A rate limit or quota is reached; see `Retry-After`, `RateLimit` and `RateLimit-Policy`.",
    503: "The database (or the model configuration) is unavailable, or the org's tool threads "
    "are all held; see `Retry-After`.",
    504: "A tool or the workflow registry ran out of time.",
}

#: The headers an error answer carries, by status (a route may add more).
_ERROR_HEADERS = {429: (RETRY_AFTER, RATE_LIMIT), 503: (RETRY_AFTER,)}

#: The error answers every operation documents, all with the envelope.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: with_headers({"model": ErrorBody, "description": text}, *_ERROR_HEADERS.get(status, ()))
    for status, text in _ERRORS.items()
}
