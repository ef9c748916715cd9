"""The tracer provider FastAPI's server spans go through: the request's text in them bounded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from opentelemetry.trace import SpanKind, Tracer, TracerProvider, use_span
from opentelemetry.util._decorator import _agnosticcontextmanager

from aptix.telemetry.spans import bounded_text

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, _Links
    from opentelemetry.util import types

__all__ = ["outside_text_bounded"]


def outside_text_bounded(provider: TracerProvider) -> TracerProvider:
    """``provider`` whose spans get every text attribute they start with bounded.

    FastAPI's server span starts with the request's text: ``url.path`` (percent-decoded, so
    with any control character a caller encoded), ``url.query`` and ``server.address`` (the
    ``Host`` header). Each is cut to 500 characters with its control characters escaped, as
    Aptix's own spans cut text from outside. What FastAPI sets later (``http.route``, the
    status, ``error.type``) is its own text, not the caller's, and passes unchanged.
    """
    return _BoundedProvider(provider)


def _bounded_attributes(attributes: types.Attributes) -> types.Attributes:
    if not attributes:
        return attributes
    return {k: bounded_text(v) if isinstance(v, str) else v for k, v in attributes.items()}


class _BoundedProvider(TracerProvider):
    """A provider whose tracers bound the text attributes each span starts with."""

    def __init__(self, inner: TracerProvider) -> None:
        self._inner = inner

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: types.Attributes = None,
    ) -> Tracer:
        """The inner provider's tracer, behind a tracer that bounds text attributes."""
        inner = self._inner.get_tracer(
            instrumenting_module_name, instrumenting_library_version, schema_url, attributes
        )
        return _BoundedTracer(inner)


class _BoundedTracer(Tracer):
    """A tracer that bounds the text attributes of the spans it starts."""

    def __init__(self, inner: Tracer) -> None:
        self._inner = inner

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: _Links = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        """Start a span of the inner tracer with its text attributes bounded."""
        return self._inner.start_span(
            name,
            context,
            kind,
            _bounded_attributes(attributes),
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )

    @_agnosticcontextmanager
    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: _Links = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        """Start a current span (as :meth:`start_span`), ended when the block ends."""
        span = self.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        with use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current
