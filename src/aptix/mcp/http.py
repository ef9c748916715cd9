"""MCP over streamable HTTP at ``/mcp`` on the API's app, behind the same bearer keys."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.types import ASGIApp, Receive, Scope, Send

from aptix.api.errors import error_body
from aptix.mcp.server import build_mcp_server, current_caller
from aptix.runtime import Runtime

__all__ = ["mcp_http_app"]


@asynccontextmanager
async def mcp_http_app(
    runtime: Runtime, api_keys: dict[str, tuple[str, str]]
) -> AsyncIterator[ASGIApp]:
    """The ``/mcp`` ASGI app for the lifetime of the block (its session manager runs inside)."""
    server = build_mcp_server(runtime)
    inner = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True
    )

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        caller = ("local", "local")
        if scope["type"] == "http" and api_keys:
            header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            scheme, _, token = header.partition(" ")
            found = api_keys.get(token.strip()) if scheme.lower() == "bearer" else None
            if found is None:
                body = json.dumps(error_body("unauthorized", "Send a valid API key.")).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
            caller = found
        token_var = current_caller.set(caller)
        try:
            await inner(scope, receive, send)
        finally:
            current_caller.reset(token_var)

    async with server.session_manager.run():
        yield _Endpoint(app)


class _Endpoint:
    """Wraps the ASGI callable so that a Starlette ``Route`` passes requests through raw."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)
