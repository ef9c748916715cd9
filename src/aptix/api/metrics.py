"""Prometheus metrics and their middleware (plain ASGI, so it is cheap)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast
from uuid import uuid4

import anyio
from asgi_correlation_id import CorrelationIdMiddleware, correlation_id
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import Match, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aptix.quotas import Quotas
from aptix.telemetry import NO_TRACING, REQUEST_ID_ATTRIBUTE, Tracing

if TYPE_CHECKING:
    from uvicorn._types import HTTPScope

__all__ = [
    "CLIENT_GONE",
    "MAX_REQUEST_ID",
    "SAFE_REQUEST_ID",
    "LimitsCollector",
    "Metrics",
    "ObserveMiddleware",
    "with_request_ids",
]

#: The longest request id kept from a caller's ``X-Request-ID``.
MAX_REQUEST_ID = 128

#: A caller's ``X-Request-ID`` that is kept: ASCII letters, digits and ``-_.:/+`` only (UUIDs,
#: proxies' hex ids, base64 without padding). No space, bracket, ``=`` or quote, so that in a
#: plain-text log line it cannot end its ``[…]`` or pose as ``session_id=…``.
SAFE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+-]+")


def _safe(value: str) -> bool:
    return SAFE_REQUEST_ID.fullmatch(value) is not None


def _new_id() -> str:
    # The middleware warns that it replaced a caller's id before it sets correlation_id, so
    # the id is set as it is made: that warning then carries it, as the request's other lines.
    value = uuid4().hex  # the middleware's own kind of id
    correlation_id.set(value)
    return value


def with_request_ids(app: ASGIApp, tracing: Tracing = NO_TRACING) -> ASGIApp:
    """``app`` behind asgi-correlation-id's middleware.

    The caller's ``X-Request-ID`` (or a new one) is echoed on the response, put on every
    log line of the request (see :mod:`aptix.log_setup`) and on its server span. An id with
    any other character than :data:`SAFE_REQUEST_ID`'s is replaced by a new one (the
    middleware logs a warning naming the new id, which carries it as the request's other
    lines do and never shows the caller's); a longer one than :data:`MAX_REQUEST_ID` is
    shortened.
    """

    async def annotated(scope: Scope, receive: Receive, send: Send) -> None:
        # The server span starts before this middleware, so the id is added to it here.
        if scope["type"] == "http" and (request_id := correlation_id.get()):
            tracing.annotate({REQUEST_ID_ATTRIBUTE: request_id})
        await app(scope, receive, send)

    return CorrelationIdMiddleware(
        annotated if tracing.enabled else app,
        header_name="X-Request-ID",
        generator=_new_id,
        validator=_safe,
        transformer=lambda value: value[:MAX_REQUEST_ID],
    )


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
        self._limits: LimitsCollector | None = None

    def watch_limits(self, quotas: Quotas) -> None:
        """Export the state of ``quotas`` (a runtime opened again replaces the one before)."""
        if self._limits is not None:
            self.registry.unregister(self._limits)
        self._limits = LimitsCollector(quotas)
        self.registry.register(self._limits)


class LimitsCollector(Collector):
    """The limits' state, read at each scrape: whether Redis answers, refusals by code."""

    def __init__(self, quotas: Quotas) -> None:
        self._quotas = quotas

    def collect(self) -> Iterator[Metric]:
        """``aptix_limits_redis_up`` (with Redis only) and ``aptix_limits_refusals_total``."""
        up = self._quotas.redis_up
        if up is not None:
            yield GaugeMetricFamily(
                "aptix_limits_redis_up",
                "1 while the limits reach Redis, 0 from a failed call until one succeeds "
                "(the limits are then open or refusing, as APTIX_LIMITS_WHEN_REDIS_DOWN says).",
                value=1 if up else 0,
            )
        refused = CounterMetricFamily(
            "aptix_limits_refusals",
            "Requests and model calls the limits refused, by code.",
            labels=["code"],
        )
        for code, count in sorted(self._quotas.refused.items()):
            refused.add_metric([code], count)
        yield refused


