"""``create_app``: the FastAPI application on an Aptix runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.routing import Route

from aptix.api.errors import install_error_handlers
from aptix.api.metrics import Metrics, ObserveMiddleware
from aptix.api.routes import agent, catalog, health, sessions, tools
from aptix.llm.types import LlmClient
from aptix.runtime import Runtime, open_runtime
from aptix.settings import AptixSettings, load_settings

__all__ = ["create_app"]


def create_app(
    settings: AptixSettings | None = None,
    *,
    runtime: Runtime | None = None,
    model: LlmClient | None = None,
) -> FastAPI:
    """Build the app: it opens its own runtime from ``settings``, or serves ``runtime``.

    ``model`` replaces the configured model endpoint (tests pass a scripted model).
    """
    settings = runtime.settings if runtime is not None else (settings or load_settings())
    api_keys = settings.api_key_map()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if runtime is not None:
            _attach(app, runtime, model)
            yield
            return
        async with open_runtime(settings) as opened:
            _attach(app, opened, model)
            from aptix.mcp.http import mcp_http_app

            async with mcp_http_app(opened, api_keys) as mcp_endpoint:
                app.router.routes.append(
                    Route("/mcp", mcp_endpoint, methods=["GET", "POST", "DELETE"])
                )
                yield

    app = FastAPI(
        title="Aptix",
        version="0.1.0",
        summary="A governed runtime for LLM agent tools.",
        lifespan=lifespan,
    )
    app.state.api_keys = api_keys
    app.state.metrics = Metrics()
    app.state.reasoner = None
    if runtime is not None:
        _attach(app, runtime, model)
    install_error_handlers(app)
    app.add_middleware(
        ObserveMiddleware, metrics=app.state.metrics, max_body_bytes=settings.max_body_bytes
    )
    for router in (health.router, tools.router, sessions.router, catalog.router, agent.router):
        app.include_router(router)
    return app


def _attach(app: FastAPI, runtime: Runtime, model: LlmClient | None) -> None:
    app.state.runtime = runtime
    if model is not None or runtime.settings.model_configured:
        app.state.reasoner = runtime.reasoner(model)
