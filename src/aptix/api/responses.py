"""Typed response bodies: what each route answers, as the OpenAPI document shows it.

Fields are camelCase on the wire. Extra fields are allowed, so an addition in a later
version is not an error; every field listed here is always present.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from aptix.api.schemas import ErrorDetail
from aptix.reasoner.result import TurnKind

__all__ = [
    "CancelledWorkflow",
    "Health",
    "LimitsHealth",
    "Mode",
    "Session",
    "SessionDetail",
    "ToolInfo",
    "Turn",
    "TurnResultBody",
]


#: The codes an ``error`` turn fails with (``aptix.reasoner.result.ERROR_CODE``).
_TURN_ERROR_CODES = (
    "`model_error`, `token_budget_exhausted`, `limits_unavailable`, `context_overflow`, "
    "`iteration_cap`, `turn_token_budget`, `response_format_unmet`, `database_unavailable`, "
    "`database_refused` or `internal_error`"
)


class OutModel(BaseModel):
    """camelCase output; unknown additions pass through."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class LimitsHealth(OutModel):
    """Where the limits count, and whether they can."""

    store: Literal["memory", "redis"] = Field(
        description="`redis` with APTIX_REDIS_URL (shared by every process), else `memory`."
    )
    redis_up: bool | None = Field(
        description="Whether Redis answered the last call the limits made to it; null without "
        "Redis. While false the limits let requests through (`open`) or refuse them with 503 "
        "(`closed`), and usage goes uncounted; the status stays `ok` either way."
    )
    when_redis_down: Literal["open", "closed"]


class Health(OutModel):
    """``GET /healthz``."""

    status: Literal["ok"]
    tools: int = Field(description="Registered tools.")
    model_configured: bool
    limits: LimitsHealth


class ToolInfo(OutModel):
    """A registered tool."""

    name: str
    server_final: bool = Field(description="False: the client runs it and posts the result.")
    usage: str = Field(description="When and how the model should call it.")
    schema_: dict[str, Any] = Field(alias="schema", description="The function-tool schema.")


class ModeChange(OutModel):
    """One entry of a session's mode history."""

    previous_mode: str | None
    mode: str
    reason: str | None
    changed_at: str
    changed_by: str | None


class Session(OutModel):
    """A session."""

    session_id: str
    org: str
    user: str
    title: str | None
    mode: str
    mode_reason: str | None
    mode_set_at: str | None
    mode_history: list[ModeChange]
    parent_session_id: str | None
    active_workflow_id: str | None
    created_at: str
    updated_at: str
    version: int


class ContextDropped(OutModel):
    """Earlier turns left out of a turn's last model request (the context budget)."""

    turns: int = Field(description="Turns left out, those a summary stands for included.")
    through_turn_id: str = Field(description="The newest turn left out.")
    summarized: int = Field(description="Of those, the turns a summary stands for.")
    summary: str | None = Field(
        description="The summary the model was sent in their place (the model wrote it; control "
        "characters shown as escapes); null when none stands for them."
    )


class Turn(OutModel):
    """A stored turn."""

    turn_id: str
    seq: int
    status: str = Field(description="running, pending, completed, error, interrupted or cancelled.")
    instruction: str | None
    text: str | None
    refusal: str | None = Field(
        description="The model declined to answer (OpenAI's `message.refusal`): its reason, "
        "when the turn's last model response was a refusal; else null."
    )
    tool_calls: list[dict[str, Any]]
    model_calls: list[dict[str, Any]] = Field(
        description="One entry per model request: promptTokens, completionTokens, "
        "finishReason, modelId, toolCalls (the calls it asked for), durationMs; a context "
        "summary request has purpose `contextSummary`; a request cut short once its output "
        "began to come (its text, or a tool call's arguments or a refusal it was writing) has "
        "`estimated: true`, the tokens `/v1/usage` charged it (its prompt and the output it "
        "streamed, estimated), and finishReason and modelId null."
    )
    warnings: list[Any]
    pending_calls: list[dict[str, Any]]
    context_dropped: ContextDropped | None
    error: ErrorDetail | None = Field(
        description=f"Why an `error` turn failed: code {_TURN_ERROR_CODES} (`turn_failed` for "
        "turns stored before the code); null for other turns."
    )
    created_at: str
    updated_at: str


class SessionDetail(Session):
    """A session with its branched sessions and a page of its turns."""

    child_session_ids: list[str]
    turns: list[Turn]
    turns_next_before: int | None = Field(
        description="The `turnsBefore` of the next older page; null on the first turn."
    )


class CancelledWorkflow(OutModel):
    """``POST /v1/sessions/{id}/workflow/cancel``."""

    session_id: str
    cancelled: str = Field(description="The workflow that was cancelled.")


class Mode(OutModel):
    """A mode with the tools it offers."""

    key: str
    display_name: str
    description: str
    is_default: bool
    offered_tools: list[str]


class Usage(OutModel):
    """Tokens used by the turn."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class TurnResultBody(OutModel):
    """The result of a turn (``kind``: ok, tool-only, empty, error or cancelled)."""

    session_id: str
    turn_id: str
    kind: TurnKind = Field(
        description="`ok`, `tool-only` (client calls pending), `empty`, `error` or `cancelled`."
    )
    mode: str
    text: str | None
    tool_calls: list[dict[str, Any]]
    warnings: list[Any]
    usage: Usage
    finish_reason: str | None
    model_id: str | None
    error_code: str | None = Field(
        description="Why an `error` turn failed, the code its stored turn's `error.code` has: "
        f"{_TURN_ERROR_CODES}; null for other turns (and for an error whose cause is not "
        "known here: another process ran or closed the turn). `database_unavailable`, "
        "`database_refused` or `internal_error` here means calls of the request ran (see "
        "`toolCalls`): sending it again would run them again."
    )
    error: str | None = Field(
        None,
        description="Only on an `error` turn: why it failed, in words (`errorCode` says it as "
        "a code).",
    )
    branched_session_id: str | None = Field(
        None,
        description="Only when a mode change in the turn (`agent_change_mode`) branched a new "
        "session: its id.",
    )
    welcome_message: str | None = Field(
        None,
        description="Only when the session's mode changed during the turn: the new mode's "
        "welcome message (when it has one).",
    )
    refusal: str | None = Field(
        None,
        description="Only when the model declined to answer (OpenAI's `message.refusal`): "
        "its reason, in place of an answer (`kind` `empty`, as no text came).",
    )
