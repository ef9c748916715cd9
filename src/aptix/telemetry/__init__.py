"""OpenTelemetry traces of turns, model calls and tool calls (DESIGN.md §12).

With ``APTIX_OTEL=true`` and the ``otel`` extra, every turn is an ``invoke_agent`` span, every
model call a ``chat`` span and every tool call an ``execute_tool`` span below it, with the
attributes of the OpenTelemetry GenAI semantic conventions (``gen_ai.*``; the conversation is
the session) plus the mode and active workflow. Calls that are refused, calls handed to the
client and approvals denied are span events; a handed-off call's ``execute_tool`` span reads
``aptix.tool.outcome`` ``pending``, as the ledger does, since it has not run. Behind the HTTP
API a turn's span is a child of the request's server span, which FastAPI's own telemetry makes
(through :func:`aptix.telemetry.server.outside_text_bounded`, which bounds the request's text
in it) and which continues an incoming ``traceparent``. The tracer provider follows the
standard ``OTEL_*`` variables (``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_*``,
``OTEL_SERVICE_NAME``...).

Without it, :data:`NO_TRACING` stands in: its spans are one shared object whose methods do
nothing, the tool executor is the plain one, and OpenTelemetry's SDK is never imported.

Telemetry is infrastructure: it reads turns, results and calls through the structural
protocols below and imports neither ``aptix.reasoner`` nor ``aptix.tools``; the traced
executor lives in :mod:`aptix.tools.traced`.
"""

from aptix.telemetry.exporters import open_tracing, span_exporters
from aptix.telemetry.otel import OtelTracing
from aptix.telemetry.spans import (
    AGENT_NAME,
    CAPPED_EVENT,
    DENIAL_EVENT,
    HAND_OFF_EVENT,
    NO_TRACING,
    ORG_ATTRIBUTE,
    REFUSAL_EVENT,
    REQUEST_ID_ATTRIBUTE,
    SpanHandle,
    TracedCall,
    TracedResponse,
    TracedResult,
    TracedTurn,
    Tracing,
    capped_attributes,
    denial_attributes,
    hand_off_attributes,
    refusal_attributes,
)

__all__ = [
    "AGENT_NAME",
    "CAPPED_EVENT",
    "DENIAL_EVENT",
    "HAND_OFF_EVENT",
    "NO_TRACING",
    "ORG_ATTRIBUTE",
    "REFUSAL_EVENT",
    "REQUEST_ID_ATTRIBUTE",
    "OtelTracing",
    "SpanHandle",
    "TracedCall",
    "TracedResponse",
    "TracedResult",
    "TracedTurn",
    "Tracing",
    "capped_attributes",
    "denial_attributes",
    "hand_off_attributes",
    "open_tracing",
    "refusal_attributes",
    "span_exporters",
]