class ObserveMiddleware:
    """Request metrics by route and status (request ids: :func:`with_request_ids`).

    An answer whose client hung up before it could be sent (a plain request given up on while
    its turn ran) is not sent, and is logged and counted with status 499 ("client closed the
    request", as nginx says): the server writes no access line for an answer it cannot send,
    and a 200 nobody received is not a 200. Its server span ends with ``ConnectionError``, as a
    streamed request's does when its client leaves.
    """

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request; other scopes pass through."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()
        read = False  # the request's body was read to its end: a receive now only listens
        gone = False

        async def receive_observed() -> Message:
            nonlocal read
            message = await receive()
            read = read or message["type"] != "http.request" or not message.get("more_body")
            return message

        async def send_observed(message: Message) -> None:
            nonlocal status, gone
            if message["type"] == "http.response.start":
                status = message["status"]
                gone = read and await _client_gone(receive)
            if not gone:
                await send(message)

        try:
            await self.app(scope, receive_observed, send_observed)
        finally:
            if gone:
                status = CLIENT_GONE
                _log_access(scope, status)
            route = _route(scope, status)
            self.metrics.latency.labels(route).observe(time.perf_counter() - started)
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()


#: The status an answer whose client left before it was sent is logged and counted with.
CLIENT_GONE = 499


async def _client_gone(receive: Receive) -> bool:
    """Whether the client hung up, asked without waiting (as Starlette's ``is_disconnected``).

    Only once the body was read: what comes then is ``http.disconnect`` or nothing. The
    server keeps answering ``http.disconnect`` after it, so the app's own listener hears it too.
    """
    message: Message = {}
    with anyio.CancelScope() as waiting:
        waiting.cancel()  # a message not there at once is not waited for
        message = await receive()
    return message.get("type") == "http.disconnect"


def _log_access(scope: Scope, status: int) -> None:
    """The access line the server writes for a request it answered, for one it could not."""
    from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

    # Written as uvicorn writes its own (percent-encoded path), so that log readers and the
    # JSON formatter's client/method/path/status fields take it alike.
    http = cast("HTTPScope", scope)
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/%s" %d',
        get_client_addr(http),
        scope["method"],
        get_path_with_query_string(http),
        scope["http_version"],
        status,
    )


def _route(scope: Scope, status: int) -> str:
    """The path of the route that answered: a template, a mount's path, or ``unmatched``.

    FastAPI puts its own routes in ``scope["route"]``, but not a mount (the console, the
    docs' assets) nor a plain Starlette route (``/mcp``, ``/openapi.json``): those are found
    by the ``endpoint`` the router chose, and the router's redirect that adds a trailing slash
    (``/console`` to ``/console/``) by the one it redirects to. A request answered before any
    route was chosen (a refusal at the edge, an unknown path) is ``unmatched``.
    """
    route = scope.get("route")
    if route is not None:
        return str(route.path)
    router = scope.get("router")
    if router is None:  # refused before the router
        return "unmatched"
    endpoint = scope.get("endpoint")
    routes = [r for r in router.routes if isinstance(r, Mount | Route)]
    if endpoint is not None:
        found = next((r for r in routes if _serves(r, endpoint)), None)
    elif status == 307:
        toggled = _slash_toggled(scope)
        found = next((r for r in routes if r.matches(toggled)[0] is not Match.NONE), None)
    else:
        found = None
    return found.path if found is not None else "unmatched"


def _serves(route: Mount | Route, endpoint: object) -> bool:
    """Whether ``route`` is the one whose ``endpoint`` the router put in the scope."""
    return (route.app if isinstance(route, Mount) else route.endpoint) is endpoint


def _slash_toggled(scope: Scope) -> Scope:
    """``scope`` for the path the router's slash redirect points to."""
    path = scope["path"]
    return {**scope, "path": path.rstrip("/") if path.endswith("/") else f"{path}/"}
