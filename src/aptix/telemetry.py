"""OpenTelemetry traces of turns, model calls and tool calls (DESIGN.md §12).

With ``APTIX_OTEL=true`` and the ``otel`` extra, every turn is an ``invoke_agent`` span, every
model call a ``chat`` span and every tool call an ``execute_tool`` span below it, with the
attributes of the OpenTelemetry GenAI semantic conventions (``gen_ai.*``) plus the session,
mode and active workflow. Calls that are refused, and calls handed to the client, are span
events. Spans are exported over OTLP/HTTP as the standard ``OTEL_*`` variables say
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``, ``OTEL_TRACES_SAMPLER``...).

Without it, :data:`NO_TRACING` stands in: its spans are one shared object whose methods do
nothing, the tool executor is the plain one, and OpenTelemetry is never imported.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aptix.errors import ConfigurationError
from aptix.tools.executor import AgentToolExecutor

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from aptix.llm.types import LlmClient, LlmRequest, LlmResponse
    from aptix.reasoner.result import TurnResult
    from aptix.reasoner.running import RunningTurn
    from aptix.settings import AptixSettings
    from aptix.tools.base import AgentTool
    from aptix.tools.context import AgentToolCall, AgentToolExecutionContext

__all__ = [
    "CAPPED_EVENT",
    "HAND_OFF_EVENT",
    "NO_TRACING",
    "REFUSAL_EVENT",
    "OtelTracing",
    "SpanHandle",
    "TracedToolExecutor",
    "Tracing",
    "open_tracing",
]

#: ``gen_ai.agent.name`` of every ``invoke_agent`` span.
AGENT_NAME = "aptix"
#: Event on the turn's span for each call handed to the client (``request_user_approval``...).
HAND_OFF_EVENT = "aptix.tool_call.handed_off"
#: Event for each call that was refused rather than run (not offered, the workflow guard...).
REFUSAL_EVENT = "aptix.tool_call.refused"
#: Event for each cut of a model response (too many tool calls, a repeated call id, long text).
CAPPED_EVENT = "aptix.response.capped"


class SpanHandle:
    """What the reasoner records on a span; this base records nothing (tracing is off)."""

    __slots__ = ()

    def model_response(self, response: LlmResponse) -> None:
        """Record a model call's response (model, finish reason, tokens)."""

    def turn_result(self, result: TurnResult) -> None:
        """Record how a turn ended."""

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

    def turn(self, turn: RunningTurn) -> contextlib.AbstractContextManager[SpanHandle]:
        """The ``invoke_agent`` span around one turn (a new instruction or a resume)."""
        return _NO_SCOPE

    def model_call(
        self, model: LlmClient, request: LlmRequest
    ) -> contextlib.AbstractContextManager[SpanHandle]:
        """The ``chat`` span around one model call."""
        return _NO_SCOPE

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        """Add an event to the current span."""

    def tool_executor(self, *args: Any, **kwargs: Any) -> AgentToolExecutor:
        """An :class:`AgentToolExecutor` built with these arguments (spans: a traced one)."""
        return AgentToolExecutor(*args, **kwargs)

    def shutdown(self) -> None:
        """Export what is buffered and stop."""


#: Tracing off: what the runtime uses unless ``APTIX_OTEL=true``.
NO_TRACING = Tracing()


