"""One error body for every failure: ``{"error": {"code", "message"}}``, never a bare 500."""

from __future__ import annotations

import json
from typing import Any

from asgi_correlation_id import correlation_id
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aptix.api.json_body import NotJsonNumber
from aptix.api.openai.unserved import method_not_served, not_served
from aptix.api.outage import (
    OUTAGE_TYPES,
    RETRY_AFTER_SECONDS,
    OutageLog,
    RefusalLog,
    is_database_outage,
)
from aptix.api.storable_json import StorableJSONResponse
from aptix.blank import NOT_BLANK_PATTERN
from aptix.db.outage import DATABASE_REFUSED, database_refusal
from aptix.errors import ConfigurationError, LlmError, NotFoundError, TurnError
from aptix.logger import StdlibAdminLogger, already_logged

__all__ = [
    "OPENAI_PATHS",
    "ApiError",
    "EnvelopeErrors",
    "error_body",
    "install_error_handlers",
    "openai_error_body",
    "too_large",
]

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    421: "misdirected_request",
    405: "method_not_allowed",
    409: "conflict",
    412: "precondition_failed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    502: "model_error",
    503: "unavailable",
    504: "timeout",
}


_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


class ApiError(Exception):
    """An expected failure with its HTTP status, stable code and readable message."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or _CODES.get(status, "error")
        self.message = message
        self.headers = headers
        #: The request field the error is about (``messages[0]``), OpenAI's ``param``.
        self.param = param


#: Routes whose clients (OpenAI SDKs, chat UIs) read OpenAI's error shape: the envelope
#: plus its ``type`` and ``param``.
OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/models"})


def _is_openai(path: str) -> bool:
    # ``/v1/models/{model}`` too: one model, retrieved by the same clients; and the OpenAI
    # APIs Aptix does not serve, whose clients read their 404 (or 413) the same way.
    if path in OPENAI_PATHS or path.startswith("/v1/models/"):
        return True
    return not_served(path) is not None


_OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def error_body(code: str, message: str) -> dict[str, Any]:
    """The JSON error envelope."""
    return {"error": {"code": code, "message": message}}


#: What a request that failed unexpectedly is told (the details are in the server log).
UNEXPECTED = "The server failed unexpectedly; it was logged."
#: What a request that found the database unreachable is told.
DATABASE_UNAVAILABLE = "The database is not reachable right now; retry shortly."


def unexpected_error(exc: Exception) -> tuple[int, str, str]:
    """Status, code and message for an exception no handler expected (an outage, a bug)."""
    if (reason := database_refusal(exc)) is not None:
        return 503, "database_refused", DATABASE_REFUSED.format(reason=reason)
    if is_database_outage(exc):
        return 503, "database_unavailable", DATABASE_UNAVAILABLE
    return 500, "internal_error", UNEXPECTED


def openai_error_body(
    status: int, code: str, message: str, param: str | None = None
) -> dict[str, Any]:
    """The envelope in OpenAI's shape: ``code`` and ``message`` plus ``type`` and ``param``.

    ``param`` names the request field the error is about (``n``, ``messages[0]``), null when
    it is about none.
    """
    kind = _OPENAI_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"error": {"code": code, "message": message, "type": kind, "param": param}}


def _response(
    status: int,
    code: str,
    message: str,
    headers: dict[str, str] | None = None,
    *,
    path: str = "",
    param: str | None = None,
) -> JSONResponse:
    if _is_openai(path):
        body = openai_error_body(status, code, message, param)
    else:
        body = error_body(code, message)
    # A message may quote stored text: it must render even with a lone surrogate in it.
    return StorableJSONResponse(body, status_code=status, headers=headers)


def too_large(limit: int | None) -> str:
    """The 413 message naming the limit."""
    return f"The request body is larger than {limit} bytes."


#: What a body JSON cannot read is told, with the reason after a colon when it is known.
_NOT_JSON = "The request body is not valid JSON"
#: FastAPI's 400 when reading the body raised anything but a JSON syntax error.
_FASTAPI_UNREADABLE = "There was an error parsing the body"


def _unreadable_json(exc: StarletteHTTPException) -> str | None:
    """The bad-JSON message for FastAPI's 400 on a body ``json.loads`` gave up on, or None.

    Bytes that are not UTF-8, nesting past the parser's recursion limit, an integer past
    Python's digit limit and ``NaN`` or ``Infinity`` (:class:`NotJsonNumber`) are not
    ``JSONDecodeError``, so FastAPI answers them with its own 400 ``bad_request``; they are
    bad JSON all the same. Anything else (the client leaving mid-body) keeps that answer.
    """
    if exc.status_code != 400 or exc.detail != _FASTAPI_UNREADABLE:
        return None
    cause = exc.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return f"{_NOT_JSON}: it is not valid UTF-8."
    if isinstance(cause, RecursionError):
        return f"{_NOT_JSON}: it nests too deep."
    if isinstance(cause, NotJsonNumber):
        return f"{_NOT_JSON}: {cause}."
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):
        return f"{_NOT_JSON}: it has a number too long to read."
    if isinstance(cause, ValueError):
        return f"{_NOT_JSON}."
    return None


def _describe(exc: RequestValidationError) -> str:
    problems = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            return f"{_NOT_JSON}."
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        message = err.get("msg", "invalid")
        if err.get("ctx", {}).get("pattern") == NOT_BLANK_PATTERN:
            # The pattern spells out every blank character: unreadable, and says less.
            message = "must not be blank"
        if not where and "param" in err.get("ctx", {}):
            problems.append(message)  # a check of the whole body, whose message says where
            continue
        problems.append(f"{where or 'body'}: {message}")
    return "Invalid request: " + "; ".join(problems) + "."


def _named_param(err: Any) -> str | None:
    # A check of the whole body (NUL anywhere in it) names the field in its context.
    named = err.get("ctx", {}).get("param")
    return named if isinstance(named, str) else None


def _param(exc: RequestValidationError) -> str | None:
    """The body field the first problem is in, as OpenAI names it: ``messages[0]``, ``n``.

    Deeper parts of the location are left out: pydantic adds union members and type names
    (``messages.0.user.content.str``) that are no field of the request. A validator of the
    whole body has no field in its location; it names one as ``param`` in its context.
    """
    for err in exc.errors():
        if (named := _named_param(err)) is not None:
            return named
        # ("body", field, ...), or ("header" | "path" | "query", name): the part after it.
        loc = list(err.get("loc", ()))[1:]
        if not loc or not isinstance(loc[0], str):
            return None
        if len(loc) > 1 and isinstance(loc[1], int):
            return f"{loc[0]}[{loc[1]}]"
        return loc[0]
    return None


def _allowed_methods(request: Request, named: str | None) -> str | None:
    """The ``Allow`` of a 405: every method of the path, ``HEAD`` wherever ``GET`` is.

    ``named`` is what the refusing route said (a route outside the OpenAPI document).
    """
    # Starlette names only the first route matching the path, and FastAPI has one route per
    # method: the OpenAPI paths know every method of a path.
    path = request.scope["path"]
    # A literal path (``/v1/workflows/match``) wins over a template that also matches it.
    paths = sorted(request.app.openapi()["paths"].items(), key=lambda item: item[0].count("{"))
    methods = {m.strip().upper() for m in named.split(",")} if named else set()
    for template, operations in paths:
        if compile_path(template)[0].match(path):
            methods = {m.upper() for m in operations}
            break
    methods &= _METHODS
    if not methods:
        return None
    if "GET" in methods:
        methods.add("HEAD")  # aptix.api.head answers it on every GET route
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    """Map every exception kind to the envelope and a fitting status."""
    logger = StdlibAdminLogger()

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return _response(
            exc.status, exc.code, exc.message, exc.headers, path=request.url.path, param=exc.param
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        path = request.url.path
        # OpenAI answers an invalid request 400 with code invalid_request_error, as this
        # endpoint's other refusals do; its clients expect that.
        if _is_openai(path):
            message = _describe(exc)
            return _response(400, "invalid_request_error", message, path=path, param=_param(exc))
        return _response(422, "invalid_request", _describe(exc), path=path)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if (unreadable := _unreadable_json(exc)) is not None:
            # Answered as _invalid answers a JSON syntax error: the same error to the client.
            if _is_openai(request.url.path):
                # ``NaN`` in a client tool's schema names ``tools[0]``, as other refusals do.
                param = exc.__cause__.param if isinstance(exc.__cause__, NotJsonNumber) else None
                return _response(
                    400, "invalid_request_error", unreadable, path=request.url.path, param=param
                )
            return _response(422, "invalid_request", unreadable, path=request.url.path)
        message = exc.detail if isinstance(exc.detail, str) else "Request failed."
        if exc.status_code == 404 and message == "Not Found":
            message = not_served(request.url.path) or "No such route."
        elif exc.status_code == 413:
            message = too_large(request.app.max_body_size)
        elif (
            exc.status_code == 405
            and message == "Method Not Allowed"
            and _is_openai(request.url.path)
        ):
            # An SDK call (``chat.completions.list()``) is told what is served, not just no.
            message = method_not_served(request.method, request.url.path)
        headers = dict(exc.headers or {})
        if exc.status_code == 405 and (allowed := _allowed_methods(request, headers.get("Allow"))):
            headers["Allow"] = allowed
        code = _CODES.get(exc.status_code, "error")
        return _response(exc.status_code, code, message, headers, path=request.url.path)

    @app.exception_handler(NotFoundError)
    async def _missing(request: Request, exc: NotFoundError) -> JSONResponse:
        return _response(404, "not_found", str(exc), path=request.url.path)

    @app.exception_handler(TurnError)
    async def _turn(request: Request, exc: TurnError) -> JSONResponse:
        return _response(409, exc.code, str(exc), path=request.url.path)

    @app.exception_handler(LlmError)
    async def _llm(request: Request, exc: LlmError) -> JSONResponse:
        return _response(502, "model_error", str(exc), path=request.url.path)

    @app.exception_handler(ConfigurationError)
    async def _config(request: Request, exc: ConfigurationError) -> JSONResponse:
        return _response(503, "unavailable", str(exc), path=request.url.path)

    outages = OutageLog()
    refusals = RefusalLog()

    async def _database(request: Request, exc: Exception) -> JSONResponse:
        # Handled here rather than by the catch-all, which re-raises after answering: uvicorn
        # then logs a second traceback and drops the keep-alive connection.
        if (reason := database_refusal(exc)) is not None:
            # No Retry-After: only an operator's GRANT (or a writable database) ends it.
            refusals.refused(reason, request.url.path)
            message = DATABASE_REFUSED.format(reason=reason)
            return _response(503, "database_refused", message, path=request.url.path)
        if not is_database_outage(exc):
            return await _unexpected(request, exc)
        outages.failed(exc, request.url.path)
        return _response(
            503,
            "database_unavailable",
            DATABASE_UNAVAILABLE,
            {"Retry-After": str(RETRY_AFTER_SECONDS)},
            path=request.url.path,
        )

    for kind in OUTAGE_TYPES:
        app.add_exception_handler(kind, _database)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        if not already_logged(exc):
            logger.add_exception(
                "[HttpApi_Request__Exception]",
                exc,
                ("Path", request.url.path),
                ("RequestId", correlation_id.get() or ""),
            )
        return _response(500, "internal_error", UNEXPECTED, path=request.url.path)


class EnvelopeErrors:
    """Re-render plain-text error answers (413, 421, 400...) as the envelope.

    Starlette's body limit and the MCP SDK answer refusals in plain text; clients get one shape.
    """

    def __init__(self, app: ASGIApp, *, max_body_size: int | None) -> None:
        self.app = app
        self.max_body_size = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request through, holding back a plain-text error answer to rewrite it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        text = b""
        answered = False

        async def rewrite(message: Message) -> None:
            nonlocal held, text, answered
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", ()))
                # The MCP SDK's refusals are bare ``Response("...")``: no content type at all.
                kind = headers.get(b"content-type")
                plain = kind is None or kind.startswith(b"text/plain")
                if message["status"] >= 400 and plain:
                    held = message
                    return
            elif message["type"] == "http.response.body" and held is not None:
                text += message.get("body", b"")
                if message.get("more_body", False):
                    return
                await self._send_envelope(send, held, text.decode("utf-8", "replace"), scope)
                return
            await send(message)

        try:
            await self.app(scope, receive, rewrite)
        except Exception:
            # Starlette's outermost middleware answers an unexpected exception (the envelope,
            # logged by the catch-all handler) and then raises it again for the server, which
            # would log a second traceback and drop the client's keep-alive connection. Once
            # the answer is complete there is nothing left to tell anyone.
            if not answered:
                raise

    async def _send_envelope(self, send: Send, start: Message, text: str, scope: Scope) -> None:
        status: int = start["status"]
        message = too_large(self.max_body_size) if status == 413 else text.strip() or "Refused."
        code = _CODES.get(status, "error")
        if _is_openai(scope.get("path", "")):
            envelope = openai_error_body(status, code, message)
        else:
            envelope = error_body(code, message)
        body = json.dumps(envelope).encode()
        kept = [
            (k, v)
            for k, v in start.get("headers", ())
            if k.lower() not in (b"content-type", b"content-length")
        ]
        headers = [
            *kept,
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
