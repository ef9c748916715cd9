"""MCP over streamable HTTP at ``/mcp`` on the API's app, behind the same bearer keys.

Authentication is the ``mcp`` SDK's own: Starlette's ``AuthenticationMiddleware`` with the
SDK's ``BearerAuthBackend`` on the API's :class:`~aptix.api.auth.ApiKeyVerifier`, and the
SDK's ``AuthContextMiddleware`` so that the tool handler reads the caller with
``get_access_token()``. Only the refusal is ours: the API's error envelope and challenge.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.transport_security import TransportSecuritySettings
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aptix.api.auth import BEARER_CHALLENGE, ApiKeyVerifier
from aptix.api.errors import error_body
from aptix.mcp.messages import refusal as _refusal
from aptix.mcp.server import build_mcp_server
from aptix.runtime import Runtime

__all__ = ["mcp_http_app"]


@asynccontextmanager
async def mcp_http_app(runtime: Runtime, verifier: ApiKeyVerifier) -> AsyncIterator[ASGIApp]:
    """The ``/mcp`` ASGI app for the lifetime of the block (its session manager runs inside)."""
    server = build_mcp_server(runtime)
    inner = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        # The app's own guard (aptix.api.edge.LoopbackOnly) checks Host and Origin for every
        # path when there are no keys; with keys the SDK's loopback-only list would refuse
        # every real host name.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app: ASGIApp = _OneMessage(inner)
    if verifier.enabled:
        app = AuthenticationMiddleware(
            _RequireKey(AuthContextMiddleware(app)), backend=BearerAuthBackend(verifier)
        )

    async with server.session_manager.run():
        yield _Endpoint(app)


class _RequireKey:
    """Refuses a request the bearer backend did not authenticate (401, envelope, challenge)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not isinstance(scope.get("user"), AuthenticatedUser):
            body = json.dumps(error_body("unauthorized", "Send a valid API key.")).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", BEARER_CHALLENGE.encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, send)


class _Endpoint:
    """Wraps the ASGI callable so that a Starlette ``Route`` passes requests through raw."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


class _OneMessage:
    """Answers a body that is not a JSON-RPC 2.0 message, as stdio does (-32700 or -32600).

    The SDK answered a readable one with its validation dump (-32602), and one whose ``id``
    is an object with 202 and no answer at all. Inside the key check: a caller without a
    key gets 401 before its body is read.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:  # the app's body limit has already capped what arrives
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        refusal = _refusal(body)
        if refusal is not None:
            answer = json.dumps(refusal).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(answer)).encode()),
            ]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, replay, send)
