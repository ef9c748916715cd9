"""A model whose every call is a ``chat`` span, for calls made outside the loop's own."""

from __future__ import annotations

from aptix.llm.types import LlmClient, LlmRequest, LlmResponse, TextSink
from aptix.telemetry import Tracing

__all__ = ["SpannedModel"]


class SpannedModel:
    """``inner`` with each call in a ``chat`` span: the context budget's summary requests."""

    def __init__(self, inner: LlmClient, tracing: Tracing) -> None:
        self.inner = inner
        self._tracing = tracing

    async def complete(self, request: LlmRequest, on_text: TextSink | None = None) -> LlmResponse:
        """Send ``request`` through ``inner`` inside its span."""
        with self._tracing.model_call(self.inner, request) as span:
            response = await self.inner.complete(request, on_text)
            span.model_response(response)
        return response
