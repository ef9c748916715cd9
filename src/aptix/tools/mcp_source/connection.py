"""``McpConnection``: one long-lived client session to one MCP server, reopened after failures.

The transport and ``ClientSession`` are entered and left by one background task (the SDK's
task groups must be), which holds them open until :meth:`McpConnection.aclose` or until the
server's side of the transport closes. Calls come from any task and are bounded by the
server's ``timeout_seconds``. A call that times out (the SDK cancels it on the server) or that
the server answers with an error fails alone: the session and the other calls go on, unless
the server then leaves a ``ping`` unanswered too (it is stuck, and restarted). Only a
broken transport (closed stream, broken pipe, failed reconnect) fails the calls in flight and
leaves the session to be closed in the background and reopened by the next call. A server
that is down is reported once (a warning naming it) until it answers again. A reply the SDK
cannot read fails the call it answers at once (:func:`~.replies.answer_in`); one that answers
no call is reported once per session. A tool the SDK cannot read is left out of its listing
alone (:class:`~.listing.Listings`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from aptix.logger import AdminLogger, LogLevel
from aptix.settings_mcp import McpServerConfig
from aptix.tools.mcp_source.attempts import Attempt, NotingAttempts, sending
from aptix.tools.mcp_source.listing import Listings, ToolListing
from aptix.tools.mcp_source.replies import (
    connection_lost,
    quiet_sdk_parse_records,
    server_words,
    unreadable,
)
from aptix.tools.mcp_source.streams import Noted, Watched

__all__ = ["McpCallError", "McpConnection", "McpFailure"]

_TAG = "[McpToolSource_Server]"

#: The least time a server gets to start and answer ``initialize``.
CONNECT_SECONDS = 30.0

#: Seconds spent opening a call's session from which a timeout says how many they were.
_CONNECTING_TOLD = 0.5

#: How long a server gets to answer the ``ping`` sent when one of its calls timed out.
PING_SECONDS = 5.0


#: Why a call failed: ``timeout`` (no answer within the limit; the request was cancelled),
#: ``lost`` (the connection ended after the request was sent: it may have taken effect),
#: ``not_delivered`` (the server never got it) or ``error`` (the server answered an error).
McpFailure = Literal["timeout", "lost", "not_delivered", "error"]

#: Errors that mean the transport itself is broken, not one request.
_TRANSPORT_ERRORS = (
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
    OSError,
    BaseExceptionGroup,
)


class McpCallError(Exception):
    """A call that could not be completed; the message names the server and says why."""

    def __init__(self, message: str, kind: McpFailure = "not_delivered") -> None:
        super().__init__(message)
        self.kind: McpFailure = kind


@dataclass(eq=False)
class _Live:
    """One open session and what its transport noticed."""

    session: ClientSession | None = None
    #: The server's side closed the transport (the process exited): nothing more is delivered.
    ended: bool = False
    #: A streamable-HTTP server refused the session id (it restarted): requests are not run.
    stale: bool = False
    #: The ``ping`` asking whether the server still answers after a call timed out (calls
    #: that time out meanwhile share it); it restarts a server that leaves it unanswered.
    probe: asyncio.Task[bool] | None = None
    #: A reply that answers no call was reported (once per session: a server may send many).
    unreadable_reported: bool = False
    #: The session's ``tools/list`` requests, whose answers are read tool by tool.
    listings: Listings = field(default_factory=Listings)


class McpConnection:
    """The session to one configured MCP server, shared by all its tools."""

    def __init__(self, name: str, config: McpServerConfig, logger: AdminLogger) -> None:
        self.name = name
        self.config = config
        self._logger = logger
        self._live: _Live | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._closing: set[asyncio.Task[Any]] = set()
        self._reported: str | None = None
        self._pending: asyncio.Future[_Live] | None = None
        self._started = 0.0
        #: Why the server is unusable now, or None while it is connected.
        self.problem: str | None = "not connected yet"
        #: Told when the server sends ``notifications/tools/list_changed``.
        self.on_tools_changed: Callable[[], None] | None = None
        quiet_sdk_parse_records()

    @property
    def _connect_limit(self) -> float:
        # Starting a server (an interpreter, npx) takes seconds on a busy machine; a short
        # call timeout must not make a healthy server look down.
        return max(self.config.timeout_seconds, CONNECT_SECONDS)

    @property
    def connected(self) -> bool:
        """True while a session is open."""
        live = self._live
        return (
            live is not None and not live.ended and self._task is not None and not self._task.done()
        )

    async def list_tools(self) -> ToolListing:
        """Every tool the server offers (all pages); :class:`McpCallError` when unreachable.

        A tool the SDK cannot read is left out of its page, and named in ``left_out``.
        """
        live = await self._ready()
        session = _session(live)
        tools: list[types.Tool] = []
        cursor: str | None = None
        live.listings.left_out.clear()
        try:
            async with asyncio.timeout(self.config.timeout_seconds):
                while True:
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        return ToolListing(tools, dict(live.listings.left_out))
        except Exception as exc:
            raise self._failed("listing its tools", exc, live) from None

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> types.CallToolResult:
        """Call ``tool`` (``meta`` goes in ``params._meta``).

        :class:`McpCallError`, with its ``kind``, when the server is down, hangs or misbehaves.
        """
        limit = self.config.timeout_seconds
        doing = f"calling '{tool}'"
        # One deadline for the whole call, reconnecting included: a call after a failed
        # one took the reconnect plus the full limit.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        for attempt in (1, 2):
            live: _Live | None = None
            held: asyncio.Task[bool] | None = None
            ended = False
            sent = Attempt()
            try:
                async with asyncio.timeout_at(deadline):
                    ready = await self._ready()
                    while ready.probe is not None:
                        # A call timed out and the server is being asked whether it still
                        # answers: a stuck one is not sent more, its restart is waited for.
                        held = ready.probe
                        await asyncio.shield(held)
                        held = None
                        ready = await self._ready()
                    live = ready
                    connecting = limit - (deadline - loop.time())
                    ended = live.ended  # already closed: this request cannot be delivered
                    with sending(sent):
                        return await _session(live).call_tool(
                            tool, arguments, read_timeout_seconds=limit, meta=cast(Any, meta)
                        )
            except McpCallError:
                raise
            except Exception as exc:
                if held is not None and isinstance(exc, TimeoutError):
                    # The session was open: the limit ended while the ping was waited for.
                    raise self._held_back(doing) from None
                if live is None:  # still connecting: the attempt goes on for the next call
                    raise self._not_yet_connected(exc) from None
                kind = _kind(exc, ended, sent)
                if attempt == 1 and live.stale and kind == "error":
                    # The server restarted and forgot the session: it refused the request
                    # unrun, so it is sent once more on a fresh session.
                    self._drop(live)
                    continue
                if sent.refused is not None and sent.cut is None:
                    # The call's own request was refused: the server was down, nothing was
                    # delivered. Once it was sent, a later refusal (of the SDK's GET resuming
                    # the cut answer stream) leaves the call lost, as the cut does.
                    raise self._failed(doing, sent.refused, live) from None
                raise self._call_failed(doing, exc, live, kind, connecting) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close the session and stop a stdio server's process."""
        async with self._lock:
            await self._teardown()
        while self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def _ready(self) -> _Live:
        """The open session; a connection attempt is shared by the calls that wait for it.

        The attempt runs in the background: a caller whose own deadline ends first leaves
        it running, and the next call joins it rather than starting over (a server that
        takes longer to start than one call's limit still gets connected).
        """
        async with self._lock:
            if self._live is not None and self.connected:
                return self._live
            if self._pending is None or self._task is None or self._task.done():
                await self._teardown()
                self._start()
            pending, started = self._pending, self._started
        assert pending is not None
        remaining = self._connect_limit - (asyncio.get_running_loop().time() - started)
        try:
            async with asyncio.timeout(max(remaining, 0.0)):
                live = await asyncio.shield(pending)
        except Exception as exc:
            async with self._lock:
                if self._pending is pending:
                    self._pending = None
                    self._detach()
            raise self._down("connecting", exc, self._connect_limit) from None
        async with self._lock:
            if self._pending is pending:
                self._pending = None
                self._live = live
                if self._reported is not None:
                    self._logger.add_custom_event(
                        LogLevel.INFO, _TAG, f"MCP server '{self.name}' is connected again."
                    )
                self._reported = None
                self.problem = None
        return live

    async def _on_message(self, message: types.ServerNotification | Exception) -> None:
        """The session's handler of what the server sends unasked (the SDK's ``message_handler``).

        It runs on the session's reader: it only tells, never waits on the server.
        """
        if isinstance(message, types.ToolListChangedNotification) and self.on_tools_changed:
            self.on_tools_changed()

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

    async def _hold(self, ready: asyncio.Future[_Live], stop: asyncio.Event) -> None:
        """Open the transport and session, hand them over, keep both open until told.

        The server's side closing the transport (a stdio server that exited) tells too: the
        session is dropped at once, so the next call opens a fresh one instead of failing.
        """
        live = _Live()

        def ended() -> None:
            live.ended = True
            stop.set()

        def stray(exc: Exception) -> None:
            if not live.unreadable_reported:
                live.unreadable_reported = True
                self._logger.add_custom_event(
                    LogLevel.WARNING,
                    _TAG,
                    f"MCP server '{self.name}' sent a reply that answers no call and is "
                    f"ignored (reported once per session): {unreadable(exc)}",
                    ("Server", self.name),
                )

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(live))
                session = await stack.enter_async_context(
                    ClientSession(
                        Watched(read, ended, stray, live.listings),
                        Noted(write, live.listings),
                        read_timeout_seconds=self._connect_limit,
                        message_handler=self._on_message,
                    )
                )
                await session.initialize()
                live.listings.version = session.protocol_version or live.listings.version
                live.session = session
                ready.set_result(live)
                await stop.wait()
                if live.ended and self._live is live:
                    self._drop(live)  # closing a stdio server takes seconds: not on the way
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(
                    exc if isinstance(exc, Exception) else ConnectionError("connection cancelled")
                )
            if not isinstance(exc, Exception):
                raise
        finally:
            live.ended = True
            if self._live is live:
                self._live = None  # it ended (the server exited): the next call reopens

    @asynccontextmanager
    async def _transport(self, live: _Live) -> AsyncIterator[Any]:
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

        async def note(response: httpx2.Response) -> None:
            # A server that restarted answers 404 (or 400) to the session id it forgot.
            request = response.request
            if (
                request.method == "POST"
                and response.status_code in (400, 404)
                and "mcp-session-id" in request.headers
            ):
                live.stale = True

        async with (
            httpx2.AsyncClient(
                headers=config.headers,
                timeout=timeout,
                event_hooks={"response": [note]},
                transport=NotingAttempts(httpx2.AsyncHTTPTransport()),
            ) as client,
            streamable_http_client(config.url, http_client=client) as streams,
        ):
            yield streams

    async def _teardown(self) -> None:
        task, self._task = self._task, None
        self._live = None
        self._pending = None
        if task is not None:
            await _stop_holder(task, self._stop)

    def _detach(self) -> None:
        """Close the current session in the background; the next call opens a fresh one.

        Closing a stdio server can take seconds (the SDK waits for the process to exit), which
        the call that found it broken must not wait for.
        """
        task, self._task = self._task, None
        self._live = None
        if task is None:
            return
        closing = asyncio.create_task(
            _stop_holder(task, self._stop), name=f"aptix-mcp-close-{self.name}"
        )
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    def _drop(self, live: _Live) -> None:
        """Close ``live`` in the background unless a newer session replaced it already."""
        if self._live is live:
            self._detach()

    def _failed(
        self, doing: str, exc: Exception, live: _Live, kind: McpFailure = "not_delivered"
    ) -> McpCallError:
        """Drop the session the call used (the next call reopens it); report the outage."""
        self._drop(live)
        return self._down(doing, exc, kind=kind)

    def _call_failed(
        self,
        doing: str,
        exc: Exception,
        live: _Live,
        kind: McpFailure,
        connecting: float = 0.0,
    ) -> McpCallError:
        """Describe a failed call; only a broken transport, or a stuck server, costs the session.

        ``connecting``: the seconds of the call's limit spent opening its session.
        """
        if kind in ("lost", "not_delivered"):
            return self._failed(doing, exc, live, kind)
        problem = f"MCP server '{self.name}' failed while {doing}: "
        problem += _describe(exc, self.config.timeout_seconds)
        if kind == "timeout" and connecting >= _CONNECTING_TOLD:
            # A (re)start took most of the limit: the server had only the rest to answer.
            problem += f", {connecting:.1f} of them spent connecting"
        if kind == "timeout":  # one call, not an outage: the other calls go on
            self._logger.add_custom_event(
                LogLevel.WARNING,
                _TAG,
                f"{problem}; the request was cancelled.",
                ("Server", self.name),
            )
            self._ask_if_stuck(live)
        return McpCallError(problem, kind)

    def _ask_if_stuck(self, live: _Live) -> None:
        """Ping the server in the background; restart it when the ping goes unanswered.

        A healthy server busy with a slow tool answers and keeps its session and its other
        calls; a stuck one (a blocked loop, a clogged pipe) does not, and only a fresh session
        gets it back. One ping at a time per session: calls that time out meanwhile share it.
        """
        if live.probe is not None or live.ended or self._live is not live:
            return
        live.probe = asyncio.create_task(
            self._probe(live, _session(live)), name=f"aptix-mcp-ping-{self.name}"
        )
        self._closing.add(live.probe)  # closing the connection waits for it
        live.probe.add_done_callback(self._closing.discard)

    async def _probe(self, live: _Live, session: ClientSession) -> bool:
        try:
            answered = await _ping(session)
        finally:
            live.probe = None  # the next timeout asks again
        if not answered and self._live is live:
            self._drop(live)
            self._logger.add_custom_event(
                LogLevel.WARNING,
                _TAG,
                f"MCP server '{self.name}' did not answer a ping within {PING_SECONDS:g} "
                "seconds after a call timed out: it is taken as stuck and restarted.",
                ("Server", self.name),
            )
        return answered

    def _held_back(self, doing: str) -> McpCallError:
        """The call's limit ended while it waited for the ping after a timeout (never sent).

        Not an outage: the session is open and the ping decides whether it is restarted, so
        the server is not reported down; a warning tells this one call, as a timeout does.
        """
        problem = (
            f"MCP server '{self.name}' failed while {doing}: not sent within the call's limit "
            f"of {self.config.timeout_seconds:g} seconds, waiting for the server to answer a "
            "ping after an earlier call timed out (it is restarted if it leaves the ping "
            f"unanswered for {PING_SECONDS:g} seconds)"
        )
        self._logger.add_custom_event(LogLevel.WARNING, _TAG, f"{problem}.", ("Server", self.name))
        return McpCallError(problem, "not_delivered")

    def _not_yet_connected(self, exc: Exception) -> McpCallError:
        """The call's limit ended while its session was still being opened (never sent).

        A server restarted or reconnected by the call takes longer than one call's limit
        (an interpreter's start-up): saying "no answer" would read as a hung tool.
        """
        if not isinstance(exc, TimeoutError):
            return self._down("connecting", exc)
        reason = (
            f"not connected within the call's limit of {self.config.timeout_seconds:g} seconds "
            "(still connecting in the background; the next call joins it)"
        )
        return self._down("connecting", exc, reason=reason)

    def _down(
        self,
        doing: str,
        exc: Exception,
        limit: float | None = None,
        kind: McpFailure = "not_delivered",
        reason: str | None = None,
    ) -> McpCallError:
        reason = reason or _describe(exc, limit or self.config.timeout_seconds)
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
        return McpCallError(self.problem, kind)


