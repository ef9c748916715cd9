"""Typed request and response bodies (camelCase on the wire)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "ExecuteRequest",
    "InvokeRequest",
    "InvokeResponse",
    "MatchRequest",
    "SessionCreate",
    "ToolResultBody",
    "WireModel",
]


class WireModel(BaseModel):
    """camelCase JSON, field names accepted too."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class InvokeRequest(WireModel):
    """``POST /v1/tools/{name}/invoke``."""

    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="Tool arguments: a JSON object (or its text)."
    )
    session_id: str | None = Field(None, max_length=64, description="Session the tool runs in.")


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
    title: str | None = Field(None, max_length=500)


class ToolResultBody(WireModel):
    """A client's result for one pending client-final tool call."""

    call_id: str = Field(min_length=1, max_length=200)
    result: Any = Field(None, description="The result: any JSON value (text is sent as is).")
    is_error: bool = False


class ExecuteRequest(WireModel):
    """``POST /v1/agent/execute``: an instruction, or results for the pending client calls."""

    session_id: str | None = Field(None, max_length=64, description="None creates a session.")
    mode: str | None = Field(None, max_length=100, description="Mode of a new session.")
    instruction: str | None = Field(None, max_length=100_000)
    tool_results: list[ToolResultBody] | None = Field(None, max_length=100)
    stream: bool = Field(False, description="Answer with Server-Sent Events as the turn runs.")


class MatchRequest(WireModel):
    """``POST /v1/workflows/match``."""

    user_message: str = Field(min_length=1, max_length=10_000)


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
