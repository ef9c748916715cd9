"""Stdio transport helper: a line that is not JSON-RPC gets a JSON-RPC error, never silence."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from mcp import types
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["answering_bad_lines"]


def _error_for(exc: Exception) -> types.JSONRPCError:
    unparsable = isinstance(exc, ValidationError) and any(
        e.get("type") == "json_invalid" for e in exc.errors()
    )
    error = (
        types.ErrorData(code=types.PARSE_ERROR, message="Parse error: the line is not JSON.")
        if unparsable
        else types.ErrorData(
            code=types.INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 message."
        )
    )
    # The id of a message that could not be read is unknown: JSON-RPC 2.0 says null.
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)


@asynccontextmanager
async def answering_bad_lines(
    read: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage]
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
                    await write.send(SessionMessage(_error_for(item)))
                else:
                    await forward.send(item)

    async with anyio.create_task_group() as group, received:
        group.start_soon(relay)
        yield received
        group.cancel_scope.cancel()
