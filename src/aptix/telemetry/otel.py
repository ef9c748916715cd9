"""Aptix's spans through an OpenTelemetry tracer (``APTIX_OTEL=true``): :class:`OtelTracing`."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib.metadata
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aptix.telemetry.spans import (
    AGENT_NAME,
    ORG_ATTRIBUTE,
    SpanHandle,
    TracedCall,
    TracedResponse,
    TracedResult,
    TracedTurn,
    TracedUsage,
    Tracing,
    bounded_text,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["OtelTracing"]

#: ``error.type`` of a tool call that failed, by how the executor's run ended; a timed-out or
#: abandoned call is told from a failed one by this (and by ``aptix.tool.outcome``).
_TOOL_ERRORS = {
    "timed_out": "aptix.tool_timed_out",
    "abandoned": "aptix.tool_abandoned",
    "unknown": "aptix.tool_unknown",
}
#: ``error.type`` (and ``aptix.turn.kind``) of a span whose operation was cancelled.
_CANCELLED = "cancelled"
#: ``aptix.tool.outcome`` of a call handed to the client or held for the user's approval:
#: the ledger's word for a call that has not run (yet).
_PENDING = "pending"


class _OtelSpan(SpanHandle):
    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def model_response(self, response: TracedResponse) -> None:
        span = self.span
        if response.model_id:
            span.set_attribute("gen_ai.response.model", bounded_text(response.model_id))
        if response.finish_reason:
            span.set_attribute(
                "gen_ai.response.finish_reasons", [bounded_text(response.finish_reason)]
            )
        span.set_attribute("gen_ai.usage.input_tokens", response.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", response.usage.completion_tokens)

    def tool_outcome(
        self,
        *,
        outcome: str | None,
        error: str | None,
        waiting: str | None = None,
        approved: bool = False,
    ) -> None:
        span = self.span
        if waiting:
            # Not run: what ran only prepared the hand-off (the status stays unset).
            span.set_attribute("aptix.tool.handed_off", True)
            span.set_attribute("aptix.tool.state", waiting)
            span.set_attribute("aptix.tool.outcome", _PENDING)
            return
        if approved:
            span.set_attribute("aptix.tool.approved", True)
        if outcome:
            span.set_attribute("aptix.tool.outcome", outcome)
        if error:
            self._error(_TOOL_ERRORS.get(outcome or "", "aptix.tool_error"), error)

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        self.span.add_event(name, attributes)

    def cancelled(self) -> None:
        """Record that the operation was cancelled before it finished."""
        self._error(_CANCELLED, "Cancelled before it finished.")

    def raised(self, exc: Exception) -> None:
        """Record the exception that ended the operation: its type and a bounded message."""
        # Recorded here rather than by the SDK, whose exception event carries the whole
        # chained traceback: a model endpoint's error body in it can be of any size.
        kind = type(exc).__qualname__
        message = bounded_text(str(exc))
        self.span.add_event("exception", {"exception.type": kind, "exception.message": message})
        self._error(kind, f"{kind}: {message}" if message else kind)

    def _error(self, kind: str, message: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attribute("error.type", kind)
        self.span.set_status(Status(StatusCode.ERROR, bounded_text(message)))


class _TurnSpan(_OtelSpan):
    """An ``invoke_agent`` span: every ending records the same attributes."""

    __slots__ = ("turn",)

    def __init__(self, span: Span, turn: TracedTurn) -> None:
        super().__init__(span)
        self.turn = turn

    def turn_result(self, result: TracedResult) -> None:
        self.ended_as(result.kind, result.usage)
        if result.model_id:
            self.span.set_attribute("gen_ai.response.model", bounded_text(result.model_id))
        if result.error:
            # The code the turn's record and the request's answer carry (model_error...).
            self._error(result.error_code or "aptix.turn_error", result.error)

    def ended_as(self, kind: str | None, usage: TracedUsage) -> None:
        """Record how the turn ended: its kind, its mode and workflow then, its tokens."""
        span = self.span
        if kind is not None:
            span.set_attribute("aptix.turn.kind", kind)
        session = self.turn.session  # the session as the turn last read it
        span.set_attribute("aptix.mode", session.mode)
        if session.active_workflow_id:
            span.set_attribute("aptix.workflow.id", session.active_workflow_id)
        span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)

    def broken(self, exc: Exception) -> None:
        """Record a turn an exception ended: as its stored ending says, with the exception."""
        self.raised(exc)
        own = getattr(exc, "error_type", None)
        if isinstance(own, str):
            # Closed by someone else while it ran here (TurnLost): the kind is theirs to say.
            self.ended_as(None, self.turn.usage)
            self.span.set_attribute("error.type", own)
            return
        from aptix.db.outage import database_error_code

        # The code TurnEndings.broken stores and the request is answered with.
        code = database_error_code(exc) or "internal_error"
        self.ended_as("error", self.turn.usage)
        self.span.set_attribute("error.type", code)


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
        attributes[ORG_ATTRIBUTE] = bounded_text(session.org)
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

    def _started(
        self, name: str, attributes: dict[str, Any], **options: Any
    ) -> contextlib.AbstractContextManager[Span]:
        """A current span whose exception and status only Aptix records."""
        return self.tracer.start_as_current_span(
            name,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
            **options,
        )

    @contextlib.contextmanager
    def _span(self, name: str, attributes: dict[str, Any], **options: Any) -> Iterator[_OtelSpan]:
        """A current span that records how an exception or a cancellation ended it."""
        with self._started(name, attributes, **options) as span:
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
        """The ``invoke_agent`` span around one turn (a new instruction or a resume).

        Its mode, active workflow, kind and token usage are as the turn ended, however it
        ended (its result, a cancellation, an exception).
        """
        session = turn.session
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            # The conversation is the session: its turns (and their resumes) share the id.
            "gen_ai.conversation.id": session.id,
            "session.id": session.id,
            "aptix.turn.id": turn.record.id,
            ORG_ATTRIBUTE: bounded_text(session.org),
            "aptix.turn.resumed": turn.resume_key is not None,
            "aptix.mode": session.mode,
        }
        # No aptix.workflow.id yet: an attribute cannot be removed, and the turn may end
        # the workflow it started with (ended_as sets the one active at the end).
        token = _TURN.set(turn)
        try:
            with self._started(f"invoke_agent {AGENT_NAME}", attributes) as started:
                span = _TurnSpan(started, turn)
                try:
                    yield span
                except asyncio.CancelledError:
                    span.ended_as(_CANCELLED, turn.usage)
                    span.cancelled()
                    raise
                except Exception as exc:
                    span.broken(exc)
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
        name = bounded_text(getattr(model, "model", None) or type(model).__name__)
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
        self,
        call: TracedCall,
        *,
        session_id: str | None,
        turn_id: str | None,
        org: str | None = None,
    ) -> Iterator[SpanHandle]:
        """The ``execute_tool`` span around one call of a registered tool.

        A call of a name no tool has is model output, not a tool: it is a refusal event
        (:func:`refusal_attributes`), never a span name.
        """
        name = bounded_text(call.name)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": bounded_text(call.call_id),
            "gen_ai.tool.type": "function",
        }
        if session_id:
            attributes["session.id"] = session_id
            attributes["gen_ai.conversation.id"] = session_id
        if turn_id:
            attributes["aptix.turn.id"] = turn_id
        if org:
            attributes[ORG_ATTRIBUTE] = bounded_text(org)
        with self._span(f"execute_tool {name}", _governance(attributes)) as span:
            yield span

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        """Add an event to the current span."""
        self._trace.get_current_span().add_event(name, attributes)

    def annotate(self, attributes: dict[str, Any]) -> None:
        """Add attributes to the current span (in a route: the request's server span)."""
        span = self._trace.get_current_span()
        if span.is_recording():
            span.set_attributes(
                {k: bounded_text(v) if isinstance(v, str) else v for k, v in attributes.items()}
            )

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
