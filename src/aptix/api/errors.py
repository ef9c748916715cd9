"""One error body for every failure: ``{"error": {"code", "message"}}``, never a bare 500."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from aptix.errors import ConfigurationError, LlmError, NotFoundError, TurnError
from aptix.logger import StdlibAdminLogger

__all__ = ["ApiError", "error_body", "install_error_handlers"]

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    502: "model_error",
    503: "unavailable",
}


class ApiError(Exception):
    """An expected failure with its HTTP status, stable code and readable message."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or _CODES.get(status, "error")
        self.message = message


def error_body(code: str, message: str) -> dict[str, Any]:
    """The JSON error envelope."""
    return {"error": {"code": code, "message": message}}


def _response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status)


def _describe(exc: RequestValidationError) -> str:
    problems = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            return "The request body is not valid JSON."
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        problems.append(f"{where or 'body'}: {err.get('msg', 'invalid')}")
    return "Invalid request: " + "; ".join(problems) + "."


def install_error_handlers(app: FastAPI) -> None:
    """Map every exception kind to the envelope and a fitting status."""
    logger = StdlibAdminLogger()

    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return _response(exc.status, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _response(422, "invalid_request", _describe(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "Request failed."
        if exc.status_code == 404 and message == "Not Found":
            message = "No such route."
        return _response(exc.status_code, _CODES.get(exc.status_code, "error"), message)

    @app.exception_handler(NotFoundError)
    async def _missing(_: Request, exc: NotFoundError) -> JSONResponse:
        return _response(404, "not_found", str(exc))

    @app.exception_handler(TurnError)
    async def _turn(_: Request, exc: TurnError) -> JSONResponse:
        return _response(409, "conflict", str(exc))

    @app.exception_handler(LlmError)
    async def _llm(_: Request, exc: LlmError) -> JSONResponse:
        return _response(502, "model_error", str(exc))

    @app.exception_handler(ConfigurationError)
    async def _config(_: Request, exc: ConfigurationError) -> JSONResponse:
        return _response(503, "unavailable", str(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.add_exception(
            "[HttpApi_Request__Exception]",
            exc,
            ("Path", request.url.path),
            ("RequestId", getattr(request.state, "request_id", "")),
        )
        return _response(500, "internal_error", "The server failed unexpectedly; it was logged.")
