"""What runs before routing: guards, and bringing the workflow registry up to date.

NUL in the URL, the keyless loopback guard, keys for the operations paths, and the
cross-process workflow sync. Each is a plain ASGI middleware around the whole app, so
routes mounted later (``/mcp``, ``/console``, the docs pages) are covered without knowing
about them.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi.responses import JSONResponse
from starlette.datastructures import State
from starlette.types import ASGIApp, Receive, Scope, Send

from aptix.api.auth import BEARER_CHALLENGE, ApiKeyVerifier
from aptix.api.errors import error_body
from aptix.loopback import host_header_name, is_ip_literal, is_loopback
from aptix.nul import NUL_REFUSED

__all__ = [
    "OPERATIONS_PATHS",
    "LoopbackOnly",
    "RefuseNulInUrl",
    "RequireKeyForOperations",
    "SyncWorkflows",
]

#: Paths that describe or measure the deployment: behind a key unless APTIX_PUBLIC_METRICS.
OPERATIONS_PATHS = ("/metrics", "/openapi.json", "/docs", "/redoc")

KEYLESS = "This server has no APTIX_API_KEYS, so it answers only on loopback"


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


class LoopbackOnly:
    """Without keys: 421 unless the request came over loopback and names a loopback ``Host``.

    The ``Host`` check stops DNS rebinding (a web page whose name now resolves to 127.0.0.1
    still sends that name). The address checks stop a keyless app bound to ``0.0.0.0`` by a
    plain ``uvicorn --factory`` from answering other machines; an address that is a name
    rather than an IP (in-process test transports) cannot be judged and passes. A browser's
    ``Origin`` that is not a loopback page gets 403: another site's page cannot post to it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse or pass through."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        status, problem = 421, refusal(scope)
        if problem is None:
            status, problem = 403, foreign_origin(scope)
        if problem is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": problem[:120]})
        else:
            code = "misdirected_request" if status == 421 else "forbidden"
            await JSONResponse(error_body(code, problem), status)(scope, receive, send)


def refusal(scope: Scope) -> str | None:
    """Why a keyless server must not answer this request, or None."""
    for header, value in scope.get("headers", ()):
        if header == b"host":
            shown = value.decode("latin-1")
            name = host_header_name(shown)
            if name is None or not is_loopback(name):
                return (
                    f"{KEYLESS} names (localhost, 127.0.0.1, [::1]), not Host '{shown[:100]}'. "
                    "Use http://127.0.0.1:<port>, or set APTIX_API_KEYS to serve other names."
                )
            break
    for end in ("server", "client"):
        address = scope.get(end)
        host = str(address[0]) if address else ""
        if host and is_ip_literal(host) and not is_loopback(host):
            side = "reached on" if end == "server" else "called from"
            return (
                f"{KEYLESS} connections; it was {side} {host}. Bind 127.0.0.1, or set "
                "APTIX_API_KEYS to serve other machines."
            )
    return None


def foreign_origin(scope: Scope) -> str | None:
    """Why a keyless server refuses the browser page that sent this request, or None."""
    for header, value in scope.get("headers", ()):
        if header == b"origin":
            shown = value.decode("latin-1")
            try:
                name = urlsplit(shown).hostname
            except ValueError:
                name = None
            if name is None or not is_loopback(name):
                return (
                    f"{KEYLESS} pages; Origin '{shown[:100]}' is another site. Set "
                    "APTIX_API_KEYS to serve browsers elsewhere."
                )
            break
    return None


class RequireKeyForOperations:
    """With keys: ``/metrics``, ``/openapi.json`` and the docs pages need one too (401)."""

    def __init__(self, app: ASGIApp, *, verifier: ApiKeyVerifier) -> None:
        self.app = app
        self.verifier = verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse or pass through."""
        if scope["type"] == "http" and _is_operations_path(scope["path"]):
            presented = _bearer(scope)
            if presented is None or self.verifier.caller_for(presented) is None:
                body = error_body(
                    "unauthorized",
                    "Send an API key as 'Authorization: Bearer <key>' (or set "
                    "APTIX_PUBLIC_METRICS=true to serve this path without one).",
                )
                headers = {"WWW-Authenticate": BEARER_CHALLENGE}
                await JSONResponse(body, 401, headers=headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _is_operations_path(path: str) -> bool:
    return any(path == p or path.startswith(f"{p}/") for p in OPERATIONS_PATHS)


def _bearer(scope: Scope) -> str | None:
    for header, value in scope.get("headers", ()):
        if header == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer":
                return None
            return token.strip() or None
    return None


class SyncWorkflows:
    """Before each request: serve what other processes published (``WorkflowSync.check``).

    Throttled inside the check, so most requests pay one clock read.
    """

    def __init__(self, app: ASGIApp, *, state: State) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check, then pass through."""
        runtime = getattr(self.state, "runtime", None)
        if scope["type"] == "http" and runtime is not None:
            await runtime.workflows.sync.check()
        await self.app(scope, receive, send)
