"""Whether a body or a line is one JSON-RPC 2.0 message Aptix can answer, alike on every transport.

The SDK reads a message whose ``id`` is neither a string nor an integer (an object, ``1.5``,
``true``, ``null``) as a notification and never answers it, so a client waiting for the
answer waits forever; such a message is refused here as an invalid request instead.
"""

from __future__ import annotations

import pydantic_core
from mcp import types
from pydantic import ValidationError

__all__ = ["INVALID", "NOT_UTF8", "TOO_DEEP", "error", "problem", "refusal"]

INVALID = "Invalid Request: not a JSON-RPC 2.0 message."
#: Valid JSON the parser refuses to read (its recursion limit): saying "not JSON" would send
#: the client hunting for a syntax error that is not there.
TOO_DEEP = "Invalid Request: the JSON is nested too deeply (at most about 200 levels are read)."
NOT_UTF8 = "Parse error: the message is not valid UTF-8."
_NOT_JSON = "Parse error: the body is not JSON."


def problem(body: bytes | str) -> tuple[int, str] | None:
    """The JSON-RPC error code and message for a body that is not one message; None for one."""
    try:
        raw = pydantic_core.from_json(body)
    except ValueError as exc:
        if "recursion limit" in str(exc):
            return types.INVALID_REQUEST, TOO_DEEP
        return types.PARSE_ERROR, _NOT_JSON
    if isinstance(raw, dict) and "id" in raw and not _plain_id(raw["id"]):
        return types.INVALID_REQUEST, INVALID
    try:
        types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except ValidationError:
        return types.INVALID_REQUEST, INVALID
    return None


def refusal(body: bytes | str) -> dict[str, object] | None:
    """The answer to a body that is not one JSON-RPC 2.0 message; None for one that is."""
    if isinstance(body, bytes):
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return error(types.PARSE_ERROR, NOT_UTF8)
    found = problem(body)
    return None if found is None else error(*found)


def error(code: int, message: str) -> dict[str, object]:
    """A JSON-RPC 2.0 error answer to a message whose id could not be read."""
    # The id of a message that could not be read is unknown: JSON-RPC 2.0 says null.
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


def _plain_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
