"""The span handles, the tracing interface and the span events of Aptix's traces.

:class:`Tracing` and :data:`NO_TRACING` make no spans (tracing off); the OpenTelemetry ones
are in :mod:`aptix.telemetry.otel` (see :mod:`aptix.telemetry`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from aptix.log_setup import escape_controls
from aptix.logger import OUTSIDE_TEXT_LIMIT
from aptix.nul import without_surrogates

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = [
    "CAPPED_EVENT",
    "DENIAL_EVENT",
    "HAND_OFF_EVENT",
    "NO_TRACING",
    "ORG_ATTRIBUTE",
    "REFUSAL_EVENT",
    "REQUEST_ID_ATTRIBUTE",
    "SpanHandle",
    "Tracing",
    "bounded_text",
    "capped_attributes",
    "denial_attributes",
    "hand_off_attributes",
    "refusal_attributes",
]


# What tracing reads from the layers above it, as structural protocols: telemetry is
# infrastructure and imports neither the reasoner nor the tools (docs/architecture.md).


class TracedUsage(Protocol):
    """Tokens used (``aptix.llm.types.Usage``)."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...


class TracedResponse(Protocol):
    """A model response (``aptix.llm.types.LlmResponse``)."""

    @property
    def model_id(self) -> str | None: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def usage(self) -> TracedUsage: ...


