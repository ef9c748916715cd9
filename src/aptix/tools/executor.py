"""``AgentToolExecutor``: runs tool calls and maps outcomes onto ``AgentToolCall`` (AGN-005 §5)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator, Sequence
from dataclasses import replace
from typing import Any

from aptix.logger import AdminLogger
from aptix.results import InvokeResult
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
from aptix.tools.registry import AgentToolRegistry

__all__ = ["GENERIC_FAILURE", "AgentToolExecutor", "CallGuard"]

GENERIC_FAILURE = "The tool '{name}' failed unexpectedly. The error has been logged."

#: Decides whether a call may run in this context; returns a refusal message or None.
CallGuard = Callable[[AgentTool, AgentToolExecutionContext], str | None]


class AgentToolExecutor:
    """Resolves tool calls against a registry and runs them safely.

    Nothing escapes but cancellation: unknown tools, failures, exceptions and timeouts all
    come back as an ``AgentToolCall`` with ``error_message`` set.
    """

    def __init__(
        self,
        registry: AgentToolRegistry,
        logger: AdminLogger,
        *,
        timeout_seconds: float | None = 30.0,
        timeouts: dict[str, float] | None = None,
        guard: CallGuard | None = None,
    ) -> None:
        self._registry = registry
        self._logger = logger
        self._timeout = timeout_seconds
        self._timeouts = {k.casefold(): v for k, v in (timeouts or {}).items()}
        self._guard = guard

    @property
    def registry(self) -> AgentToolRegistry:
        """The registry calls are resolved against."""
        return self._registry

    async def execute(
        self, call: AgentToolCall, context: AgentToolExecutionContext
    ) -> AgentToolCall:
        """Run one call and return it with the execution fields filled in."""
        tool = self._registry.get_tool(call.name) if call.name else None
        if tool is None:
            return replace(call, error_message=_unknown_tool_message(call.name, self._registry))
        if self._guard is not None:
            refusal = self._guard(tool, context)
            if refusal is not None:
                return replace(call, is_server_tool=True, error_message=refusal)
        started = self._start(tool, call.arguments_json, context)
        if type(started) is _Resumed:
            started = await self._finish(tool, started, context)
        outcome = self._checked(tool, started, context)
        if outcome.errors:
            return replace(call, is_server_tool=True, error_message=outcome.error_message)
        # Built directly: dataclasses.replace costs more than the rest of the dispatch.
        return AgentToolCall(
            call.call_id,
            call.name,
            call.arguments_json,
            True,  # is_server_tool
            True,  # was_executed
            not tool.is_fully_executed_on_server,  # requires_client_execution
            outcome.result,  # result_json
        )

    async def execute_many(
        self, calls: Sequence[AgentToolCall], context: AgentToolExecutionContext
    ) -> list[AgentToolCall]:
        """Run independent calls concurrently; results come back in call order."""
        if len(calls) == 1:
            return [await self.execute(calls[0], context)]
        return list(await asyncio.gather(*(self.execute(c, context) for c in calls)))

    async def invoke(
        self, name: str, arguments_json: str, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """Run a tool outside a model turn (CLI, HTTP, MCP) and return its ``InvokeResult``."""
        done = await self.execute(AgentToolCall("direct", name, arguments_json), context)
        if done.was_executed and done.result_json is not None:
            return InvokeResult.create(done.result_json)
        return InvokeResult.from_error(done.error_message or "The tool did not run.")

    def _start(
        self, tool: AgentTool, arguments_json: str, context: AgentToolExecutionContext
    ) -> Any:
        """Run the tool up to its first suspension; most tools finish right here.

        Only a suspended tool needs a timeout scope, and setting one up costs more than the
        whole call of a small tool, so the scope is entered in :meth:`_finish` only.
        """
        try:
            coro = tool.execute(arguments_json, context)
            return _Resumed(coro, coro.send(None))
        except StopIteration as stop:
            return stop.value
        except Exception as exc:
            return self._crashed(tool, exc, context)

    async def _finish(
        self, tool: AgentTool, resumed: _Resumed, context: AgentToolExecutionContext
    ) -> Any:
        limit = self._timeouts.get(tool.TOOL_NAME.casefold(), self._timeout)
        try:
            if limit is None:
                return await resumed
            async with asyncio.timeout(limit):
                return await resumed
        except TimeoutError:
            self._logger.add_error(
                f"[{tool.TOOL_NAME}_ExecuteAsync__Timeout]",
                f"timed out after {limit:g} s",
                *context.log_pairs(),
            )
            return InvokeResult.from_error(
                f"The tool '{tool.TOOL_NAME}' timed out after {limit:g} seconds."
            )
        except Exception as exc:
            return self._crashed(tool, exc, context)

    def _crashed(
        self, tool: AgentTool, exc: Exception, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        self._logger.add_exception(
            f"[{tool.TOOL_NAME}_ExecuteAsync__Exception]", exc, *context.log_pairs()
        )
        return InvokeResult.from_error(GENERIC_FAILURE.format(name=tool.TOOL_NAME))

    def _checked(
        self, tool: AgentTool, outcome: Any, context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        if type(outcome) is InvokeResult and (
            outcome.result is None or type(outcome.result) is str
        ):
            return outcome
        self._logger.add_error(
            f"[{tool.TOOL_NAME}_ExecuteAsync__Contract]",
            f"execute() returned {type(outcome).__name__}, not InvokeResult[str]",
            *context.log_pairs(),
        )
        return InvokeResult.from_error(GENERIC_FAILURE.format(name=tool.TOOL_NAME))


class _Resumed:
    """Awaitable that continues a coroutine already advanced to its first suspension point."""

    __slots__ = ("_coro", "_pending")

    def __init__(self, coro: Coroutine[Any, Any, Any], pending: Any) -> None:
        self._coro = coro
        self._pending = pending

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, to_yield = self._coro, self._pending
        while True:
            try:
                sent = yield to_yield
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation and timeouts go to the tool first
                try:
                    to_yield = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    to_yield = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


def _unknown_tool_message(name: str, registry: AgentToolRegistry) -> str:
    if not name:
        return "The tool call has no tool name."
    known = ", ".join(registry.registered_tools) or "none"
    return f"Unknown tool '{name}'. Registered tools: {known}."
