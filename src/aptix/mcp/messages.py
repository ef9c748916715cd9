"""Whether a body or a line is one JSON-RPC 2.0 message Aptix can answer, alike on every transport.

The SDK reads a message whose ``id`` is neither a string nor an integer (an object, ``1.5``,
``true``, ``null``) as a notification and never answers it, so a client waiting for the
answer waits forever; such a message is refused here as an invalid request instead.
"""

from __future__ import annotations

import pydantic_core
from mcp import types
from pydantic import ValidationError

__all__ = ["INVALID", "error", "problem", "refusal"]

INVALID = "Invalid Request: not a JSON-RPC 2.0 message."


def problem(body: bytes | str) -> int | None:
    """``PARSE_ERROR`` (not JSON), ``INVALID_REQUEST`` (not one message), or None (one message)."""
    try:
        raw = pydantic_core.from_json(body)
    except ValueError:
        return types.PARSE_ERROR
    if isinstance(raw, dict) and "id" in raw and not _plain_id(raw["id"]):
        return types.INVALID_REQUEST
    try:
        types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except ValidationError:
        return types.INVALID_REQUEST
    return None


def refusal(body: bytes | str) -> dict[str, object] | None:
    """The answer to a body that is not one JSON-RPC 2.0 message; None for one that is."""
    code = problem(body)
    if code is None:
        return None
    return error(
        code, "Parse error: the body is not JSON." if code == types.PARSE_ERROR else INVALID
    )


def error(code: int, message: str) -> dict[str, object]:
    """A JSON-RPC 2.0 error answer to a message whose id could not be read."""
    # The id of a message that could not be read is unknown: JSON-RPC 2.0 says null.
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


def _plain_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
