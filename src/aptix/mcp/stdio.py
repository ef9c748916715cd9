"""Stdio transport: one JSON-RPC message a line each way, and every line answered.

A line longer than the limit (``APTIX_MAX_BODY_BYTES``, as for an HTTP body) is read and
dropped piece by piece, never held whole, and answered with -32700 like unparsable JSON, as is
a line that is not UTF-8 (never read with its bytes replaced). When the pieces show a request
(a JSON object with ``method``) with one top-level ``id``, the long line is answered -32600
with that id instead, so that the client's waiting call gets the refusal (:class:`TooLong`).
A message the SDK would drop unanswered (an ``id`` that is neither a string nor an integer) is
answered -32600, as is JSON nested too deeply to be read, and a request with a lone surrogate
escape is answered -32602 with its own id, as over HTTP (:mod:`aptix.mcp.messages`).

A line that is a JSON array is a batch. In a session that negotiated 2025-03-26 each of its
messages goes to the server as if sent alone, and their answers are written together, as one
array, once the last is in; in any other session it is refused in words that say so. The
SDK's stdio transport reads and writes one message a line, so the lines are ours.

Every request read is answered exactly once. At most :data:`IN_FLIGHT` requests are in
progress at once (read, not yet answered on the wire): past that the next line is read when one
is answered, so a client that stops reading stdout stops the server reading stdin instead of
having every answer kept in memory. A request whose id is still waiting for an answer is
refused (-32600): the two answers could not be told apart. At the end of input the requests
already read are still answered: those still running after ``drain_seconds`` are answered
-32000 (:data:`INPUT_ENDED`) and then the server stops. A client that closes its end of stdout
stops the answers being written (one line on stderr); the server stops at the end of input.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import BinaryIO, NamedTuple

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
    plain_id,
    problem,
)
from aptix.nul import find_surrogate

__all__ = ["DRAIN_SECONDS", "INPUT_ENDED", "IN_FLIGHT", "TooLong", "capped_lines", "line_streams"]

logger = logging.getLogger(__name__)

#: How many requests may be in progress at once (read, their answers not yet on the wire).
IN_FLIGHT = 32
#: How long the requests read before the end of input may still take, unless told: the
#: default time limit of a tool call (``APTIX_TOOL_TIMEOUT_SECONDS``) and 5 s more.
DRAIN_SECONDS = 35.0
#: The answer to a request still running that long after the end of input (-32000, the code
#: the SDK's clients read as a closed connection).
INPUT_ENDED = (
    "Connection closed: the input ended and this request was not answered in time; it may have run."
)
# Stands for a line that is not UTF-8: answered -32700 with its own words.
_NOT_UTF8 = "\x00aptix: not UTF-8"
_NOT_A_JSON_LINE = "Parse error: the line is not JSON."
# How long the answers already given may take to reach the wire once the server stopped.
_DRAIN_SECONDS = 5
# How much of an over-long line is scanned for its id: past it, it is answered with none.
_SCAN_BYTES = 64 * 1024 * 1024
_SCAN_TOKENS = 1_000_000
# Deeper than the SDK's parser reads: such a message is not read for its id either.
_SCAN_DEPTH = 256
# A top-level key longer than this (as written, escapes and all) is neither "id" nor "method".
_KEY_BYTES = 64
# An id written longer than this is not read back.
_ID_BYTES = 4096
_OUTSIDE = re.compile(rb'["{}\[\],:]')
# The rest of a string's text up to its closing quote (or the end of the piece), escapes and all.
_STRING_TEXT = re.compile(rb"(?:[^\"\\]++|\\.)*+", re.DOTALL)


class TooLong(NamedTuple):
    """Stands for a line longer than the limit, with the request's id when it could be read."""

    request_id: str | int | None = None


