"""What a turn returns, what a client posts back, and the events a turn emits as it runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aptix.llm.types import Usage

__all__ = ["ERROR_CODE", "EventSink", "ToolResultInput", "TurnEvent", "TurnKind", "TurnResult"]

TurnKind = Literal["ok", "tool-only", "empty", "error", "cancelled"]

#: The key of the code saying why an ``error`` turn failed, in its answer (null for the other
#: kinds) and in its stored answer (``TurnRecord.result``, where only an error ending has it):
#: ``model_error`` (the model endpoint), ``token_budget_exhausted`` or ``limits_unavailable``
#: (a model call the org's limits refused), ``context_overflow`` (the context budget),
#: ``iteration_cap`` or ``turn_token_budget`` (stopped by the turn's limit before a final
#: answer), ``response_format_unmet`` (a final answer that is not the JSON a strict
#: ``response_format`` asked for), ``database_unavailable``, ``database_refused`` or
#: ``internal_error`` (unexpected), as the request that ran the turn was told. Turns stored
#: before it have no code.
ERROR_CODE = "errorCode"


@dataclass(frozen=True, slots=True)
class ToolResultInput:
    """A client's result for one pending client-final call."""

    call_id: str
    output: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The outcome of one request to the reasoner (a new instruction or a resume)."""

    session_id: str
    turn_id: str
    kind: TurnKind
    mode: str
    text: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model_id: str | None = None
    branched_session_id: str | None = None
    welcome_message: str | None = None
    error: str | None = None
    #: The model declined to answer (OpenAI's ``message.refusal``): why there is no ``text``.
    refusal: str | None = None
    #: The code of an ``error`` ending, as the turn's record stores it (``model_error``,
    #: ``context_overflow``...): the answer's ``errorCode`` and its span's ``error.type``.
    error_code: str | None = field(default=None, compare=False)

    def to_wire(self) -> dict[str, Any]:
        """The camelCase JSON body of ``POST /v1/agent/execute``."""
        body: dict[str, Any] = {
            "sessionId": self.session_id,
            "turnId": self.turn_id,
            "kind": self.kind,
            "mode": self.mode,
            "text": self.text,
            "toolCalls": list(self.tool_calls),
            "warnings": list(self.warnings),
            "usage": {
                "promptTokens": self.usage.prompt_tokens,
                "completionTokens": self.usage.completion_tokens,
                "totalTokens": self.usage.total_tokens,
            },
            "finishReason": self.finish_reason,
            "modelId": self.model_id,
            # Beside the message in ``error``, so a client tells the failures apart by code.
            ERROR_CODE: self.error_code,
        }
        for key, value in (
            ("branchedSessionId", self.branched_session_id),
            ("welcomeMessage", self.welcome_message),
            ("error", self.error),
            ("refusal", self.refusal),
        ):
            if value is not None:
                body[key] = value
        return body

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> TurnResult:
        """Rebuild a result stored with :meth:`to_wire`."""
        usage = body.get("usage") or {}
        return cls(
            session_id=body["sessionId"],
            turn_id=body["turnId"],
            kind=body["kind"],
            mode=body["mode"],
            text=body.get("text"),
            tool_calls=tuple(body.get("toolCalls") or ()),
            warnings=tuple(body.get("warnings") or ()),
            usage=Usage(usage.get("promptTokens", 0), usage.get("completionTokens", 0)),
            finish_reason=body.get("finishReason"),
            model_id=body.get("modelId"),
            branched_session_id=body.get("branchedSessionId"),
            welcome_message=body.get("welcomeMessage"),
            error=body.get("error"),
            refusal=body.get("refusal"),
            error_code=body.get(ERROR_CODE),
        )


@dataclass(frozen=True, slots=True)
class TurnEvent:
    """Progress of a running turn, for streaming (SSE) and the interactive CLI."""

    type: Literal[
        "text_delta",
        "text",
        "tool_call_started",
        "tool_call_finished",
        "mode_changed",
        "client_calls_pending",
        "turn_finished",
    ]
    data: dict[str, Any]


EventSink = Callable[[TurnEvent], Awaitable[None]]
