"""``create_app``: the FastAPI application on an Aptix runtime."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute
from fastapi.telemetry import TelemetryConfig
from pydantic.alias_generators import to_camel
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aptix import __version__
from aptix.api.auth import ApiKeyVerifier
from aptix.api.docs import install_offline_docs
from aptix.api.edge import (
    LoopbackOnly,
    RefuseNulInUrl,
    RequireKeyForOperations,
    SyncWorkflows,
)
from aptix.api.errors import EnvelopeErrors, install_error_handlers
from aptix.api.head import HeadAsGet
from aptix.api.json_body import JsonBodyRoute
from aptix.api.metrics import Metrics, ObserveMiddleware, with_request_ids
from aptix.api.routes import agent, catalog, health, openai, sessions, tools, usage
from aptix.api.schemas import ERROR_RESPONSES, REQUEST_BODIES
from aptix.api.storable_json import StorableJSONResponse
from aptix.casing import with_pascal_case_variant
from aptix.console import ConsoleFiles
from aptix.errors import ConfigurationError
from aptix.llm.types import LlmClient
from aptix.loopback import is_loopback
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings, load_settings
from aptix.telemetry import NO_TRACING, Tracing, open_tracing

__all__ = ["STARTUP_REFUSALS", "create_app"]

#: Why apps of this process refused to start, one line each: a configuration error found only
#: once the app starts (a tool a mode names that its MCP server turns out not to have).
#: ``aptix serve`` exits 2 on one, as for the configuration errors it finds before starting.
STARTUP_REFUSALS: list[str] = []


def create_app(
    settings: AptixSettings | None = None,
    *,
    runtime: Runtime | None = None,
    model: LlmClient | None = None,
) -> FastAPI:
    """Build the app: it opens its own runtime from ``settings``, or serves ``runtime``.

    ``model`` replaces the configured model endpoint (tests pass a scripted model).
    Without API keys the app serves loopback only: it refuses a non-loopback ``APTIX_HOST``
    here and answers 421 to any other ``Host`` or connection (:class:`LoopbackOnly`).
    """
    settings = runtime.settings if runtime is not None else (settings or load_settings())
    verifier = ApiKeyVerifier(settings.api_key_map())
    if not verifier.enabled and not is_loopback(settings.host):
        raise ConfigurationError(
            f"Refusing to serve on {settings.host} without APTIX_API_KEYS: with no keys every "
            "caller is the single local user.",
            hint="set APTIX_API_KEYS, or bind 127.0.0.1",
        )

    # Made here, not in the lifespan: FastAPI's server spans need the provider up front. The
    # runtime flushes it on close; the SDK shuts it down at exit (an app may start again).
    tracing = runtime.tracing if runtime is not None else open_tracing(settings, owned=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if runtime is not None:
            _attach(app, runtime, model)
            yield
            return
        started = False
        try:
            async with open_runtime(settings, tracing=tracing) as opened:
                _attach(app, opened, model)
                from aptix.mcp.http import mcp_http_app

                async with mcp_http_app(opened, verifier) as mcp_endpoint:
                    # Stateless: no event stream to GET and no session to DELETE, so POST
                    # only (Starlette answers the rest 405 with ``Allow``).
                    app.router.routes.append(Route("/mcp", mcp_endpoint, methods=["POST"]))
                    # What start-up built (modules, catalogs, the embedding model) lives as
                    # long as the server: out of the collector's sight, a full collection
                    # under load scans only what requests made (p99 of POST
                    # /v1/agent/execute: 140 -> 50 ms).
                    gc.freeze()
                    started = True
                    try:
                        yield
                    finally:
                        gc.unfreeze()  # an app started again in this process starts afresh
        except ConfigurationError as exc:
            if not started:
                app.state.startup_refusal = exc.one_line()
                STARTUP_REFUSALS.append(app.state.startup_refusal)
            raise

    app = _AptixApp(
        title="Aptix",
        version=__version__,
        summary="A governed runtime for LLM agent tools.",
        # Operation ids are the route functions' names in camelCase (``invokeTool``).
        generate_unique_id_function=_operation_id,
        lifespan=lifespan,
        # Stored text that cannot be encoded (a lone surrogate) never makes a read fail.
        default_response_class=StorableJSONResponse,
        # Counted on the stream (chunked bodies too) before parsing or auth, /mcp included.
        max_body_size=settings.max_body_bytes,
        # Served from the package by install_offline_docs, not from a CDN.
        docs_url=None,
        redoc_url=None,
        telemetry=_telemetry(tracing),
    )
    # Routes added on the app itself read their bodies as every router's do.
    app.router.route_class = JsonBodyRoute
    app.state.key_verifier = verifier
    app.state.tracing = tracing
    app.state.metrics = Metrics()
    app.state.reasoner = None
    if runtime is not None:
        _attach(app, runtime, model)
    install_error_handlers(app)
    # Innermost, so every check outside it sees the request as the HEAD it is.
    app.add_middleware(HeadAsGet)
    app.add_middleware(SyncWorkflows, state=app.state)
    app.add_middleware(RefuseNulInUrl)
    # Added late, so outside: refused requests never reach a route, /mcp or /console.
    if not verifier.enabled:
        app.add_middleware(LoopbackOnly)
    elif not settings.public_metrics:
        app.add_middleware(RequireKeyForOperations, verifier=verifier)
    # Outermost of these, so that the refusals above are counted too (route "unmatched").
    app.add_middleware(ObserveMiddleware, metrics=app.state.metrics)
    for router in (
        health.router,
        tools.router,
        sessions.router,
        catalog.router,
        agent.router,
        openai.router,
        usage.router,
    ):
        app.include_router(router, responses=ERROR_RESPONSES)
    install_offline_docs(app)
    app.mount("/console", ConsoleFiles(), name="console")
    app.add_api_route("/", _to_console, include_in_schema=False)
    return app


async def _to_console() -> RedirectResponse:
    """The banner's address, opened in a browser, leads to the console rather than a 404."""
    # Relative, so it still holds behind a proxy that serves Aptix under a path prefix.
    return RedirectResponse("console/", status_code=307)


