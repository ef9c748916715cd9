"""``McpConnection``: one long-lived client session to one MCP server, reopened after failures.

The transport and ``ClientSession`` are entered and left by one background task (the SDK's
task groups must be), which holds them open until :meth:`McpConnection.aclose`. Calls come
from any task and are bounded by the server's ``timeout_seconds``; a call that finds the
session broken, or that timed out, fails at once and leaves the session to be closed in the
background and reopened by the next call. A server that is down is reported once (a warning
naming it) until it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, cast

import httpx2
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from aptix.logger import AdminLogger, LogLevel
from aptix.settings_mcp import McpServerConfig

__all__ = ["McpCallError", "McpConnection"]

_TAG = "[McpToolSource_Server]"

#: The least time a server gets to start and answer ``initialize``.
CONNECT_SECONDS = 30.0


class McpCallError(Exception):
    """A call that could not be completed; the message names the server and says why."""


class McpConnection:
    """The session to one configured MCP server, shared by all its tools."""

    def __init__(self, name: str, config: McpServerConfig, logger: AdminLogger) -> None:
        self.name = name
        self.config = config
        self._logger = logger
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._closing: set[asyncio.Task[None]] = set()
        self._reported: str | None = None
        self._pending: asyncio.Future[ClientSession] | None = None
        self._started = 0.0
        #: Why the server is unusable now, or None while it is connected.
        self.problem: str | None = "not connected yet"

    @property
    def _connect_limit(self) -> float:
        # Starting a server (an interpreter, npx) takes seconds on a busy machine; a short
        # call timeout must not make a healthy server look down.
        return max(self.config.timeout_seconds, CONNECT_SECONDS)

    @property
    def connected(self) -> bool:
        """True while a session is open."""
        return self._session is not None and self._task is not None and not self._task.done()

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server offers (all pages); :class:`McpCallError` when unreachable."""
        session = await self._ready()
        tools: list[types.Tool] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(self.config.timeout_seconds):
                while True:
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        return tools
        except Exception as exc:
            raise self._failed("listing its tools", exc, session) from None

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> types.CallToolResult:
        """Call ``tool`` (``meta`` goes in ``params._meta``).

        :class:`McpCallError` when the server is down, hangs or misbehaves.
        """
        limit = self.config.timeout_seconds
        session: ClientSession | None = None
        try:
            # One deadline for the whole call, reconnecting included: a call after a failed
            # one took the reconnect plus the full limit.
            async with asyncio.timeout(limit):
                session = await self._ready()
                return await session.call_tool(
                    tool,
                    arguments,
                    read_timeout_seconds=limit,
                    meta=cast(Any, meta),
                )
        except McpCallError:
            raise
        except Exception as exc:
            if session is None:  # still connecting: the attempt goes on for the next call
                raise self._down(f"calling '{tool}'", exc) from None
            raise self._failed(f"calling '{tool}'", exc, session) from None

    async def aclose(self) -> None:
        """Close the session and stop a stdio server's process."""
        async with self._lock:
            await self._teardown()
        while self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def _ready(self) -> ClientSession:
        """The open session; a connection attempt is shared by the calls that wait for it.

        The attempt runs in the background: a caller whose own deadline ends first leaves
        it running, and the next call joins it rather than starting over (a server that
        takes longer to start than one call's limit still gets connected).
        """
        async with self._lock:
            if self._session is not None and self.connected:
                return self._session
            if self._pending is None or self._task is None or self._task.done():
                await self._teardown()
                self._start()
            pending, started = self._pending, self._started
        assert pending is not None
        remaining = self._connect_limit - (asyncio.get_running_loop().time() - started)
        try:
            async with asyncio.timeout(max(remaining, 0.0)):
                session = await asyncio.shield(pending)
        except Exception as exc:
            async with self._lock:
                if self._pending is pending:
                    self._pending = None
                    self._detach()
            raise self._down("connecting", exc, self._connect_limit) from None
        async with self._lock:
            if self._pending is pending:
                self._pending = None
                self._session = session
                if self._reported is not None:
                    self._logger.add_custom_event(
                        LogLevel.INFO, _TAG, f"MCP server '{self.name}' is connected again."
                    )
                self._reported = None
                self.problem = None
        return session

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self._pending = loop.create_future()
        # Read its failure even when every caller gave up waiting (no "never retrieved").
        self._pending.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._started = loop.time()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(
            self._hold(self._pending, self._stop), name=f"aptix-mcp-{self.name}"
        )

    async def _hold(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        """Open the transport and session, hand the session over, keep both open until told."""
        session: ClientSession | None = None
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(
                    ClientSession(read, write, read_timeout_seconds=self._connect_limit)
                )
                await session.initialize()
                ready.set_result(session)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(
                    exc if isinstance(exc, Exception) else ConnectionError("connection cancelled")
                )
            if not isinstance(exc, Exception):
                raise
        finally:
            if session is not None and self._session is session:
                self._session = None  # it ended (the server exited): the next call reopens

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        config = self.config
        if config.command:
            params = StdioServerParameters(
                command=config.command, args=config.args, env=config.env, cwd=config.cwd
            )
            # The server's stderr is its own log, not ours: keep it off the terminal.
            # (Opening the null device does not block.)
            with open(os.devnull, "w", encoding="utf-8") as errlog:  # noqa: ASYNC230
                async with stdio_client(params, errlog=errlog) as streams:
                    yield streams
            return
        assert config.url is not None
        timeout = httpx2.Timeout(config.timeout_seconds, read=max(config.timeout_seconds, 300))
        async with (
            httpx2.AsyncClient(headers=config.headers, timeout=timeout) as client,
            streamable_http_client(config.url, http_client=client) as streams,
        ):
            yield streams

    async def _teardown(self) -> None:
        task, self._task = self._task, None
        self._session = None
        self._pending = None
        if task is not None:
            await _stop_holder(task, self._stop)

    def _detach(self) -> None:
        """Close the current session in the background; the next call opens a fresh one.

        Closing a stdio server can take seconds (the SDK waits for the process to exit), which
        the call that found it broken must not wait for.
        """
        task, self._task = self._task, None
        self._session = None
        if task is None:
            return
        closing = asyncio.create_task(
            _stop_holder(task, self._stop), name=f"aptix-mcp-close-{self.name}"
        )
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    def _failed(self, doing: str, exc: Exception, session: ClientSession) -> McpCallError:
        """Drop the session the call used (the next call reopens it); describe the failure."""
        if self._session is session:  # not one opened since by another call
            self._detach()
        return self._down(doing, exc)

    def _down(self, doing: str, exc: Exception, limit: float | None = None) -> McpCallError:
        reason = _describe(exc, limit or self.config.timeout_seconds)
        self.problem = f"MCP server '{self.name}' failed while {doing}: {reason}"
        if self._reported is None:  # one warning per outage, not one per call
            self._logger.add_custom_event(
                LogLevel.WARNING,
                _TAG,
                self.problem,
                ("Server", self.name),
                ("Transport", self.config.transport),
            )
        self._reported = self.problem
        return McpCallError(self.problem)


async def _stop_holder(task: asyncio.Task[None], stop: asyncio.Event) -> None:
    """Tell a holder task to close its session; cancel it when it does not end in 5 s."""
    stop.set()
    try:
        async with asyncio.timeout(5):
            await asyncio.shield(task)
    except (TimeoutError, Exception):
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


def _describe(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g} seconds"
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0], timeout)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
