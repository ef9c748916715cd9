"""Stdio transport helpers: a line that is not JSON-RPC gets a JSON-RPC error, never silence.

A line longer than the limit (``APTIX_MAX_BODY_BYTES``, as for an HTTP body) is read and
dropped piece by piece, never held whole, and answered with -32700 like unparsable JSON, as is
a line that is not UTF-8 (never read with its bytes replaced). A message the SDK would drop
unanswered (an ``id`` that is neither a string nor an integer) is answered -32600, as is JSON
nested too deeply to be read, and a request with a lone surrogate escape is answered -32602
with its own id, as over HTTP (:mod:`aptix.mcp.messages`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import BinaryIO

import anyio
from mcp import types
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from aptix.mcp.messages import INVALID, NOT_UTF8, problem

__all__ = ["answering_bad_lines", "capped_lines"]

# Stands for a line that was too long: not JSON, so the SDK hands it on as a parse failure.
_TOO_LONG = "\x00aptix: line too long"
# Stands for a line that is not UTF-8: not JSON either, answered -32700 with its own words.
_NOT_UTF8 = "\x00aptix: not UTF-8"
# Stands for a message the SDK would drop or cannot read: JSON but no JSON-RPC message, so the
# SDK hands it on as a validation failure. The marker carries the answer's code, words and id.
_REFUSED = '{{"aptix": {message}, "code": {code}, "id": {request_id}}}\n'


async def capped_lines(source: BinaryIO, limit: int) -> AsyncIterator[str]:
    """The lines of ``source``, each read with at most ``limit`` bytes held in memory."""
    while True:
        line = await anyio.to_thread.run_sync(source.readline, limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):  # drop the rest of it, a piece at a time
                line = await anyio.to_thread.run_sync(source.readline, limit + 1)
            yield _TOO_LONG
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            yield _NOT_UTF8
            continue
        found = problem(text)
        if found is not None and found.code != types.PARSE_ERROR:
            yield _REFUSED.format(
                message=json.dumps(found.message),
                code=found.code,
                request_id=json.dumps(found.request_id),
            )
        else:
            yield text


def _error_for(exc: Exception, limit: int | None) -> types.JSONRPCError:
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    inputs = [e.get("input") for e in errors]
    # A refused message stands in as {"aptix": <the words of its answer>, "code": .., "id": ..}.
    marks = [i for i in inputs if isinstance(i, dict) and isinstance(i.get("aptix"), str)]
    code, message = types.INVALID_REQUEST, marks[0]["aptix"] if marks else INVALID
    request_id = None
    if marks:
        code, request_id = marks[0].get("code", code), marks[0].get("id")
    if _TOO_LONG in inputs:
        code, message = types.PARSE_ERROR, f"Parse error: the line is longer than {limit} bytes."
    elif _NOT_UTF8 in inputs:
        code, message = types.PARSE_ERROR, NOT_UTF8
    elif any(e.get("type") == "json_invalid" for e in errors):
        code, message = types.PARSE_ERROR, "Parse error: the line is not JSON."
    error = types.ErrorData(code=code, message=message)
    # The id of a message that could not be read is unknown: JSON-RPC 2.0 says null.
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


@asynccontextmanager
async def answering_bad_lines(
    read: ReadStream[SessionMessage | Exception],
    write: WriteStream[SessionMessage],
    limit: int | None = None,
) -> AsyncIterator[ReadStream[SessionMessage | Exception]]:
    """A read stream for the server where unreadable lines are answered instead of passed on.

    The SDK's stdio reader hands the server an exception for such a line, which the server
    drops: a client waiting for its answer would wait forever.
    """
    forward, received = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def relay() -> None:
        async with forward:
            async for item in read:
                if isinstance(item, Exception):
                    await write.send(SessionMessage(_error_for(item, limit)))
                else:
                    await forward.send(item)

    async with anyio.create_task_group() as group, received:
        group.start_soon(relay)
        yield received
        group.cancel_scope.cancel()
