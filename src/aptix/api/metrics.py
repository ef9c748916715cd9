"""Prometheus metrics and the request-id/body-size middleware."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry, Counter, Histogram

from aptix.api.errors import error_body

__all__ = ["Metrics", "install_middleware"]


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


def install_middleware(app: FastAPI, max_body_bytes: int) -> None:
    """Request ids in and out, a body size limit, and request metrics."""

    @app.middleware("http")
    async def _observe(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
        request.state.request_id = request_id[:128]
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_body_bytes):
            response: Response = JSONResponse(
                error_body(
                    "payload_too_large",
                    f"The request body is larger than {max_body_bytes} bytes.",
                ),
                status_code=413,
            )
        else:
            started = time.perf_counter()
            response = await call_next(request)
            route = getattr(request.scope.get("route"), "path", "unmatched")
            metrics: Metrics = request.app.state.metrics
            metrics.latency.labels(route).observe(time.perf_counter() - started)
            metrics.requests.labels(request.method, route, str(response.status_code)).inc()
        response.headers["X-Request-ID"] = request.state.request_id
        return response