async def capped_lines(source: BinaryIO, limit: int) -> AsyncIterator[str | TooLong]:
    """The lines of ``source``, each read with at most ``limit`` bytes held in memory."""
    while True:
        line = await anyio.to_thread.run_sync(source.readline, limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            scan = _IdScan()
            scan.feed(line)
            while line and not line.endswith(b"\n"):  # drop the rest of it, a piece at a time
                line = await anyio.to_thread.run_sync(source.readline, limit + 1)
                scan.feed(line)
            yield TooLong(scan.request_id())
            continue
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError:
            yield _NOT_UTF8


@asynccontextmanager
async def line_streams(
    lines: AsyncIterable[str | TooLong],
    wire: anyio.AsyncFile[str],
    limit: int,
    drain_seconds: float = DRAIN_SECONDS,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """The server's read and write streams over ``lines`` and ``wire``, for ``Server.run``.

    At the end of ``lines`` the requests read are given ``drain_seconds`` to be answered.
    """
    to_server, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    wired = _Wire(wire, limit, to_server)
    drained = anyio.Event()

    async def reading() -> None:
        # The end of input closes the server's read stream once every request read is
        # answered: the server then stops.
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async with to_server:
                async for line in lines:
                    await wired.read(line)
                await wired.input_ended(drain_seconds)

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
        #: Each request sent to the server and not yet answered, by its id as JSON: with the
        #: batch and place its answer goes to, or None for a request sent alone.
        self._running: dict[str, tuple[_Batch, int] | None] = {}
        #: Taken by each request in ``_running``: the reader waits for one to be free.
        self._slots = anyio.Semaphore(IN_FLIGHT)
        self._settled = anyio.Event()  # set whenever a request leaves ``_running``
        #: The requests answered at the end of input: the server's own late answers are dropped.
        self._given_up: set[str] = set()
        self._gone = False  # the client closed its end of stdout

    async def read(self, line: str | TooLong) -> None:
        """Pass on what one line says, or answer it at once when it cannot go to the server."""
        if isinstance(line, TooLong):
            words = f"the line is longer than {self._limit} bytes."
            if line.request_id is None:
                await self._write(json.dumps(error(types.PARSE_ERROR, f"Parse error: {words}")))
            else:
                words = f"Invalid Request: {words[:-1]} (APTIX_MAX_BODY_BYTES); it was not read."
                refusal = error(types.INVALID_REQUEST, words, line.request_id)
                await self._write(json.dumps(refusal))
        elif line == _NOT_UTF8:
            await self._write(json.dumps(error(types.PARSE_ERROR, NOT_UTF8)))
        elif (parts := batch(line)) is not None:
            await self._read_batch(parts)
        elif (found := problem(line)) is not None:
            words = _NOT_A_JSON_LINE if found.message == NOT_JSON else found.message
            await self._write(json.dumps(error(found.code, words, found.request_id)))
        else:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            metadata = None
            if isinstance(message, types.JSONRPCRequest):
                key = json.dumps(message.id)
                if key in self._running:  # its answer could not be told from the other's
                    await self._write(json.dumps(_reused(key, message.id)))
                    return
                if message.method == "initialize":
                    self._initialize_ids.add(key)
                metadata = await self._start(key, None)
            await self._to_server.send(SessionMessage(message, metadata=metadata))

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
            if key in self._given_up:  # answered at the end of input already
                return
            if key in self._running:
                await self._settle(key, text)
                return
        await self._write(text)

    async def input_ended(self, drain_seconds: float) -> None:
        """Wait up to ``drain_seconds`` for the requests read to be answered; answer the rest."""
        with anyio.move_on_after(drain_seconds):
            while self._running:
                await self._settled.wait()
                self._settled = anyio.Event()
        if not self._running:
            return
        logger.warning(
            "the input ended; %d request(s) still running after %gs are answered "
            "as not answered in time.",
            len(self._running),
            drain_seconds,
        )
        for key in list(self._running):
            self._given_up.add(key)  # the server's own answer, should it come, is dropped
            refusal = error(types.CONNECTION_CLOSED, INPUT_ENDED, json.loads(key))
            await self._settle(key, json.dumps(refusal))

    async def _start(self, key: str, place: tuple[_Batch, int] | None) -> ServerMessageMetadata:
        """Count request ``key`` as running (waiting for a free slot), and how it settles."""
        await self._slots.acquire()
        self._running[key] = place
        # A cancelled request is never answered: it must not keep its slot, nor its batch.
        return ServerMessageMetadata(on_request_unanswered=partial(self._settle, key))

    async def _read_batch(self, parts: list[object]) -> None:
        if self._version != BATCH_VERSION:
            refusal = error(types.INVALID_REQUEST, batch_refused(self._version))
            await self._write(json.dumps(refusal))
            return
        waiting = _Batch(len(parts))
        messages: list[tuple[SessionMessage, str | None, int]] = []
        keys: set[str] = set()
        for index, part in enumerate(parts):
            text, found = batch_part(part)
            if found is not None:
                waiting.answers[index] = json.dumps(error(*found))
                continue
            message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
            key = None
            if isinstance(message, types.JSONRPCRequest):
                key = json.dumps(message.id)
                if key in self._running or key in keys:
                    waiting.answers[index] = json.dumps(_reused(key, message.id))
                    continue
                keys.add(key)
                waiting.waiting += 1
            messages.append((SessionMessage(message), key, index))
        # Every request is counted before any is sent: an early answer cannot end the batch.
        for sending, key, index in messages:
            if key is not None:
                sending.metadata = await self._start(key, (waiting, index))
            await self._to_server.send(sending)
        waiting.sent = True
        await self._write_if_answered(waiting)

    async def _settle(self, key: str, answer: str | None = None) -> None:
        """Write or keep the answer (None: a cancelled request's) to the running request ``key``."""
        if key not in self._running:
            return
        place = self._running.pop(key)
        try:
            if place is None:
                if answer is not None:
                    await self._write(answer)
                return
            waiting, index = place
            waiting.answers[index] = answer
            waiting.waiting -= 1
            await self._write_if_answered(waiting)
        finally:
            # Freed once the answer is on the wire: a client not reading stops the reading.
            self._slots.release()
            self._settled.set()

    async def _write_if_answered(self, waiting: _Batch) -> None:
        if waiting.sent and not waiting.waiting and (text := waiting.text()) is not None:
            await self._write(text)

    async def _write(self, text: str) -> None:
        async with self._lock:  # a batch's answer and the server's are written whole
            if self._gone:
                return
            try:
                await self._wire.write(text + "\n")
                await self._wire.flush()
            except OSError as exc:  # BrokenPipeError: the client closed its end
                self._gone = True
                logger.warning(
                    "stdout was closed by the client (%s); answers are dropped "
                    "until the input ends.",
                    type(exc).__name__,
                )


def _reused(key: str, request_id: str | int) -> dict[str, object]:
    """The refusal of a request whose id is still waiting for an answer."""
    words = f"Invalid Request: the id {key} is waiting for an answer already."
    return error(types.INVALID_REQUEST, words, request_id)


class _IdScan:
    """The top-level ``id`` of a request written over many pieces, none of them kept.

    Only depth, string state and the short top-level keys are tracked; the scan gives up
    (no id) on anything that is not one JSON object, or past a bounded cost.
    """

    def __init__(self) -> None:
        self._failed = False
        self._started = False
        self._closed = False  # the top-level object ended
        self._depth = 0
        self._string = False
        self._escaped = False  # the previous piece ended inside a string's escape
        self._expect_key = False
        self._key: bytearray | None = None  # a top-level key being read
        self._key_is_id = False  # the last top-level key read was "id"
        self._value: bytearray | None = None  # the value of a top-level "id" being read
        self._value_unusable = False
        self._method = False
        self._ids: list[bytes | None] = []
        self._bytes = 0
        self._tokens = 0

    def feed(self, piece: bytes) -> None:
        """Scan the next piece of the line."""
        if self._failed or not piece:
            return
        self._bytes += len(piece)
        if self._bytes > _SCAN_BYTES:
            self._failed = True
            return
        if not self._started:
            if not (stripped := piece.lstrip()):
                return
            if stripped[:1] != b"{":
                self._failed = True
                return
            self._started = True
        key_from = 0 if self._key is not None else None
        value_from = 0 if self._value is not None else None
        pos = 0
        if self._escaped:
            self._escaped = False
            pos = 1
        while pos < len(piece) and not self._failed:
            if self._string:
                text = _STRING_TEXT.match(piece, pos)
                assert text is not None  # it matches the empty text too
                pos = text.end()
                if pos == len(piece):
                    break
                if piece[pos : pos + 1] == b"\\":  # the piece ends inside an escape
                    self._escaped = True
                    break
                self._string = False
                if key_from is not None:
                    self._end_key(piece[key_from:pos])
                    key_from = None
                pos += 1
                continue
            match = _OUTSIDE.search(piece, pos)
            if match is None:
                break
            self._tokens += 1
            if self._tokens > _SCAN_TOKENS:
                self._failed = True
                return
            token, pos = match.group(), match.end()
            if self._closed:
                self._failed = True  # more than one value on the line
                return
            if token == b'"':
                self._string = True
                if self._depth == 1 and self._expect_key:
                    self._key, key_from = bytearray(), pos
            elif token in (b"{", b"["):
                self._depth += 1
                if self._depth > _SCAN_DEPTH:
                    self._failed = True
                self._expect_key = self._depth == 1
                if self._value is not None and self._depth == 2:
                    self._value_unusable = True  # an object or array is no id
            elif token in (b"}", b"]"):
                self._depth -= 1
                if self._depth == 0:
                    self._end_value(
                        piece[value_from : match.start()] if value_from is not None else b""
                    )
                    value_from = None
                    self._closed = True
            elif self._depth == 1 and token == b",":
                self._end_value(
                    piece[value_from : match.start()] if value_from is not None else b""
                )
                value_from = None
                self._expect_key = True
            elif self._depth == 1 and token == b":" and self._key_is_id:
                self._key_is_id = False
                self._value, value_from = bytearray(), pos
        if key_from is not None and self._key is not None:
            self._key += piece[key_from : key_from + _KEY_BYTES + 1 - len(self._key)]
        if value_from is not None and self._value is not None:
            self._value += piece[value_from : value_from + _ID_BYTES + 1 - len(self._value)]

    def request_id(self) -> str | int | None:
        """The request's one top-level ``id``; None when there is none to be sure of."""
        self._end_value(b"")  # a line that ended inside the id's value
        if self._failed or not self._method or len(self._ids) != 1 or self._ids[0] is None:
            return None
        try:
            value = json.loads(self._ids[0])
        except (ValueError, RecursionError):
            return None
        if not plain_id(value) or find_surrogate(value) is not None:
            return None
        return value if isinstance(value, str | int) else None

    def _end_key(self, tail: bytes) -> None:
        assert self._key is not None
        written = bytes(self._key) + tail
        self._key = None
        self._expect_key = False
        name = None
        if len(written) <= _KEY_BYTES:
            with suppress(ValueError):
                name = json.loads(b'"' + written + b'"')
        self._key_is_id = name == "id"
        self._method = self._method or name == "method"

    def _end_value(self, tail: bytes) -> None:
        if self._value is None:
            return
        written = bytes(self._value) + tail
        usable = not self._value_unusable and len(written) <= _ID_BYTES
        self._ids.append(written if usable else None)
        self._value = None
        self._value_unusable = False
