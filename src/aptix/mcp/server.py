"""``build_mcp_server``: every server-final tool as an MCP tool, run by the same executor."""

from __future__ import annotations

import json
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager, suppress
from typing import IO, Any, NamedTuple

import anyio
from mcp import types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from aptix import __version__
from aptix.api.outage import OutageLog, RefusalLog
from aptix.db.outage import (
    DATABASE_REFUSED,
    DATABASE_UNAVAILABLE,
    DatabaseUnavailable,
    database_refusal,
    is_database_outage,
    refusal_in,
)
from aptix.errors import ConfigurationError, NotFoundError
from aptix.nul import NUL_REFUSED, SURROGATE_REFUSED, find_nul, find_surrogate
from aptix.quotas import PAYER, Payer
from aptix.results import InvokeResult
from aptix.runtime import Runtime
from aptix.settings import AptixSettings
from aptix.tools.base import AgentTool
from aptix.tools.mcp_source.tool import McpTool

__all__ = ["SESSION_META_KEY", "CallsInFlight", "build_mcp_server", "run_stdio"]

#: The key of ``params._meta`` that selects one of the caller's sessions (docs/mcp.md).
SESSION_META_KEY = "aptix/sessionId"

#: The answer (-32602) to ``tools/list`` with a cursor: Aptix lists every tool on one page.
INVALID_CURSOR = (
    "Invalid params: unknown cursor; Aptix lists every tool on one page and never sends "
    "nextCursor, so list without a cursor."
)

#: The answer to a call of a registered tool that is not served because it is client-final.
NOT_SERVED = (
    "The tool '{name}' is client-final, so it is not served over MCP: an MCP client cannot post "
    "its result back. A model turn (POST /v1/agent/execute) hands it to the client."
)
#: The same for a tool that runs only once a person approved it (an MCP server's, say).
APPROVAL_NOT_SERVED = (
    "The tool '{name}' runs only after a person approves it, so it is not served over MCP: an "
    "MCP call cannot carry that approval. A model turn (POST /v1/agent/execute) asks the "
    "client for it."
)

#: Where a transport puts its own mark of one HTTP exchange in the ASGI scope, so that
#: the exchange's end (the client went away) cancels the calls it carried.
EXCHANGE_SCOPE_KEY = "aptix.mcp.exchange"

#: Where a transport puts the client's ``Mcp-Session-Id`` in the ASGI scope: the one thing
#: that tells two clients of one key apart, whose JSON-RPC ids are alike (both count from 1).
SESSION_SCOPE_KEY = "aptix.mcp.session"

#: Where the call handler marks the ASGI scope of a call the client cancelled: the transport
#: then sends no JSON-RPC answer for it (MCP: a cancelled request is not answered).
CANCELLED_SCOPE_KEY = "aptix.mcp.cancelled"

#: How long a cancel that found no call of its id is kept for the call to come: over HTTP the
#: call and its cancel travel on connections of their own, and the cancel can win the race.
EARLY_CANCEL_SECONDS = 30.0
#: How many such cancels are kept for one client session, and for all the sessions of one
#: caller (a caller's own oldest make room: the session id is the client's word, so one
#: caller's cancels must never evict another's).
EARLY_CANCELS_PER_SESSION = 64
EARLY_CANCELS_PER_CALLER = 1024
#: The longest ``requestId`` (a string's characters, an integer's digits) and client session id
#: a cancel is kept for: both are the client's own text, and what a caller holds stays small.
EARLY_CANCEL_ID_CHARS = 128


class RequestKey(NamedTuple):
    """A request id in one client session of one caller, as ``notifications/cancelled`` names it."""

    caller: tuple[str, str, str]
    session: str
    #: The id as JSON: ``1`` and ``"1"`` are two ids.
    request_id: str


