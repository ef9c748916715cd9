"""A server's replies as the SDK hands them over: lost connections, unreadable answers, words.

The SDK reports an answer that can no longer come in words of its own, under the code
``-32000`` that servers use for their own errors too (:func:`connection_lost`). It hands the
session a reply it could not read as a bare exception that reaches no call, so the call waits
for its timeout, and logs it with a traceback at ERROR (:func:`answer_in` ties such a reply
to its call; :func:`quiet_sdk_parse_records` drops the records). What a server says is cut to
:data:`SERVER_WORDS_CHARS` characters (:func:`server_words`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp import types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from aptix.logger import bounded

__all__ = [
    "SERVER_WORDS_CHARS",
    "answer_in",
    "connection_lost",
    "quiet_sdk_parse_records",
    "server_words",
    "unreadable",
]

#: Most characters of a server's own words (an error message, an ``isError`` result's text)
#: that reach the model and the turn record.
SERVER_WORDS_CHARS = 2_000


def server_words(text: str) -> str:
    """``text`` cut to :data:`SERVER_WORDS_CHARS` characters, saying how many were left out."""
    if len(text) <= SERVER_WORDS_CHARS:
        return text
    hidden = len(text) - SERVER_WORDS_CHARS
    return f"{text[:SERVER_WORDS_CHARS]}… ({hidden} more characters not shown)"


#: The SDK's words (code ``CONNECTION_CLOSED``) for a request whose answer can no longer come:
#: the session's stream ended (any transport), or a streamable-HTTP POST's event stream ended
#: without the answer (with nothing to resume from, or after its reconnects gave up).
_LOST_WORDS = frozenset(
    {
        "Connection closed",
        "SSE stream ended without a response",
        "SSE stream ended and reconnection attempts were exhausted",
    }
)


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is the SDK's report of a connection that ended before the answer."""
    return (
        isinstance(exc, MCPError)
        and exc.code == types.CONNECTION_CLOSED
        and str(exc) in _LOST_WORDS
    )


def answer_in(exc: Exception) -> SessionMessage | None:
    """The error answer to a call that an unreadable reply with the call's id stands for.

    A reply shaped as an answer (``result`` or ``error``, no ``method``) whose id is a string
    or an integer answers that request, unreadable or not: its call fails at once, with the
    reply in its words, rather than waiting for an answer that was already given. None for
    anything else (a line that is not JSON, a reply without such an id).
    """
    reply = _reply(exc)
    if reply is None:
        return None
    request_id = reply.get("id")
    if not isinstance(request_id, int | str) or isinstance(request_id, bool):
        return None
    assert isinstance(exc, ValidationError)  # _reply read it
    branch = "JSONRPCError" if "error" in reply else "JSONRPCResponse"
    why = next(
        (
            f"{'.'.join(str(part) for part in error['loc'][1:]) or 'the answer'}: {error['msg']}"
            for error in exc.errors(include_url=False)
            if error["loc"][:1] == (branch,)
        ),
        "not an MCP answer",
    )
    message = (
        f"its answer is not a valid JSON-RPC response ({bounded(why, 200)}): "
        f"{bounded(json.dumps(reply, ensure_ascii=False), 500)}"
    )
    error = types.ErrorData(code=types.PARSE_ERROR, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def unreadable(exc: Exception) -> str:
    """What an unreadable reply was, in a few words (quoted: it is the server's text)."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        if errors and errors[0]["type"] == "json_invalid":
            return f"not JSON: {json.dumps(bounded(str(errors[0]['input']), 200))}"
        if errors:
            where = ".".join(str(part) for part in errors[0]["loc"])
            shown = bounded(json.dumps(errors[0].get("input"), default=repr), 200)
            return f"not a JSON-RPC message ({where}: {errors[0]['msg']}): {shown}"
    return f"{type(exc).__name__}: {json.dumps(bounded(str(exc), 200))}"


def _reply(exc: Exception) -> dict[str, Any] | None:
    """The message an unreadable reply is, when it is shaped as an answer."""
    if not isinstance(exc, ValidationError):
        return None
    # The whole message is the input of an error at its top level (a branch's missing
    # field); deeper errors carry parts of it.
    for error in sorted(exc.errors(include_url=False), key=lambda e: len(e["loc"])):
        value = error.get("input")
        if not isinstance(value, dict) or "method" in value:
            continue
        if "result" in value or "error" in value:
            return value
    return None


#: The SDK's records of a reply it could not read, each at ERROR with a traceback. Aptix
#: reports such a reply itself: the call it answers fails with its words (:func:`answer_in`,
#: or the SDK's own error answer over HTTP), or a warning names the server.
_SDK_PARSE_RECORDS = frozenset(
    {
        ("mcp.client.stdio", "Failed to parse JSONRPC message from server"),
        ("mcp.client.streamable_http", "Error parsing JSON response"),
        ("mcp.client.streamable_http", "Error parsing SSE message"),
    }
)


class _WithoutSdkParseRecords(logging.Filter):
    """Drops the SDK's records of unreadable replies (see :data:`_SDK_PARSE_RECORDS`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for one of those records."""
        return (record.name, record.msg) not in _SDK_PARSE_RECORDS


def quiet_sdk_parse_records() -> None:
    """Install the filter on the SDK's client transports' loggers (once)."""
    for name in {name for name, _ in _SDK_PARSE_RECORDS}:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _WithoutSdkParseRecords) for f in logger.filters):
            logger.addFilter(_WithoutSdkParseRecords())
