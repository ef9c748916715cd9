"""A server's replies as the SDK hands them over: lost connections, unreadable answers, words.

The SDK reports an answer that can no longer come in words of its own, under the code
``-32000`` that servers use for their own errors too (:func:`connection_lost`). It hands the
session a reply it could not read as a bare exception that reaches no call, so the call waits
for its timeout, and logs it with a traceback at ERROR (:func:`answer_in` ties such a reply
to its call, a line nested past the SDK's parser included; :func:`quiet_sdk_parse_records`
drops the records). What a server says is cut to :data:`SERVER_WORDS_CHARS` characters
(:func:`server_words`).
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
from aptix.tools.mcp_source.json_parts import members, scalar

__all__ = [
    "SERVER_WORDS_CHARS",
    "answer_in",
    "connection_lost",
    "quiet_sdk_parse_records",
    "refused_line",
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
        return _deep_answer(exc)
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
    return _error_answer(request_id, message)


def refused_line(exc: Exception) -> str | None:
    """The line the SDK's JSON parser refused as a whole (not JSON to it), or None."""
    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors(include_url=False)
    if len(errors) != 1 or errors[0]["type"] != "json_invalid":
        return None
    line = errors[0].get("input")
    return line if isinstance(line, str) else None


def _deep_answer(exc: Exception) -> SessionMessage | None:
    """The error answer a valid line the SDK's parser refused stands for, as :func:`answer_in`.

    pydantic reads no deeper than 200 levels and reports a line nested deeper (a tool's
    result, a schema) as not JSON: the line's outer members, read without that limit, still
    give the call's id. A line that is not JSON stays one.
    """
    line = refused_line(exc)
    parts = members(line) if line is not None else None
    if line is None or parts is None or "method" in parts:
        return None
    if "result" not in parts and "error" not in parts:
        return None
    request_id = scalar(parts.get("id"))
    if not isinstance(request_id, int | str) or isinstance(request_id, bool):
        return None
    assert isinstance(exc, ValidationError)  # refused_line read it
    why = str(exc.errors(include_url=False)[0]["msg"]).removeprefix("Invalid JSON: ")
    why = (
        f"it nests deeper than the MCP SDK reads: {why}"
        if "recursion limit" in why
        else f"the MCP SDK cannot read it: {why}"
    )
    message = (
        f"its answer is not a valid JSON-RPC response ({bounded(why, 200)}): {bounded(line, 500)}"
    )
    return _error_answer(request_id, message)


def _error_answer(request_id: int | str, message: str) -> SessionMessage:
    error = types.ErrorData(code=types.PARSE_ERROR, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def unreadable(exc: Exception) -> str:
    """What an unreadable reply was, in a few words (quoted: it is the server's text)."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        if errors and errors[0]["type"] == "json_invalid":
            shown = json.dumps(bounded(str(errors[0]["input"]), 200))
            why = str(errors[0]["msg"]).removeprefix("Invalid JSON: ")
            if "recursion limit" in why:  # JSON, but deeper than the SDK reads
                return f"nested deeper than the MCP SDK reads ({why}): {shown}"
            return f"not JSON: {shown}"
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