class CallsInFlight:
    """The running ``tools/call`` handlers, so a transport can cancel the ones it carried.

    A cancel by request id that finds no call running under it is kept a short while
    (:data:`EARLY_CANCEL_SECONDS`, at most :data:`EARLY_CANCELS_PER_SESSION` for one client
    session and :data:`EARLY_CANCELS_PER_CALLER` for one caller): the call it names may not
    have got this far yet, and it is then cancelled before it runs. An exchange that
    :meth:`end` ended cancels every call that starts under it until :meth:`release`.
    ``clock`` tells the time (seconds, monotonic).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._scopes: dict[Hashable, set[anyio.CancelScope]] = {}
        #: Keys (a transport's exchanges) under which no call is to run any more.
        self._ended: set[Hashable] = set()
        self._clock = clock
        #: Early cancels, oldest first, with the time each is kept until.
        self._early: OrderedDict[RequestKey, float] = OrderedDict()
        self._early_per_session: dict[tuple[tuple[str, str, str], str], int] = {}
        #: The same cancels by caller, oldest first.
        self._early_by_caller: dict[tuple[str, str, str], OrderedDict[RequestKey, None]] = {}

    @contextmanager
    def running(self, *keys: Hashable) -> Iterator[anyio.CancelScope]:
        """Run the block in a cancel scope that :meth:`cancel` reaches by any of ``keys``.

        The scope is cancelled from the start when a cancel for one of ``keys`` came first:
        the block checks ``cancel_called`` before doing anything.
        """
        scope = anyio.CancelScope()
        if any(self._take_early(key) for key in keys) or not self._ended.isdisjoint(keys):
            scope.cancel()
        for key in keys:
            self._scopes.setdefault(key, set()).add(scope)
        try:
            with scope:
                yield scope
        finally:
            for key in keys:
                scopes = self._scopes.get(key)
                if scopes is not None:
                    scopes.discard(scope)
                    if not scopes:
                        del self._scopes[key]

    def cancel(self, key: Hashable, *, keep: bool = False) -> None:
        """Cancel every call running under ``key``.

        ``keep``: when none runs under a :class:`RequestKey`, the cancel is kept for the call
        to come (an id is never reused within a session, so a late one is kept harmlessly).
        """
        scopes = list(self._scopes.get(key, ()))
        for scope in scopes:
            scope.cancel()
        if keep and not scopes and isinstance(key, RequestKey):
            self._keep_early(key)

    def end(self, key: Hashable) -> None:
        """Cancel every call running under ``key``, and every one starting under it from now on.

        A transport ends its exchange when the client goes away: a call still on its way to
        its tool (quota, workflow sync) would otherwise start after the client had gone.
        """
        self._ended.add(key)
        self.cancel(key)

    def release(self, key: Hashable) -> None:
        """Forget that ``key`` was ended: its exchange is over, and no call starts under it."""
        self._ended.discard(key)

    def _keep_early(self, key: RequestKey) -> None:
        now = self._clock()
        self._forget_expired(now)
        session = (key.caller, key.session)
        if key in self._early:
            self._early.move_to_end(key)
            self._early_by_caller[key.caller].move_to_end(key)
        elif self._early_per_session.get(session, 0) >= EARLY_CANCELS_PER_SESSION:
            return  # a client with that many calls still to come is not kept further
        else:
            mine = self._early_by_caller.get(key.caller)
            if mine is not None and len(mine) >= EARLY_CANCELS_PER_CALLER:
                self._forget(next(iter(mine)))  # the caller's own oldest, never another's
            self._early_per_session[session] = self._early_per_session.get(session, 0) + 1
            self._early_by_caller.setdefault(key.caller, OrderedDict())[key] = None
        self._early[key] = now + EARLY_CANCEL_SECONDS

    def _take_early(self, key: Hashable) -> bool:
        """Whether a cancel for ``key`` came before its call (it is then used up)."""
        if not isinstance(key, RequestKey) or not self._early:
            return False
        self._forget_expired(self._clock())
        if key not in self._early:
            return False
        self._forget(key)
        return True

    def _forget_expired(self, now: float) -> None:
        while self._early and next(iter(self._early.values())) <= now:
            self._forget(next(iter(self._early)))

    def _forget(self, key: RequestKey) -> None:
        del self._early[key]
        mine = self._early_by_caller[key.caller]
        del mine[key]
        if not mine:
            del self._early_by_caller[key.caller]
        session = (key.caller, key.session)
        left = self._early_per_session[session] - 1
        if left:
            self._early_per_session[session] = left
        else:
            del self._early_per_session[session]


def request_key(caller: tuple[str, str, str], session: str, request_id: object) -> RequestKey:
    """The key of a request id in one client session, as its ``notifications/cancelled`` names it.

    A request id is unique only within one client's session, never across the clients of
    one key (or of the keyless local caller), so a call is reachable by its id only together
    with the session the client sent it in.
    """
    return RequestKey(caller, session, json.dumps(request_id))


def build_mcp_server(
    runtime: Runtime,
    *,
    org: str = "local",
    user: str = "local",
    role: str = "admin",
    in_flight: CallsInFlight | None = None,
) -> Server[Any]:
    """An MCP server exposing the runtime's server-final tools.

    Calls run as (``org``, ``user``, ``role``), the local admin by default, or as the caller
    whose API key authenticated the HTTP request. Client-final tools are left out: an MCP
    client cannot post their results back. A session is selected by ``_meta`` key
    :data:`SESSION_META_KEY`, or by a ``sessionId`` argument (any casing) when the tool has no
    argument of that name; it must belong to the caller (org and user), exactly as over HTTP.
    Calls run in ``in_flight``, where a transport can cancel them.
    """
    from aptix.api.auth import Caller, caller_from_token

    registry = runtime.registry
    outages = OutageLog(tag="[Mcp_Database__Unavailable]", answer="answering tool errors")
    refusals = RefusalLog(tag="[Mcp_Database__Refused]", answer="answering tool errors")
    default_caller = Caller(org, user, role)

    def tools() -> list[types.Tool]:
        listed = []
        for schema in registry.schemas():
            tool_cls = registry.get_tool_type(schema["name"])
            if tool_cls is None or not registry.server_final(schema["name"]):
                continue
            listed.append(_mcp_tool(schema, tool_cls))
        return listed

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        if getattr(params, "cursor", None) is not None:
            # Every tool is on the one page, so no cursor was ever handed out: answering a
            # stale or foreign one with the first page again would look like a real page.
            raise MCPError(types.INVALID_PARAMS, INVALID_CURSOR)
        return types.ListToolsResult(tools=tools())

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = caller_from_token(get_access_token()) or default_caller
        if (refusal := await runtime.quotas.request(caller.key_id)) is not None:
            return _error(refusal.message)  # a limit over MCP is a tool error
        # The caller pays for model calls the tool makes (the match arbiter), as over HTTP.
        PAYER.set(Payer(caller.org, caller.key_id, caller.user))
        # Serve what other processes published (stdio has no HTTP middleware to do it).
        await runtime.workflows.sync.check()
        arguments = dict(params.arguments or {})
        if (nul := find_nul(arguments)) is not None:
            return _error(f"{NUL_REFUSED} (found in '{nul}').")
        if (lone := find_surrogate(arguments)) is not None:
            return _error(f"{SURROGATE_REFUSED} (found in '{lone}').")
        tool_cls = registry.get_tool_type(params.name)
        if tool_cls is None:
            return _error(f"Unknown tool '{params.name}'.")
        if not registry.server_final(params.name):
            # Registered, but not listed here: say why rather than that it does not exist.
            unserved = APPROVAL_NOT_SERVED if registry.asks_approval(params.name) else NOT_SERVED
            return _error(unserved.format(name=tool_cls.TOOL_NAME))
        session_id = _session_id(params, arguments, tool_cls)
        if isinstance(session_id, _Refused):
            return _error(session_id.message)
        who = (caller.org, caller.user, caller.key_id)
        scope = getattr(getattr(ctx, "request", None), "scope", {})
        keys: list[Hashable] = []
        if (session := scope.get(SESSION_SCOPE_KEY)) is not None:
            keys.append(request_key(who, session, getattr(ctx, "request_id", None)))
        if (exchange := scope.get(EXCHANGE_SCOPE_KEY)) is not None:
            keys.append(exchange)
        try:
            ran: InvokeResult[str] | None = None
            with (in_flight or CallsInFlight()).running(*keys) as running:
                if not running.cancel_called:  # a cancel that came first: never run
                    context = await runtime.session_context(
                        org=caller.org,
                        user=caller.user,
                        role=caller.role,
                        session_id=session_id,
                    )
                    ran = await runtime.executor.invoke(params.name, json.dumps(arguments), context)
            if ran is None:
                # The transport sends no answer for it (MCP); this one is for the record.
                scope[CANCELLED_SCOPE_KEY] = True
                return _error("The call was cancelled by the client.")
            outcome = ran
        except NotFoundError as exc:
            return _error(str(exc))
        except Exception as exc:
            refused = database_refusal(exc)
            if refused is None and not is_database_outage(exc):
                raise
            unavailable: BaseException | None = exc
        else:
            refused = refusal_in(outcome.error_message)
            unavailable = (
                DatabaseUnavailable(DATABASE_UNAVAILABLE)
                if outcome.error_message == DATABASE_UNAVAILABLE
                else None
            )
        if refused is not None:
            refusals.refused(refused, f"tools/call {params.name}")
            return _error(DATABASE_REFUSED.format(reason=refused))
        if unavailable is not None:
            outages.failed(unavailable, f"tools/call {params.name}")
            return _error(DATABASE_UNAVAILABLE)
        if outcome.result is None:
            return _error(outcome.error_message or "The tool call failed.")
        if issubclass(tool_cls, McpTool):
            # Its listing carries the upstream output schema: the upstream result follows it.
            return tool_cls.mcp_result(outcome.result)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.result)],
            structuredContent=_structured(outcome.result),
        )

    return Server(
        "aptix",
        version=__version__,
        instructions="Aptix tools. Each tool's description says when to call it.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


#: Documented in docs/mcp.md: every tool without an argument of that name takes it.
SESSION_ID_PROPERTY = {
    "type": "string",
    "description": "Optional: the id of one of your Aptix sessions to run the tool in "
    "(its mode and active workflow apply).",
}


class _Refused:
    def __init__(self, message: str) -> None:
        self.message = message


def _is_session_key(name: str) -> bool:
    """``sessionId`` in any casing: ``SessionId`` and ``session_id`` too."""
    return name.replace("_", "").casefold() == "sessionid"


def _owns_session_argument(properties: dict[str, Any]) -> bool:
    return any(_is_session_key(name) for name in properties)


def _session_id(
    params: types.CallToolRequestParams, arguments: dict[str, Any], tool_cls: type[AgentTool]
) -> str | _Refused | None:
    """The session a call selects; a ``sessionId`` argument is taken out of ``arguments``.

    A tool with an argument of that name keeps it: the selector is then only in ``_meta``.
    """
    given = [(params.meta or {}).get(SESSION_META_KEY)]
    if not _owns_session_argument(tool_cls.schema()["parameters"].get("properties", {})):
        given += [arguments.pop(name) for name in list(arguments) if _is_session_key(name)]
    chosen = [value for value in given if value is not None]
    if not chosen:
        return None
    value = chosen[0]
    if any(other != value for other in chosen):
        return _Refused("Two different session ids were given; send one.")
    return value if isinstance(value, str) else _Refused("The session id must be a string.")


def _mcp_tool(schema: dict[str, Any], tool_cls: type[AgentTool]) -> types.Tool:
    """The MCP listing of one tool: input schema with ``sessionId``, annotations, output."""
    params = schema["parameters"]
    properties = dict(params.get("properties", {}))
    if not _owns_session_argument(properties):
        properties["sessionId"] = SESSION_ID_PROPERTY
    hints = dict(tool_cls.TOOL_ANNOTATIONS or {})
    title = hints.get("title")
    return types.Tool(
        name=schema["name"],
        title=title if isinstance(title, str) else None,
        description=f"{schema['description']}\n\n{tool_cls.TOOL_USAGE_METADATA}",
        input_schema={**params, "properties": properties},
        output_schema=tool_cls.TOOL_OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations.model_validate(hints) if hints else None,
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], isError=True
    )


def _structured(text: str) -> Any:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


async def run_stdio(settings: AptixSettings | None = None) -> None:
    """Open the runtime and serve MCP over stdin/stdout until the client disconnects."""
    from aptix.mcp.stdio import capped_lines, line_streams
    from aptix.runtime import open_runtime

    with _stdout_kept_for_the_wire() as wire:
        async with open_runtime(settings) as runtime:
            server = build_mcp_server(runtime)
            limit = runtime.settings.max_body_bytes
            # The SDK reads whole lines, however long, and one message a line: ours are
            # capped, and a batch's answers go out together (aptix.mcp.stdio).
            lines = capped_lines(sys.stdin.buffer, limit)
            # At the end of input a request read may still run as long as a tool call may.
            drain = runtime.settings.tool_timeout_seconds + 5
            streams = line_streams(lines, anyio.wrap_file(wire), limit, drain)
            async with streams as (read, write):
                await server.run(read, write, server.create_initialization_options())


@contextmanager
def _stdout_kept_for_the_wire() -> Iterator[IO[str]]:
    """The process's stdout for JSON-RPC only; fd 1 points at stderr until the block ends.

    Tool modules, plugins and MCP servers that print while the runtime opens (before the
    SDK would divert stdout) or later would otherwise put lines that are not JSON-RPC on
    the client's stream; what they print reaches stderr inert, as under every command.
    """
    from aptix.cli.foreign_output import stdout_kept_for_results

    with stdout_kept_for_results() as wire_fd:
        if wire_fd is None:
            raise ConfigurationError("aptix mcp needs an open stdout and stderr.")
        wire = open(wire_fd, "w", encoding="utf-8", newline="\n", closefd=False)  # noqa: SIM115
        try:
            yield wire
        finally:
            with suppress(OSError):  # the client closed its end
                wire.close()  # its descriptor stays open (closefd=False) until restored
