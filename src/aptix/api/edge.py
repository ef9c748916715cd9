"""Checks on the request line before routing: no NUL in the path or the query."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from aptix.api.errors import error_body
from aptix.nul import NUL_REFUSED

__all__ = ["RefuseNulInUrl"]


class RefuseNulInUrl:
    """Answers 422 to a URL carrying NUL (``%00``): path parameters are stored and queried."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse or pass through."""
        if scope["type"] == "http" and (
            "\x00" in scope["path"] or b"%00" in scope.get("query_string", b"")
        ):
            message = f"{NUL_REFUSED} (found in the URL)."
            await JSONResponse(error_body("invalid_request", message), 422)(scope, receive, send)
            return
        await self.app(scope, receive, send)
