"""Stdio transport: one JSON-RPC message a line each way, and every line answered.

A line longer than the limit (``APTIX_MAX_BODY_BYTES``, as for an HTTP body) is read and
dropped piece by piece, never held whole, and answered with -32700 like unparsable JSON, as is
a line that is not UTF-8 (never read with its bytes replaced). A message the SDK would drop
unanswered (an ``id`` that is neither a string nor an integer) is answered -32600, as is JSON
nested too deeply to be read, and a request with a lone surrogate escape is answered -32602
with its own id, as over HTTP (:mod:`aptix.mcp.messages`).

A line that is a JSON array is a batch. In a session that negotiated 2025-03-26 each of its
messages goes to the server as if sent alone, and their answers are written together, as one
array, once the last is in; in any other session it is refused in words that say so. The
SDK's stdio transport reads and writes one message a line, so the lines are ours.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import BinaryIO

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from aptix.mcp.messages import (
    BATCH_VERSION,
    NOT_JSON,
    NOT_UTF8,
    batch,
    batch_part,
    batch_refused,
    error,
    problem,
)

__all__ = ["capped_lines", "line_streams"]

# Stands for a line that was too long: answered -32700, as a line that is not JSON.
_TOO_LONG = "\x00aptix: line too long"
# Stands for a line that is not UTF-8: answered -32700 with its own words.
_NOT_UTF8 = "\x00aptix: not UTF-8"
_NOT_A_JSON_LINE = "Parse error: the line is not JSON."
# How long the answers already given may take to reach the wire once the server stopped.
_DRAIN_SECONDS = 5


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
            yield line.decode("utf-8")
        except UnicodeDecodeError:
            yield _NOT_UTF8


@asynccontextmanager
async def line_streams(
    lines: AsyncIterable[str], wire: anyio.AsyncFile[str], limit: int
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The server's read and write streams over ``lines`` and ``wire``, for ``Server.run``."""
    to_server, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    wired = _Wire(wire, limit, to_server)
    drained = anyio.Event()

    async def reading() -> None:
        # The end of input closes the server's read stream: the server then stops.
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async with to_server:
                async for line in lines:
                    await wired.read(line)

    async def writing() -> None:
        async with from_server:
            async for message in from_server:
                await wired.answer(message)
        drained.set()

    async with anyio.create_task_group() as group:
        group.start_soon(reading)
        group.start_soon(writing)
        try:
            yield read, write
        finally:
            write.close()  # what the server already sent is still written
            with anyio.move_on_after(_DRAIN_SECONDS):
                await drained.wait()
            group.cancel_scope.cancel()


class _Batch:
    """The answers to one batch, in its order, written together once the last is in."""

    def __init__(self, size: int) -> None:
        self.answers: list[str | None] = [None] * size
        self.waiting = 0
        #: False until every message of the batch went to the server (none can finish it early).
        self.sent = False

    def text(self) -> str | None:
        """The batch's answer; None when it has none (notifications alone, or cancelled)."""
        given = [answer for answer in self.answers if answer is not None]
        return f"[{', '.join(given)}]" if given else None


class _Wire:
    """Both ends of the line protocol: what a line says, and what the server answers."""

    def __init__(
        self,
        wire: anyio.AsyncFile[str],
        limit: int,
        to_server: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        self._wire = wire
        self._limit = limit
        self._to_server = to_server
        self._lock = anyio.Lock()
        #: The protocol version the session negotiated (None until initialize is answered).
        self._version: str | None = None
        self._initialize_ids: set[str] = set()
        #: Each request of a batch still waiting for its answer, by its id as JSON.
        self._pending: dict[str, tuple[_Batch, int]] = {}

    async def read(self, line: str) -> None:
        """Pass on what one line says, or answer it at once when it cannot go to the server."""
        if line == _TOO_LONG:
            words = f"Parse error: the line is longer than {self._limit} bytes."
            await self._write(json.dumps(error(types.PARSE_ERROR, words)))
        elif line == _NOT_UTF8:
            await self._write(json.dumps(error(types.PARSE_ERROR, NOT_UTF8)))
        elif (parts := batch(line)) is not None:
            await self._read_batch(parts)
        elif (found := problem(line)) is not None:
            words = _NOT_A_JSON_LINE if found.message == NOT_JSON else found.message
            await self._write(json.dumps(error(found.code, words, found.request_id)))
        else:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
                self._initialize_ids.add(json.dumps(message.id))
            await self._to_server.send(SessionMessage(message))

    async def answer(self, message: SessionMessage) -> None:
        """Write one message of the server's, or keep it for the batch it answers."""
        sent = message.message
        text = sent.model_dump_json(by_alias=True, exclude_unset=True)
        if isinstance(sent, types.JSONRPCResponse | types.JSONRPCError):
            key = json.dumps(sent.id)
            if key in self._initialize_ids and isinstance(sent, types.JSONRPCResponse):
                self._initialize_ids.discard(key)
                version = sent.result.get("protocolVersion")
                self._version = version if isinstance(version, str) else self._version
            if key in self._pending:
                await self._settle(key, text)
                return
        await self._write(text)

    async def _read_batch(self, parts: list[object]) -> None:
        if self._version != BATCH_VERSION:
            refusal = error(types.INVALID_REQUEST, batch_refused(self._version))
            await self._write(json.dumps(refusal))
            return
        waiting = _Batch(len(parts))
        messages: list[SessionMessage] = []
        # Every request is waited for before any is sent: an early answer cannot end the batch.
        for index, part in enumerate(parts):
            text, found = batch_part(part)
            if found is not None:
                waiting.answers[index] = json.dumps(error(*found))
                continue
            message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            metadata = None
            if isinstance(message, types.JSONRPCRequest):
                key = json.dumps(message.id)
                if key in self._pending:  # its answer could not be told from the other's
                    words = f"Invalid Request: the id {key} is waiting for an answer already."
                    reused = error(types.INVALID_REQUEST, words, message.id)
                    waiting.answers[index] = json.dumps(reused)
                    continue
                self._pending[key] = (waiting, index)
                waiting.waiting += 1
                # A cancelled request is never answered: the batch must not wait for it.
                metadata = ServerMessageMetadata(on_request_unanswered=partial(self._settle, key))
            messages.append(SessionMessage(message, metadata=metadata))
        for sending in messages:
            await self._to_server.send(sending)
        waiting.sent = True
        await self._write_if_answered(waiting)

    async def _settle(self, key: str, answer: str | None = None) -> None:
        """Keep the answer (None: a cancelled request's) to the batch request ``key``."""
        if (pending := self._pending.pop(key, None)) is None:
            return
        waiting, index = pending
        waiting.answers[index] = answer
        waiting.waiting -= 1
        await self._write_if_answered(waiting)

    async def _write_if_answered(self, waiting: _Batch) -> None:
        if waiting.sent and not waiting.waiting and (text := waiting.text()) is not None:
            await self._write(text)

    async def _write(self, text: str) -> None:
        async with self._lock:  # a batch's answer and the server's are written whole
            await self._wire.write(text + "\n")
            await self._wire.flush()
