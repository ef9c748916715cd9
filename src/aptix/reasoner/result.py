"""What a turn returns, what a client posts back, and the events a turn emits as it runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aptix.llm.types import Usage

__all__ = ["EventSink", "ToolResultInput", "TurnEvent", "TurnKind", "TurnResult"]

TurnKind = Literal["ok", "tool-only", "empty", "error", "cancelled"]


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
    #: ``context_overflow``...): for its span; the answer's body is :meth:`to_wire`.
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
