"""``HEAD`` on every ``GET`` route: the same status and headers, no body (RFC 9110 §9.3.2).

FastAPI's routes match only the methods they are declared with, so a ``@router.get`` route
would answer ``HEAD`` 405. Declaring ``HEAD`` beside each ``GET`` would put a second operation
per path in the OpenAPI document; routing ``HEAD`` as ``GET`` here serves every route alike
(the console and the docs too) and leaves the document as it is.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HeadAsGet"]


class HeadAsGet:
    """Route a ``HEAD`` request as ``GET`` and send its answer without the body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass other requests through; answer ``HEAD`` with ``GET``'s status and headers."""
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        # A copy: the server frames a bodiless answer by the method in its own scope, and the
        # middleware outside (metrics, traces) report the request as the HEAD it was.
        as_get = {**scope, "method": "GET"}

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                # Content-Length stays: it is the length a GET would have got (§8.6).
                message = {"type": "http.response.body", "body": b""}
            await send(message)

        try:
            await self.app(as_get, receive, headers_only)
        finally:
            # What routing recorded (the route, for the metrics' label), as it would in place.
            scope.update({k: v for k, v in as_get.items() if k != "method"})
