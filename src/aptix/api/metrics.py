"""Prometheus metrics and the request-id/body-size middleware (plain ASGI, so it is cheap)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aptix.api.errors import error_body

__all__ = ["Metrics", "ObserveMiddleware"]


class Metrics:
    """The app's own collector registry (several apps in one process never clash)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "aptix_http_requests",
            "HTTP requests by route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "aptix_http_request_seconds",
            "HTTP request latency by route.",
            ["route"],
            registry=self.registry,
        )


class ObserveMiddleware:
    """Request ids in and out, a body size limit, and request metrics."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, max_body_bytes: int) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request; other scopes pass through."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        request_id = (headers.get(b"x-request-id") or uuid.uuid4().hex.encode())[:128]
        scope.setdefault("state", {})["request_id"] = request_id.decode("latin-1")
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await self._too_large(send, request_id)
            return
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", request_id)]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.latency.labels(route).observe(time.perf_counter() - started)
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()

    async def _too_large(self, send: Send, request_id: bytes) -> None:
        body = json.dumps(
            error_body(
                "payload_too_large", f"The request body is larger than {self.max_body_bytes} bytes."
            )
        ).encode()
        headers: list[tuple[bytes, Any]] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"x-request-id", request_id),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
