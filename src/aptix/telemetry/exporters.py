"""The tracer provider and its exporters, made as the standard ``OTEL_*`` variables say."""

from __future__ import annotations

import os
import sys
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from aptix.errors import ConfigurationError
from aptix.telemetry.otel import OtelTracing
from aptix.telemetry.spans import NO_TRACING, Tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

    from aptix.settings import AptixSettings

__all__ = ["open_tracing", "span_exporters"]


#: ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`` -> the exporter's entry-point name.
_OTLP_BY_PROTOCOL = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
#: The package that provides each OTLP exporter, named when it is not installed.
_OTLP_PACKAGES = {
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
}
#: Where the OTLP protocol is chosen, the more specific variable first.
_PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
#: Longest attribute value of the spans Aptix's own provider exports, unless
#: ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` says otherwise (the SDK has no limit): a backstop for
#: outside text in spans Aptix does not make, such as an exception's traceback.
_ATTRIBUTE_LENGTH = 4096


def span_exporters(environ: dict[str, str] | os._Environ[str] = os.environ) -> list[SpanExporter]:
    """The exporters ``OTEL_TRACES_EXPORTER`` names (default ``otlp``; ``none``: no export).

    Names are looked up in the ``opentelemetry_traces_exporter`` entry points, as the SDK's
    own configurator does (``console``, ``otlp_proto_http``, and any installed exporter).
    ``otlp`` follows ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL``, ``http/protobuf`` by default
    as the specification says (the ``otel`` extra ships the HTTP exporter; ``grpc`` needs
    ``opentelemetry-exporter-otlp-proto-grpc``). Each exporter reads its own variables
    (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``..._HEADERS``, ``..._TIMEOUT``...).
    """
    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    if names == ["none"]:
        return []
    available = {e.name: e for e in entry_points(group="opentelemetry_traces_exporter")}
    exporters: list[SpanExporter] = []
    for name in filter(None, names):
        chosen_by = f"OTEL_TRACES_EXPORTER names {name!r}"
        if name == "otlp":
            variable = next((v for v in _PROTOCOL_VARIABLES if environ.get(v, "").strip()), None)
            protocol = environ[variable].strip() if variable else "http/protobuf"
            if protocol not in _OTLP_BY_PROTOCOL:
                raise ConfigurationError(
                    f"{variable}={protocol!r} is not supported.",
                    hint="use http/protobuf (or grpc with opentelemetry-exporter-otlp-proto-grpc)",
                )
            name = _OTLP_BY_PROTOCOL[protocol]
            # Name what the user set, not the entry point it was turned into.
            chosen_by = f"{variable}={protocol}" if variable else "OTLP over http/protobuf"
        found = available.get(name)
        if found is None:
            package = _OTLP_PACKAGES.get(name)
            if package:
                raise ConfigurationError(
                    f"{chosen_by} needs {package}, which is not installed.",
                    hint=f"pip install {package}",
                )
            raise ConfigurationError(
                f"{chosen_by}, which is not installed.",
                hint=f"installed: {', '.join(sorted(available)) or 'none'}; or install its package",
            )
        exporter_cls = found.load()
        if name == "console":
            # Standard output carries the commands' own output (--json); spans go beside the
            # logs, one JSON object a line, so that with APTIX_LOG_JSON every line is JSON.
            exporters.append(exporter_cls(out=sys.stderr, formatter=_one_line))
        else:
            exporters.append(exporter_cls())
    return exporters


def _one_line(span: ReadableSpan) -> str:
    """``span`` as one line of JSON (the SDK's own form, less its indentation)."""
    # ASCII only, as the SDK writes it: a line separator or a bidi control in outside text
    # is escaped, never written raw.
    line: str = span.to_json(indent=None)
    return line + "\n"


def open_tracing(settings: AptixSettings, *, owned: bool = True) -> Tracing:
    """:data:`NO_TRACING`, or with ``APTIX_OTEL=true`` an :class:`OtelTracing`.

    An SDK tracer provider already installed (``opentelemetry-instrument``, an embedding
    application) is used as it is. Otherwise one is made as the standard variables say:
    ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (service name ``aptix`` when neither
    names one), ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``, ``OTEL_*_LIMIT`` (attribute values
    4,096 characters at most by default) and the exporters of :func:`span_exporters`.
    ``owned``: the runtime shuts it down when it closes.
    """
    if not settings.otel:
        return NO_TRACING
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanLimits
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
    named = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    length = None if "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT" in os.environ else _ATTRIBUTE_LENGTH
    provider = SdkTracerProvider(
        resource=Resource.create({} if named else {"service.name": "aptix"}),
        span_limits=SpanLimits(max_attribute_length=length),
    )
    for exporter in span_exporters():
        provider.add_span_processor(BatchSpanProcessor(exporter))
    # Not installed globally: an embedding application's own providers are left alone.
    return OtelTracing(provider, owned=owned)
