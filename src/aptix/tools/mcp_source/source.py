"""``McpToolSource``: the configured MCP servers, their sessions and their registered tools."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Iterable, Mapping

from aptix.errors import ConfigurationError, ToolContractError
from aptix.logger import AdminLogger, LogLevel
from aptix.settings_mcp import McpServerConfig, local_tool_name, tool_prefix
from aptix.tool_names import matches
from aptix.tools.mcp_source.connection import McpCallError, McpConnection
from aptix.tools.mcp_source.tool import make_mcp_tool
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
        self._registered: dict[str, list[str]] = {}
        self._retries: list[asyncio.Task[None]] = []
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
        names = list(self.connections)
        await asyncio.gather(*(self._register(n, registry) for n in names))
        for name in names:
            if name not in self._registered:
                self._retries.append(
                    asyncio.create_task(self._retry(name, registry), name=f"aptix-mcp-retry-{name}")
                )

    async def aclose(self) -> None:
        """Stop the retries and close every session."""
        for task in self._retries:
            task.cancel()
        for task in self._retries:
            with contextlib.suppress(BaseException):
                await task
        await asyncio.gather(*(c.aclose() for c in self.connections.values()))

    async def _retry(self, name: str, registry: AgentToolRegistry) -> None:
        for attempt in range(10_000):
            await asyncio.sleep(_RETRY_SECONDS[min(attempt, len(_RETRY_SECONDS) - 1)])
            if await self._register(name, registry):
                return

    async def _register(self, name: str, registry: AgentToolRegistry) -> bool:
        connection = self.connections[name]
        try:
            remote_tools = await connection.list_tools()
        except McpCallError:
            return False  # already reported by the connection, naming the server
        prefix = tool_prefix(name, connection.config)
        registered: list[str] = []
        for remote in remote_tools:
            local = local_tool_name(prefix, remote.name)
            problem = _name_problem(local)
            if remote.execution is not None and remote.execution.task_support == "required":
                # It answers only as an MCP task, which Aptix does not run: every call fails.
                problem = "it runs only as an MCP task (execution.taskSupport 'required')"
            if problem is None:
                try:
                    registry.register(
                        make_mcp_tool(
                            connection, remote, local, connection.config.approval, self._warn
                        )
                    )
                except (ValueError, ToolContractError) as exc:
                    problem = str(exc)
            if problem is None:
                registered.append(local)
                continue
            self._logger.add_custom_event(
                LogLevel.WARNING,
                _TAG,
                f"MCP server '{name}': tool '{remote.name}' is left out: {problem}",
                ("Server", name),
            )
        self._registered[name] = registered
        if self.on_timeout is not None:
            for local in registered:
                self.on_timeout(local, connection.config.timeout_seconds + 5)
        return True

    def _warn(self, message: str) -> None:
        self._logger.add_custom_event(LogLevel.WARNING, _TAG, message)


def _name_problem(local: str) -> str | None:
    if len(local) > _MAX_NAME:
        return f"its name '{local}' is longer than {_MAX_NAME} characters; set a shorter prefix"
    if not re.fullmatch(r"[a-zA-Z0-9_-]+", local):
        return f"its name '{local}' has characters outside [a-zA-Z0-9_-]"
    return None