async def _ping(session: ClientSession) -> bool:
    """True when the server answers a ``ping`` (an error answer too) in :data:`PING_SECONDS`."""
    try:
        async with asyncio.timeout(PING_SECONDS):
            await session.send_ping()
    except TimeoutError:
        return False
    except MCPError as exc:
        return exc.code != types.REQUEST_TIMEOUT  # any other answer: it is listening
    except Exception:
        return False  # the transport broke: the session is no use either
    return True


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


def _session(live: _Live) -> ClientSession:
    assert live.session is not None  # set before the session is handed over
    return live.session


def _kind(exc: Exception, ended: bool, sent: Attempt) -> McpFailure:
    """What a call's failure says about the request: see :data:`McpFailure`."""
    if isinstance(exc, TimeoutError) or _code(exc) == types.REQUEST_TIMEOUT:
        return "timeout"
    if sent.cut is not None:  # its HTTP connection broke after it was open
        return "lost"
    if connection_lost(exc) or isinstance(exc, _TRANSPORT_ERRORS):
        return "not_delivered" if ended else "lost"
    return "error"


def _code(exc: BaseException) -> int | None:
    return exc.code if isinstance(exc, MCPError) else None


def _describe(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, TimeoutError) or _code(exc) == types.REQUEST_TIMEOUT:
        return f"no answer within {timeout:g} seconds"
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0], timeout)
    # A server's words can be of any size: what reaches the model and the turn is cut.
    text = server_words(str(exc).strip().splitlines()[0]) if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