class _OtelSpan(SpanHandle):
    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def model_response(self, response: LlmResponse) -> None:
        span = self.span
        if response.model_id:
            span.set_attribute("gen_ai.response.model", response.model_id)
        if response.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
        span.set_attribute("gen_ai.usage.input_tokens", response.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", response.usage.completion_tokens)

    def turn_result(self, result: TurnResult) -> None:
        span = self.span
        span.set_attribute("aptix.turn.kind", result.kind)
        span.set_attribute("aptix.mode", result.mode)
        span.set_attribute("gen_ai.usage.input_tokens", result.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", result.usage.completion_tokens)
        if result.model_id:
            span.set_attribute("gen_ai.response.model", result.model_id)
        if result.error:
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", "aptix.turn_error")
            span.set_status(Status(StatusCode.ERROR, result.error))

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        self.span.add_event(name, attributes)


class OtelTracing(Tracing):
    """Spans through an OpenTelemetry tracer (from ``provider``, or the global one)."""

    enabled = True

    def __init__(self, provider: TracerProvider | None = None, *, owned: bool = False) -> None:
        from opentelemetry import trace

        from aptix import __version__

        self._trace = trace
        self._provider = provider
        self._owned = owned
        self.tracer: Tracer = trace.get_tracer("aptix", __version__, tracer_provider=provider)

    @contextlib.contextmanager
    def turn(self, turn: RunningTurn) -> Iterator[SpanHandle]:
        """The ``invoke_agent`` span around one turn (a new instruction or a resume)."""
        session = turn.session
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            "gen_ai.conversation.id": turn.record.id,
            "session.id": session.id,
            "aptix.turn.id": turn.record.id,
            "aptix.turn.resumed": turn.resume_key is not None,
            "aptix.mode": session.mode,
        }
        if session.active_workflow_id:
            attributes["aptix.workflow.id"] = session.active_workflow_id
        with self.tracer.start_as_current_span(
            f"invoke_agent {AGENT_NAME}", attributes=attributes
        ) as span:
            yield _OtelSpan(span)

    @contextlib.contextmanager
    def model_call(self, model: LlmClient, request: LlmRequest) -> Iterator[SpanHandle]:
        """The ``chat`` span around one model call."""
        from opentelemetry.trace import SpanKind

        name = getattr(model, "model", None) or type(model).__name__
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": name,
        }
        for attribute, field in (
            ("gen_ai.request.temperature", "temperature"),
            ("gen_ai.request.max_tokens", "max_output_tokens"),
        ):
            value = getattr(model, field, None)
            if value is not None:
                attributes[attribute] = value
        base_url = getattr(model, "base_url", None)
        if isinstance(base_url, str):
            where = urlsplit(base_url)
            if where.hostname:
                attributes["server.address"] = where.hostname
            if where.port:
                attributes["server.port"] = where.port
        with self.tracer.start_as_current_span(
            f"chat {name}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            yield _OtelSpan(span)

    def event(self, name: str, attributes: dict[str, Any]) -> None:
        """Add an event to the current span."""
        self._trace.get_current_span().add_event(name, attributes)

    def tool_executor(self, *args: Any, **kwargs: Any) -> AgentToolExecutor:
        """A :class:`TracedToolExecutor` built with these arguments."""
        return TracedToolExecutor(self, *args, **kwargs)

    def shutdown(self) -> None:
        """Export what is buffered and stop (only a provider this object made)."""
        shutdown = getattr(self._provider, "shutdown", None)
        if self._owned and shutdown is not None:
            shutdown()


class TracedToolExecutor(AgentToolExecutor):
    """An executor that runs each call inside an ``execute_tool`` span.

    A subclass rather than a check in :meth:`AgentToolExecutor.execute`, so that the plain
    executor does not pay for tracing when it is off.
    """

    def __init__(self, tracing: OtelTracing, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tracing = tracing

    async def execute(
        self, call: AgentToolCall, context: AgentToolExecutionContext, *, approved: bool = False
    ) -> AgentToolCall:
        """Run one call inside its ``execute_tool`` span."""
        from opentelemetry.trace import Status, StatusCode

        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": "function",
        }
        if context.session_id:
            attributes["session.id"] = context.session_id
        if context.conversation_id:
            attributes["gen_ai.conversation.id"] = context.conversation_id
        with self.tracing.tracer.start_as_current_span(
            f"execute_tool {call.name}", attributes=attributes
        ) as span:
            done = await super().execute(call, context, approved=approved)
            if done.requires_client_execution and done.was_executed:
                span.set_attribute("aptix.tool.handed_off", True)
            if done.error_message:
                span.set_attribute("error.type", "aptix.tool_error")
                span.set_status(Status(StatusCode.ERROR, done.error_message))
            return done

    def _refused(self, tool: AgentTool, call: AgentToolCall, reason: str) -> None:
        self.tracing.event(REFUSAL_EVENT, refusal_attributes(call, reason))


def refusal_attributes(call: AgentToolCall, reason: str) -> dict[str, Any]:
    """The attributes of a refusal event."""
    return {"gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.call_id, "reason": reason}


def hand_off_attributes(calls: Sequence[AgentToolCall]) -> dict[str, Any]:
    """The attributes of a hand-off event: the calls the client now has to answer."""
    return {
        "gen_ai.tool.name": [c.name for c in calls],
        "gen_ai.tool.call.id": [c.call_id for c in calls],
    }


def open_tracing(settings: AptixSettings) -> Tracing:
    """:data:`NO_TRACING`, or with ``APTIX_OTEL=true`` an OTLP-exporting :class:`OtelTracing`.

    An SDK tracer provider already installed (by an embedding application) is used as it is;
    otherwise one is made from the ``OTEL_*`` variables and installed globally.
    """
    if not settings.otel:
        return NO_TRACING
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ConfigurationError(
            "APTIX_OTEL=true needs OpenTelemetry, which is not installed.",
            hint="pip install 'aptix[otel]', or unset APTIX_OTEL",
        ) from None
    current = trace.get_tracer_provider()
    if isinstance(current, SdkTracerProvider):
        return OtelTracing(current)
    # Resource.create() reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, the provider
    # OTEL_TRACES_SAMPLER, the exporter OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT/HEADERS/TIMEOUT.
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    provider = SdkTracerProvider(
        resource=Resource.create({} if named else {"service.name": "aptix"})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    # Not installed globally: each runtime flushes and shuts down its own on close.
    return OtelTracing(provider, owned=True)
