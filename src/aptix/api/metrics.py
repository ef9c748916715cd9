"""Prometheus metrics and the request-id middleware (plain ASGI, so it is cheap)."""

from __future__ import annotations

import time
import uuid

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
    """Request ids in and out, and request metrics."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request; other scopes pass through."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        request_id = (headers.get(b"x-request-id") or uuid.uuid4().hex.encode())[:128]
        scope.setdefault("state", {})["request_id"] = request_id.decode("latin-1")
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