def _attach(app: FastAPI, runtime: Runtime, model: LlmClient | None) -> None:
    app.state.runtime = runtime
    app.state.metrics.watch_limits(runtime.quotas)
    if model is not None or runtime.settings.model_configured:
        app.state.reasoner = runtime.reasoner(model)


def _telemetry(tracing: Tracing) -> TelemetryConfig:
    """FastAPI's own OpenTelemetry: on with ``APTIX_OTEL``, through Aptix's tracer provider.

    Its server span continues an incoming ``traceparent`` (the global propagator,
    ``OTEL_PROPAGATORS``) and is the parent of the turn's ``invoke_agent`` span; the request's
    text in it (``url.path``, ``url.query``, the ``Host``) is bounded as in Aptix's own spans.
    Its per-request operation spans (dependencies, endpoint, serialization) and its log records
    are left out, and so are the probes.
    """
    if not tracing.enabled:
        return {"tracing": False, "metrics": False, "logs": False}
    from aptix.telemetry.server import outside_text_bounded  # OpenTelemetry is an extra

    assert tracing.provider is not None  # enabled
    return {
        "tracer_provider": outside_text_bounded(tracing.provider),
        "operation_spans": False,
        # Its log records carry the rejected input values; Aptix logs user input at DEBUG only.
        "logs": False,
        "exclude": lambda scope: scope.get("path") in _UNTRACED,
    }


#: Probes: a span each would bury the turns.
_UNTRACED = frozenset({"/healthz", "/metrics"})


