"""The span handles and tracers of Aptix's OpenTelemetry traces (see :mod:`aptix.telemetry`)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib.metadata
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from aptix.log_setup import escape_controls
from aptix.logger import OUTSIDE_TEXT_LIMIT

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = [
    "CAPPED_EVENT",
    "HAND_OFF_EVENT",
    "NO_TRACING",
    "REFUSAL_EVENT",
    "OtelTracing",
    "SpanHandle",
    "Tracing",
    "hand_off_attributes",
    "refusal_attributes",
]


# What tracing reads from the layers above it, as structural protocols: telemetry is
# infrastructure and imports neither the reasoner nor the tools (docs/architecture.md).


class _Usage(Protocol):
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
    def usage(self) -> _Usage: ...


class TracedResult(Protocol):
    """How a turn ended (``aptix.reasoner.result.TurnResult``)."""

    @property
    def kind(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def usage(self) -> _Usage: ...
    @property
    def model_id(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...


class _Session(Protocol):
    @property
    def id(self) -> str: ...
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
    def usage(self) -> _Usage: ...


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
#: Most characters of a text from outside (a model's tool name, an endpoint's error message)
#: that a span name, attribute or status carries: such text can be of any size (as in logs).
_TEXT_LIMIT = OUTSIDE_TEXT_LIMIT
#: ``error.type`` of a tool call that failed, by how the executor's run ended; a timed-out or
#: abandoned call is told from a failed one by this (and by ``aptix.tool.outcome``).
_TOOL_ERRORS = {
    "timed_out": "aptix.tool_timed_out",
    "abandoned": "aptix.tool_abandoned",
    "unknown": "aptix.tool_unknown",
}
#: ``error.type`` (and ``aptix.turn.kind``) of a span whose operation was cancelled.
_CANCELLED = "cancelled"


def _bounded(text: str, limit: int = _TEXT_LIMIT) -> str:
    """``text`` on one line (control characters escaped), cut to ``limit`` characters."""
    shown = escape_controls(text)
    return shown if len(shown) <= limit else f"{shown[: limit - 1]}…"


class SpanHandle:
    """What the reasoner and the executor record on a span; this base records nothing."""

    __slots__ = ()

    def model_response(self, response: TracedResponse) -> None:
        """Record a model call's response (model, finish reason, tokens)."""

    def turn_result(self, result: TracedResult) -> None:
        """Record how a turn ended."""

    def tool_outcome(
        self, *, handed_off: bool, error: str | None, outcome: str | None = None
    ) -> None:
        """Record how a tool call ended: handed to the client, or ``outcome`` with ``error``.

        ``outcome`` is the executor's (``succeeded``, ``failed``, ``timed_out``, ``abandoned``
        or ``unknown``).
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
        self, call: TracedCall, *, session_id: str | None, turn_id: str | None
    ) -> contextlib.AbstractContextManager[SpanHandle]:
        """The ``execute_tool`` span around one tool call."""
        return _NO_SCOPE

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        """Add an event to the current span."""

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


class _OtelSpan(SpanHandle):
    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def model_response(self, response: TracedResponse) -> None:
        span = self.span
        if response.model_id:
            span.set_attribute("gen_ai.response.model", _bounded(response.model_id))
        if response.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [_bounded(response.finish_reason)])
        span.set_attribute("gen_ai.usage.input_tokens", response.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", response.usage.completion_tokens)

    def turn_result(self, result: TracedResult) -> None:
        self.ended_as(result.kind, result.mode, result.usage)
        if result.model_id:
            self.span.set_attribute("gen_ai.response.model", _bounded(result.model_id))
        if result.error:
            self._error("aptix.turn_error", result.error)

    def tool_outcome(
        self, *, handed_off: bool, error: str | None, outcome: str | None = None
    ) -> None:
        if handed_off:
            self.span.set_attribute("aptix.tool.handed_off", True)
        if outcome:
            self.span.set_attribute("aptix.tool.outcome", outcome)
        if error:
            self._error(_TOOL_ERRORS.get(outcome or "", "aptix.tool_error"), error)

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        self.span.add_event(name, attributes)

    def ended_as(self, kind: str, mode: str, usage: _Usage) -> None:
        """Record how a turn ended: its kind, its mode then and the tokens it used."""
        span = self.span
        span.set_attribute("aptix.turn.kind", kind)
        span.set_attribute("aptix.mode", mode)
        span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)

    def cancelled(self) -> None:
        """Record that the operation was cancelled before it finished."""
        self._error(_CANCELLED, "Cancelled before it finished.")

    def raised(self, exc: Exception) -> None:
        """Record the exception that ended the operation: its type and a bounded message."""
        # Recorded here rather than by the SDK, whose exception event carries the whole
        # chained traceback: a model endpoint's error body in it can be of any size.
        kind = type(exc).__qualname__
        message = _bounded(str(exc))
        self.span.add_event("exception", {"exception.type": kind, "exception.message": message})
        self._error(kind, f"{kind}: {message}" if message else kind)

    def _error(self, kind: str, message: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attribute("error.type", kind)
        self.span.set_status(Status(StatusCode.ERROR, _bounded(message)))


def _version() -> str:
    """The installed version, as ``aptix.__version__`` (read here: telemetry is below the root)."""
    try:
        return importlib.metadata.version("aptix")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


#: The turn whose ``invoke_agent`` span is current: its ``chat`` and
#: ``execute_tool`` spans carry the mode and workflow as they are when each span starts
#: (a turn may change mode between two model calls).
_TURN: contextvars.ContextVar[TracedTurn | None] = contextvars.ContextVar(
    "aptix_turn", default=None
)


def _governance(attributes: dict[str, Any]) -> dict[str, Any]:
    """``attributes`` with the current turn's mode and active workflow, when in a turn."""
    turn = _TURN.get()
    if turn is not None:
        session = turn.session  # read now: a mode change replaces the turn's session
        attributes["aptix.mode"] = session.mode
        if session.active_workflow_id:
            attributes["aptix.workflow.id"] = session.active_workflow_id
    return attributes