class TracedResult(Protocol):
    """How a turn ended (``aptix.reasoner.result.TurnResult``)."""

    @property
    def kind(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def usage(self) -> TracedUsage: ...
    @property
    def model_id(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def error_code(self) -> str | None: ...


class _Session(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def org(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def active_workflow_id(self) -> str | None: ...


class _Record(Protocol):
    @property
    def id(self) -> str: ...


class TracedTurn(Protocol):
    """A running turn (``aptix.reasoner.running.RunningTurn``)."""

    @property
    def session(self) -> _Session: ...
    @property
    def record(self) -> _Record: ...
    @property
    def resume_key(self) -> object: ...
    @property
    def usage(self) -> TracedUsage: ...


class TracedCall(Protocol):
    """A tool call (``aptix.tools.context.AgentToolCall``)."""

    @property
    def name(self) -> str: ...
    @property
    def call_id(self) -> str: ...


#: ``gen_ai.agent.name`` of every ``invoke_agent`` span.
AGENT_NAME = "aptix"
#: Event on the turn's span for each call handed to the client (``request_user_approval``...).
HAND_OFF_EVENT = "aptix.tool_call.handed_off"
#: Event for each call that was refused rather than run (not offered, the workflow guard...).
REFUSAL_EVENT = "aptix.tool_call.refused"
#: Event for each cut of a model response (too many tool calls, a repeated call id, long text).
CAPPED_EVENT = "aptix.response.capped"
#: Event on a resumed turn's span for each call held for approval that the answer denied.
DENIAL_EVENT = "aptix.tool_call.denied"
#: The org of a request's or a turn's span: its name, never a key (an operator tells orgs
#: apart by it). Not a metric label: one series per org would grow with the tenants.
ORG_ATTRIBUTE = "aptix.org.id"
#: The request id (``X-Request-ID``, or the one made up) on the request's server span.
REQUEST_ID_ATTRIBUTE = "aptix.request.id"
#: Most characters of a text from outside (a model's tool name, an endpoint's error message)
#: that a span name, attribute or status carries: such text can be of any size (as in logs).
_TEXT_LIMIT = OUTSIDE_TEXT_LIMIT


def _bounded(text: str, limit: int = _TEXT_LIMIT) -> str:
    """``text`` on one line (control characters escaped), cut to ``limit`` characters.

    A lone surrogate (U+D800 to U+DFFF unpaired, as an endpoint's JSON may escape it) is
    U+FFFD: the OTLP exporter encodes a whole batch at once, and one string that is not UTF-8
    loses every span of the batch, other orgs' included.
    """
    shown = without_surrogates(escape_controls(text))
    return shown if len(shown) <= limit else f"{shown[: limit - 1]}…"


def bounded_text(text: str) -> str:
    """Text from outside as a span carries it: on one line, UTF-8, cut to 500 characters."""
    return _bounded(text)


class SpanHandle:
    """What the reasoner and the executor record on a span; this base records nothing."""

    __slots__ = ()

    def model_response(self, response: TracedResponse) -> None:
        """Record a model call's response (model, finish reason, tokens)."""

    def turn_result(self, result: TracedResult) -> None:
        """Record how a turn ended."""

    def tool_outcome(
        self,
        *,
        outcome: str | None,
        error: str | None,
        waiting: str | None = None,
        approved: bool = False,
    ) -> None:
        """Record how a tool call ended: ``outcome`` with ``error``, or handed off.

        ``outcome`` is the executor's (``succeeded``, ``failed``, ``timed_out``, ``abandoned``
        or ``unknown``). ``waiting``: the call did not run but was handed off, and this is
        the ledger's state it now waits in (``awaiting_client`` or ``awaiting_approval``).
        ``approved``: this is the run of a call the user approved.
        """

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        """Add an event to the span."""


_NO_SPAN = SpanHandle()


class _NoScope(contextlib.AbstractContextManager[SpanHandle]):
    """One shared scope for every span not made: entering and leaving it does nothing."""

    def __enter__(self) -> SpanHandle:
        return _NO_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SCOPE = _NoScope()


class Tracing:
    """Spans for turns, model calls and tool calls; this base makes none (tracing is off)."""

    enabled = False

    def turn(self, turn: TracedTurn) -> contextlib.AbstractContextManager[SpanHandle]:
        """The ``invoke_agent`` span around one turn (a new instruction or a resume)."""
        return _NO_SCOPE

    def model_call(
        self, model: object, request: object
    ) -> contextlib.AbstractContextManager[SpanHandle]:
        """The ``chat`` span around one model call."""
        return _NO_SCOPE

    def tool_call(
        self,
        call: TracedCall,
        *,
        session_id: str | None,
        turn_id: str | None,
        org: str | None = None,
    ) -> contextlib.AbstractContextManager[SpanHandle]:
        """The ``execute_tool`` span around one tool call."""
        return _NO_SCOPE

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        """Add an event to the current span."""

    def annotate(self, attributes: dict[str, Any]) -> None:
        """Add attributes to the current span (in a route: the request's server span)."""

    @property
    def provider(self) -> TracerProvider | None:
        """The tracer provider spans go through (None: tracing is off)."""
        return None

    def flush(self) -> None:
        """Export what is buffered."""

    def shutdown(self) -> None:
        """Export what is buffered and stop."""


#: Tracing off: what the runtime uses unless ``APTIX_OTEL=true``.
NO_TRACING = Tracing()


def refusal_attributes(call: TracedCall, reason: str) -> dict[str, Any]:
    """The attributes of a refusal event (the name may be any text the model wrote)."""
    return {
        "gen_ai.tool.name": _bounded(call.name),
        "gen_ai.tool.call.id": _bounded(call.call_id),
        "reason": _bounded(reason),
    }


def denial_attributes(call: TracedCall) -> dict[str, Any]:
    """The attributes of a denial event: the call held for approval that was denied."""
    return {
        "gen_ai.tool.name": _bounded(call.name),
        "gen_ai.tool.call.id": _bounded(call.call_id),
        "aptix.tool.outcome": "denied",
    }


def capped_attributes(warning: str) -> dict[str, Any]:
    """The attributes of a capped event (the warning may quote call ids the model wrote)."""
    return {"reason": _bounded(warning)}


def hand_off_attributes(calls: Sequence[TracedCall]) -> dict[str, Any]:
    """The attributes of a hand-off event: the calls the client now has to answer."""
    return {
        "gen_ai.tool.name": [_bounded(c.name) for c in calls],
        "gen_ai.tool.call.id": [_bounded(c.call_id) for c in calls],
    }