def _headers_are_strings(document: dict[str, Any]) -> None:
    """An optional header is absent or a string, never JSON null: say so in its schema.

    FastAPI documents ``str | None`` as ``anyOf [string, null]``; a client reading that sends
    the text ``null``, which a header's pattern then refuses.
    """
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", ()):
                schema = parameter.get("schema", {})
                if parameter.get("in") != "header" or "anyOf" not in schema:
                    continue
                kept = [s for s in schema["anyOf"] if s.get("type") != "null"]
                if len(kept) == 1:
                    rest = {k: v for k, v in schema.items() if k != "anyOf"}
                    parameter["schema"] = {**kept[0], **rest}


def _operation_id(route: APIRoute) -> str:
    return to_camel(route.name)


#: What every path answers without keys to a request from elsewhere (:class:`LoopbackOnly`).
_KEYLESS_REFUSALS = {
    "421": "`misdirected_request`: without keys the server serves this machine only, and the "
    "`Host` is not `localhost`, `127.0.0.1` or `[::1]` (any port), or the connection is not "
    "over loopback.",
    "403": "`forbidden`: without keys, a browser `Origin` that is not a loopback page (another "
    "site's page cannot use the server).",
}


def _without_auth(document: dict[str, Any]) -> None:
    """Keyless mode: no operation needs a key and none answers 401, so the document says so.

    Every operation answers 421 to a foreign ``Host`` and 403 to a foreign ``Origin`` instead
    (the only 403 there is: the one caller is an admin).
    """
    envelope = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for path in document.get("paths", {}).values():
        for operation in path.values():
            operation.pop("security", None)
            responses = operation.setdefault("responses", {})
            responses.pop("401", None)
            for status, text in _KEYLESS_REFUSALS.items():
                responses[status] = {"description": text, "content": envelope}
    document.get("components", {}).pop("securitySchemes", None)


class _AptixApp(FastAPI):
    """FastAPI whose plain-text refusals (Starlette's 413, the MCP SDK's 421...) are enveloped."""

    def openapi(self) -> dict[str, Any]:
        """The document, with the mode fields listing this deployment's modes."""
        if self.openapi_schema is not None:
            return self.openapi_schema
        document = super().openapi()
        if not self.state.key_verifier.enabled:
            _without_auth(document)
        schemas = document.get("components", {}).get("schemas", {})
        runtime: Runtime | None = getattr(self.state, "runtime", None)
        if runtime is not None:
            keys = list(runtime.services.modes.keys)
            for name in ("SessionCreate", "ExecuteRequest"):
                mode = schemas.get(name, {}).get("properties", {}).get("mode")
                if mode is not None:
                    mode["anyOf"] = [{"type": "string", "enum": keys}, {"type": "null"}]
        for body in REQUEST_BODIES:
            if body.__name__ in schemas:
                schemas[body.__name__] = with_pascal_case_variant(schemas[body.__name__])
        _headers_are_strings(document)
        return document

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve; a start-up refused for its configuration is one line, not a traceback."""
        if scope["type"] == "lifespan":
            send = self._refusal_as_one_line(send)
        await super().__call__(scope, receive, send)

    def _refusal_as_one_line(self, send: Send) -> Send:
        async def sending(message: Message) -> None:
            refusal = getattr(self.state, "startup_refusal", None)
            if message["type"] == "lifespan.startup.failed" and refusal is not None:
                # Starlette sends the whole traceback, which the server logs as an error.
                message = {**message, "message": f"error: {refusal}"}
            await send(message)

        return sending

    def build_middleware_stack(self) -> ASGIApp:
        """The usual stack inside :class:`EnvelopeErrors`."""
        # Outermost, because the body limit answers 413 from outside every user middleware;
        # only the request id is set before, so that those answers carry it too.
        return with_request_ids(
            EnvelopeErrors(super().build_middleware_stack(), max_body_size=self.max_body_size),
            getattr(self.state, "tracing", NO_TRACING),
        )
