"""``McpToolSource``: the configured MCP servers, their sessions and their registered tools."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import re
from collections.abc import Callable, Iterable, Mapping

from mcp import types

from aptix.errors import ConfigurationError, ToolContractError
from aptix.logger import AdminLogger, LogLevel
from aptix.settings_mcp import McpServerConfig, local_tool_name, tool_prefix
from aptix.tool_names import matches
from aptix.tools.base import AgentTool
from aptix.tools.mcp_source.connection import McpCallError, McpConnection
from aptix.tools.mcp_source.tool import McpTool, make_mcp_tool
from aptix.tools.registry import AgentToolRegistry

__all__ = ["McpToolSource"]

_TAG = "[McpToolSource_Register]"
_MAX_NAME = 64  # the longest function name OpenAI-style APIs accept
_RETRY_SECONDS = (1.0, 5.0, 30.0, 60.0)
_PREFIX_HINT = (
    'give the server a prefix of its own: `prefix = "..."` in its [mcp_servers.NAME] '
    "table or its APTIX_MCP_SERVERS entry"
)


class McpToolSource:
    """Connects to every enabled server, registers its tools, and retries the ones down."""

    def __init__(self, servers: Mapping[str, McpServerConfig], logger: AdminLogger) -> None:
        self._logger = logger
        self.connections = {
            name: McpConnection(name, config, logger)
            for name, config in servers.items()
            if config.enabled
        }
        #: Per server, its registered tools (local name -> the listing it was made from), and
        #: its last listing (to warn about a tool left out once, not on every re-listing).
        self._registered: dict[str, dict[str, types.Tool]] = {}
        self._listed: dict[str, dict[str, types.Tool]] = {}
        #: Per server, the tools its last listing held that the SDK cannot read: name -> why.
        self._unreadable: dict[str, dict[str, str]] = {}
        self._retries: list[asyncio.Task[None]] = []
        self._registry: AgentToolRegistry | None = None
        #: Servers whose tools are to be listed again, and the task doing it per server.
        self._stale: set[str] = set()
        self._relists: dict[str, asyncio.Task[None]] = {}
        #: Told each tool's executor time limit when a server's tools are registered late
        #: (it was down at start-up); the composition root points it at the executor.
        self.on_timeout: Callable[[str, float], None] | None = None

    @property
    def patterns(self) -> tuple[str, ...]:
        """``<prefix>_*`` of every enabled server: valid in modes and workflows even while down."""
        return tuple(f"{tool_prefix(n, c.config)}_*" for n, c in self.connections.items())

    def check_prefixes(self, registered: Iterable[str]) -> None:
        """Refuse a prefix whose ``<prefix>_*`` would also take tools that are not the server's.

        A pattern then names exactly the tools its server registered, in modes and workflows
        alike. ``registered``: the tools registered before the servers' (built-ins, plugins,
        tool files). :class:`ConfigurationError` naming the servers or the tools otherwise.
        """
        prefixes = {name: tool_prefix(name, c.config) for name, c in self.connections.items()}
        taken = list(registered)
        for name, prefix in prefixes.items():
            pattern = f"{prefix}_*"
            for other, theirs in prefixes.items():
                if other == name:
                    continue
                if theirs.casefold() == prefix.casefold():
                    raise ConfigurationError(
                        f"MCP servers '{name}' and '{other}' share the prefix '{prefix}': their "
                        "tool names would collide.",
                        hint=_PREFIX_HINT,
                    )
                if matches(theirs, pattern):
                    raise ConfigurationError(
                        f"MCP server '{name}': its tool names '{pattern}' would also cover the "
                        f"tools of the MCP server '{other}' (prefix '{theirs}').",
                        hint=_PREFIX_HINT,
                    )
            covered = [t for t in taken if matches(t, pattern)]
            if covered:
                shown = ", ".join(f"'{t}'" for t in covered[:5])
                raise ConfigurationError(
                    f"MCP server '{name}': its tool names '{pattern}' would also cover {shown}, "
                    "which are not its tools.",
                    hint=_PREFIX_HINT,
                )

    def tool_timeouts(self) -> dict[str, float]:
        """Executor limits for the registered tools: a little over the server's own limit.

        The server's own limit fails a call first, with a message that names the server.
        """
        return {
            tool: self.connections[server].config.timeout_seconds + 5
            for server, tools in self._registered.items()
            for tool in tools
        }

    def status(self) -> dict[str, str | None]:
        """Each server's current problem, or None when it is connected."""
        return {name: c.problem for name, c in self.connections.items()}

    async def start(self, registry: AgentToolRegistry) -> None:
        """Register every reachable server's tools; a server down is retried in the background."""
        self._registry = registry
        for name, connection in self.connections.items():
            connection.on_tools_changed = functools.partial(self._tools_changed, name)
        names = list(self.connections)
        await asyncio.gather(*(self._register(n, registry) for n in names))
        for name in names:
            if name not in self._registered:
                self._retries.append(
                    asyncio.create_task(self._retry(name, registry), name=f"aptix-mcp-retry-{name}")
                )

    async def aclose(self) -> None:
        """Stop the retries and close every session."""
        tasks = [*self._retries, *self._relists.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        await asyncio.gather(*(c.aclose() for c in self.connections.values()))

    async def _retry(self, name: str, registry: AgentToolRegistry) -> None:
        for attempt in range(10_000):
            await asyncio.sleep(_RETRY_SECONDS[min(attempt, len(_RETRY_SECONDS) - 1)])
            if await self._register(name, registry):
                return

    def _tools_changed(self, name: str) -> None:
        """List ``name``'s tools again, in the background; one listing at a time per server."""
        self._stale.add(name)
        if name in self._registered:  # else the first listing, under way, relists after it
            self._relist_soon(name)

    def _relist_soon(self, name: str) -> None:
        task = self._relists.get(name)
        if task is None or task.done():
            # A context of its own, not the one of the call whose session heard the news.
            self._relists[name] = asyncio.create_task(
                self._relist(name), name=f"aptix-mcp-relist-{name}", context=contextvars.Context()
            )

    async def _relist(self, name: str) -> None:
        assert self._registry is not None  # set by start(), before any session opens
        while name in self._stale:
            self._stale.discard(name)
            if not await self._register(name, self._registry):
                # Unreachable (already reported): its tools stay as they were until it
                # announces a change again. Not tried again at once: a server that crashes
                # at each start would be restarted in a loop.
                self._stale.discard(name)
                return

    async def _register(self, name: str, registry: AgentToolRegistry) -> bool:
        """Make the registry hold exactly ``name``'s listed tools; False when unreachable.

        Listed again (:meth:`_tools_changed`), an unchanged tool keeps its class, a changed
        one is replaced, a new one gets the same checks and approval policy as at start-up,
        and one no longer listed stops being offered. A call already running is not touched.
        """
        connection = self.connections[name]
        try:
            listing = await connection.list_tools()
        except McpCallError:
            return False  # already reported by the connection, naming the server
        remote_tools = listing.tools
        told = self._unreadable.get(name, {})
        for tool, why in listing.left_out.items():
            if told.get(tool) != why:  # told once, not per listing
                self._left_out(name, tool, why)
        self._unreadable[name] = listing.left_out
        first = name not in self._registered
        before = self._registered.get(name, {})
        listed_before = self._listed.get(name, {})
        prefix = tool_prefix(name, connection.config)
        registered: dict[str, types.Tool] = {}
        changed: list[str] = []
        listed = {local_tool_name(prefix, remote.name) for remote in remote_tools}
        gone = [local for local in before if local not in listed]
        for local in gone:
            # First: the registry compares names case-insensitively, so a tool renamed only
            # in case would be refused as the old one's twin while the old one is offered.
            registry.unregister(local)
        for remote in remote_tools:
            local = local_tool_name(prefix, remote.name)
            old = before.get(local)
            if old == remote and local not in registered:
                registered[local] = remote  # as it was: its class stays
                continue
            if old is not None and local not in registered:
                registry.unregister(local)  # changed: the new listing replaces it
            problem = self._add(connection, remote, local, registry)
            if problem is None:
                registered[local] = remote
                changed.append(local)
            elif listed_before.get(remote.name) != remote:  # told once, not per listing
                self._left_out(name, remote.name, problem)
        for local in before:
            if local in listed and local not in registered:  # changed, then left out
                registry.unregister(local)
                gone.append(local)
        self._registered[name] = registered
        self._listed[name] = {remote.name: remote for remote in remote_tools}
        if first and name in self._stale:
            # Announced while the first listing was under way: it may predate the change.
            self._relist_soon(name)
        if self.on_timeout is not None:
            for local in changed:
                self.on_timeout(local, connection.config.timeout_seconds + 5)
        if not first and (changed or gone):
            added = [local for local in changed if local not in before]
            parts = [
                f"{what} {', '.join(names)}"
                for what, names in (
                    ("added", added),
                    ("changed", [local for local in changed if local in before]),
                    ("removed", gone),
                )
                if names
            ]
            self._logger.add_custom_event(
                LogLevel.INFO,
                _TAG,
                f"MCP server '{name}' changed its tools: {'; '.join(parts)}.",
                ("Server", name),
            )
        return True

    def _add(
        self,
        connection: McpConnection,
        remote: types.Tool,
        local: str,
        registry: AgentToolRegistry,
    ) -> str | None:
        """Register ``remote`` as ``local``; why it is left out, or None."""
        problem = _name_problem(local)
        if remote.execution is not None and remote.execution.task_support == "required":
            # It answers only as an MCP task, which Aptix does not run: every call fails.
            problem = "it runs only as an MCP task (execution.taskSupport 'required')"
        if problem is not None:
            return problem
        taken = registry.get_tool_type(local)
        if taken is not None:
            # Told here, for what it is: the registry's refusal (an ERROR, with advice for a
            # Python tool module imported twice) fits a tool class, not a server's listing.
            return _collision(connection, remote, local, taken)
        try:
            registry.register(
                make_mcp_tool(connection, remote, local, connection.config.approval, self._warn)
            )
        except (ValueError, ToolContractError) as exc:
            return str(exc)
        return None

    def _left_out(self, server: str, tool: str, problem: str) -> None:
        self._logger.add_custom_event(
            LogLevel.WARNING,
            _TAG,
            f"MCP server '{server}': tool '{tool}' is left out: {problem}",
            ("Server", server),
        )

    def _warn(self, message: str) -> None:
        self._logger.add_custom_event(LogLevel.WARNING, _TAG, message)


def _collision(
    connection: McpConnection, remote: types.Tool, local: str, taken: type[AgentTool]
) -> str:
    """Why ``remote`` cannot have the name ``local``: ``taken`` holds it (in any case)."""
    if issubclass(taken, McpTool) and taken.connection is connection:
        if taken.remote_name == remote.name:
            return "the server lists it twice; the first is offered"
        return (
            f"its name '{local}' is that of the server's tool '{taken.remote_name}', offered "
            f"as '{taken.TOOL_NAME}' (tool names are compared case-insensitively, with "
            "characters outside [a-zA-Z0-9_-] replaced by '_'); the server names its tools, "
            "so to offer both, rename one in the server's own configuration if it allows that"
        )
    return (
        f"its name '{local}' is that of the tool '{taken.TOOL_NAME}' (tool names are compared "
        f"case-insensitively); {_PREFIX_HINT}"
    )


def _name_problem(local: str) -> str | None:
    if len(local) > _MAX_NAME:
        return f"its name '{local}' is longer than {_MAX_NAME} characters; set a shorter prefix"
    if not re.fullmatch(r"[a-zA-Z0-9_-]+", local):
        return f"its name '{local}' has characters outside [a-zA-Z0-9_-]"
    return None