class OtelTracing(Tracing):
    """Spans through an OpenTelemetry tracer (from ``provider``, or the global one).

    ``owned``: :meth:`shutdown` shuts ``provider`` down (it was made for this object).
    """

    enabled = True

    def __init__(self, provider: TracerProvider | None = None, *, owned: bool = False) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._provider = provider
        self._owned = owned
        self.tracer: Tracer = trace.get_tracer("aptix", _version(), tracer_provider=provider)

    @property
    def provider(self) -> TracerProvider:
        """The tracer provider spans go through."""
        return self._provider or self._trace.get_tracer_provider()

    @contextlib.contextmanager
    def _span(self, name: str, attributes: dict[str, Any], **options: Any) -> Iterator[_OtelSpan]:
        """A current span that records how an exception or a cancellation ended it."""
        with self.tracer.start_as_current_span(
            name,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
            **options,
        ) as span:
            handle = _OtelSpan(span)
            try:
                yield handle
            except asyncio.CancelledError:
                handle.cancelled()
                raise
            except Exception as exc:
                handle.raised(exc)
                raise

    @contextlib.contextmanager
    def turn(self, turn: TracedTurn) -> Iterator[SpanHandle]:
        """The ``invoke_agent`` span around one turn (a new instruction or a resume)."""
        session = turn.session
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            # The conversation is the session: its turns (and their resumes) share the id.
            "gen_ai.conversation.id": session.id,
            "session.id": session.id,
            "aptix.turn.id": turn.record.id,
            "aptix.turn.resumed": turn.resume_key is not None,
            "aptix.mode": session.mode,
        }
        if session.active_workflow_id:
            attributes["aptix.workflow.id"] = session.active_workflow_id
        token = _TURN.set(turn)
        try:
            with self._span(f"invoke_agent {AGENT_NAME}", attributes) as span:
                try:
                    yield span
                except asyncio.CancelledError:
                    span.ended_as(_CANCELLED, turn.session.mode, turn.usage)
                    raise
        finally:
            _TURN.reset(token)

    @contextlib.contextmanager
    def model_call(self, model: object, request: object) -> Iterator[SpanHandle]:
        """The ``chat`` span around one model call.

        The model may name itself: ``model`` (the model requested; default its class name)
        and ``provider`` (``gen_ai.provider.name``; default ``openai`` for a client of an
        OpenAI-compatible endpoint, one with a ``base_url``, else none).
        """
        from opentelemetry.trace import SpanKind

        model = getattr(model, "inner", model)  # a wrapper (the token meter) names its model
        name = _bounded(getattr(model, "model", None) or type(model).__name__)
        base_url = getattr(model, "base_url", None)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        provider = getattr(model, "provider", None) or ("openai" if base_url else None)
        if provider:
            attributes["gen_ai.provider.name"] = provider
        attributes["gen_ai.request.model"] = name
        for attribute, field in (
            ("gen_ai.request.temperature", "temperature"),
            ("gen_ai.request.max_tokens", "max_output_tokens"),
        ):
            value = getattr(model, field, None)
            if value is not None:
                attributes[attribute] = value
        if isinstance(base_url, str):
            where = urlsplit(base_url)
            if where.hostname:
                attributes["server.address"] = where.hostname
            if where.port:
                attributes["server.port"] = where.port
        with self._span(f"chat {name}", _governance(attributes), kind=SpanKind.CLIENT) as span:
            yield span

    @contextlib.contextmanager
    def tool_call(
        self, call: TracedCall, *, session_id: str | None, turn_id: str | None
    ) -> Iterator[SpanHandle]:
        """The ``execute_tool`` span around one call of a registered tool.

        A call of a name no tool has is model output, not a tool: it is a refusal event
        (:func:`refusal_attributes`), never a span name.
        """
        name = _bounded(call.name)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": _bounded(call.call_id),
            "gen_ai.tool.type": "function",
        }
        if session_id:
            attributes["session.id"] = session_id
            attributes["gen_ai.conversation.id"] = session_id
        if turn_id:
            attributes["aptix.turn.id"] = turn_id
        with self._span(f"execute_tool {name}", _governance(attributes)) as span:
            yield span

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        """Add an event to the current span."""
        self._trace.get_current_span().add_event(name, attributes)

    def flush(self) -> None:
        """Export what is buffered (an SDK provider's ``force_flush``)."""
        force_flush = getattr(self.provider, "force_flush", None)
        if force_flush is not None:
            force_flush()

    def shutdown(self) -> None:
        """Export what is buffered; stop the provider if this object made it."""
        if not self._owned:
            self.flush()
            return
        shutdown = getattr(self._provider, "shutdown", None)
        if shutdown is not None:
            shutdown()


def refusal_attributes(call: TracedCall, reason: str) -> dict[str, Any]:
    """The attributes of a refusal event (the name may be any text the model wrote)."""
    return {
        "gen_ai.tool.name": _bounded(call.name),
        "gen_ai.tool.call.id": _bounded(call.call_id),
        "reason": _bounded(reason),
    }


def hand_off_attributes(calls: Sequence[TracedCall]) -> dict[str, Any]:
    """The attributes of a hand-off event: the calls the client now has to answer."""
    return {
        "gen_ai.tool.name": [_bounded(c.name) for c in calls],
        "gen_ai.tool.call.id": [_bounded(c.call_id) for c in calls],
    }
