"""``HEAD`` on every ``GET`` route: the same status and headers, no body (RFC 9110 §9.3.2).

FastAPI's routes match only the methods they are declared with, so a ``@router.get`` route
would answer ``HEAD`` 405. Declaring ``HEAD`` beside each ``GET`` would put a second operation
per path in the OpenAPI document; routing ``HEAD`` as ``GET`` here serves every route alike
(the console and the docs too) and leaves the document as it is.

A ``HEAD`` answer is complete once its headers are out: the end of its (empty) body is sent
right after them, and the app, which goes on as for a ``GET``, hears of the client leaving only
after that. A client that closes after the headers (``curl -I``) made a console file's answer
(Starlette's ``FileResponse`` watches for the disconnect while it sends) end unfinished, and the
request's server span read as failed (``error.type`` ``ConnectionError``).
"""

from __future__ import annotations

import anyio
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
        answered = anyio.Event()

        async def headers_only(message: Message) -> None:
            if answered.is_set():
                return  # the body a GET gets (or a file to send as it): not part of a HEAD
            if message["type"] != "http.response.start":
                await send(message)
                return
            # Content-Length stays: it is the length a GET would have got (§8.6). No body,
            # so no trailers either.
            message = {k: v for k, v in message.items() if k != "trailers"}
            await send(message)
            await send({"type": "http.response.body", "body": b""})
            answered.set()

        async def leaving_after_answer() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                # A HEAD client may close as soon as the headers came: the answer must not be
                # cut short by it before its end went out. (Every GET route sends its headers
                # without waiting for the client to leave.)
                await answered.wait()
            return message

        try:
            await self.app(as_get, leaving_after_answer, headers_only)
        finally:
            # What routing recorded (the route, for the metrics' label), as it would in place.
            scope.update({k: v for k, v in as_get.items() if k != "method"})
