"""``AgentToolExecutor``: runs tool calls and maps outcomes onto ``AgentToolCall`` (AGN-005 §5)."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Literal

from aptix.blank import strip_blank
from aptix.db.outage import (
    DATABASE_REFUSED,
    DATABASE_UNAVAILABLE,
    database_refusal,
    from_aptix_database,
    is_database_outage,
)
from aptix.log_setup import log_ids
from aptix.logger import AdminLogger
from aptix.nul import storable
from aptix.results import ErrorMessage, InvokeResult, as_json_text
from aptix.tools.base import AgentTool
from aptix.tools.bulkhead import BULKHEADS
from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
from aptix.tools.registry import AgentToolRegistry
from aptix.tools.stepping import (
    ABANDONED,
    STOP_GRACE,
    Raised,
    Resumed,
    cancel_requested,
    contained,
    forget,
)

__all__ = [
    "GENERIC_FAILURE",
    "MAX_RESULT_BYTES",
    "AgentToolExecutor",
    "CallEndedError",
    "CallGuard",
    "CallOutcome",
]

GENERIC_FAILURE = "The tool '{name}' failed unexpectedly. The error has been logged."
BUILD_FAILURE = "The tool '{name}' could not be started. The error has been logged."
#: A tool that ran and failed without a message: it ran, so "did not run" would be untrue.
SILENT_FAILURE = "The tool '{name}' failed without saying why. This has been logged."
TOO_BIG = (
    "The tool '{name}' returned {size} bytes, over the limit of {limit} bytes "
    "(APTIX_TOOL_MAX_RESULT_BYTES); nothing of it was kept."
)
#: A call left running at its limit that only reads: nothing took effect, nothing to check.
ABANDONED_READ = (
    "The tool '{name}' did not finish within {limit:g} seconds and could not be stopped; "
    "it only reads, so it changed nothing."
)

#: The largest result a tool may return, in bytes of JSON text (``APTIX_TOOL_MAX_RESULT_BYTES``).
MAX_RESULT_BYTES = 1_048_576

#: Decides whether a call may run in this context; returns a refusal message or None.
CallGuard = Callable[[AgentTool, AgentToolExecutionContext], str | None]

#: How a call the executor was given ended (``AgentToolCall.outcome``). ``abandoned``: it
#: was left running at its time limit (a thread cannot be stopped) and may still complete.
#: ``unknown``: the call was sent but its answer was lost (a connection cut, a crashed
#: server), so it may have taken effect.
CallOutcome = Literal["succeeded", "failed", "timed_out", "abandoned", "unknown"]


class CallEndedError(Exception):
    """Raised by a tool whose call ended ``timed_out`` or ``unknown`` rather than ``failed``.

    The message is what the model is told; nothing is logged as a crash.
    """

    def __init__(self, message: str, outcome: CallOutcome) -> None:
        super().__init__(message)
        self.outcome: CallOutcome = outcome


class AgentToolExecutor:
    """Resolves tool calls against a registry and runs them safely.

    Nothing escapes but a cancellation of the caller: unknown tools, failures, exceptions
    (every ``BaseException``: ``SystemExit``, ``KeyboardInterrupt``, a library's own, and a
    ``CancelledError`` the tool raised itself included) and timeouts all come back as an
    ``AgentToolCall`` with ``error_message`` and ``outcome`` set. A tool whose ``execute``
    is a plain function runs in a worker thread. The time limit holds even for a tool that
    swallows cancellation or runs in a thread: it is left behind and reported ``abandoned``
    (it may still complete), while a tool that stopped at its limit is ``timed_out``. A tool
    that blocks the event loop past its limit is reported as timed out, never as a success.
    A result over ``max_result_bytes`` is a failed call: one oversized answer would
    otherwise fill the model's whole context.
    """

    def __init__(
        self,
        registry: AgentToolRegistry,
        logger: AdminLogger,
        *,
        timeout_seconds: float | None = 30.0,
        timeouts: dict[str, float] | None = None,
        guard: CallGuard | None = None,
        before_call: Callable[[AgentToolExecutionContext], Awaitable[object]] | None = None,
        max_result_bytes: int = MAX_RESULT_BYTES,
    ) -> None:
        self._registry = registry
        self._max_result_bytes = max_result_bytes
        self._logger = logger
        self._timeout = timeout_seconds
        self._timeouts = {k.casefold(): v for k, v in (timeouts or {}).items()}
        self._guard = guard
        #: Awaited with the call's context before each call is decided on: the runtime brings
        #: its workflows up to date there, which the guard and the workflow tools decide on.
        #: Aptix's database failing there fails the call unrun, as an outage under a tool does.
        self._before_call = before_call
        # Tools abandoned at their time limit: kept referenced until they really end.
        self._stray: set[asyncio.Future[Any]] = set()

    @property
    def registry(self) -> AgentToolRegistry:
        """The registry calls are resolved against."""
        return self._registry

    def with_client_tools(self, tools: Sequence[type[AgentTool]]) -> AgentToolExecutor:
        """A copy of this executor that also knows ``tools``, declared by one request's client.

        The guard still decides while a workflow is active (its permitted tools); otherwise
        the client's own tools pass, as the client offered them for this request.
        """
        other = copy.copy(self)
        other._registry = self._registry.with_client_tools(tools)
        names = {t.TOOL_NAME.casefold() for t in tools}
        inner = self._guard

        def guard(tool: AgentTool, context: AgentToolExecutionContext) -> str | None:
            if tool.TOOL_NAME.casefold() in names and not context.active_workflow_id:
                return None
            return inner(tool, context) if inner is not None else None

        other._guard = guard
        return other

    def set_timeout(self, name: str, seconds: float) -> None:
        """Give the tool ``name`` its own time limit (an MCP tool registered after start-up)."""
        self._timeouts[name.casefold()] = seconds

    @property
    def guarded(self) -> bool:
        """True when a ``CallGuard`` checks every call (the runtime's workflow guard)."""
        return self._guard is not None

    async def execute(
        self, call: AgentToolCall, context: AgentToolExecutionContext, *, approved: bool = False
    ) -> AgentToolCall:
        """Run one call and return it with the execution fields filled in.

        ``approved`` runs a call that waited for the user's approval (a tool with
        ``run_approved``, such as an MCP tool under an approval policy) for real.
        """
        try:
            tool = self._registry.get_tool(call.name) if call.name else None
        except Exception as exc:
            self._logger.add_exception(
                f"[{call.name}_Construct__Exception]", exc, *context.log_pairs()
            )
            message = BUILD_FAILURE.format(name=call.name)
            failed = replace(call, is_server_tool=True, error_message=message, outcome="failed")
            return self._not_run(failed, context)
        if tool is None:
            message = _unknown_tool_message(call.name, self._registry, context)
            return replace(call, error_message=message, outcome="failed")
        if self._before_call is not None:
            # Another process may have disabled, narrowed or removed a workflow since this
            # request or turn began, and a turn runs for minutes: decide on the catalog now.
            try:
                await self._before_call(context)
            except Exception as exc:
                if (failure := _database_failure(exc)) is None:
                    raise
                failed = replace(call, is_server_tool=True, error_message=failure, outcome="failed")
                return self._not_run(failed, context)
        if self._guard is not None:
            refusal = self._guard(tool, context)
            if refusal is not None:
                self._refused(tool, call, refusal)
                return replace(call, is_server_tool=True, error_message=refusal, outcome="failed")
        return await self._run(tool, call, context, approved=approved)

    async def _run(
        self,
        tool: AgentTool,
        call: AgentToolCall,
        context: AgentToolExecutionContext,
        *,
        approved: bool,
    ) -> AgentToolCall:
        """Run a call the guard let through, within its time limit (a traced executor's span)."""
        limit = self._timeouts.get(tool.TOOL_NAME.casefold(), self._timeout)
        if approved:
            return await self._execute_approved(tool, call, context, limit)
        clock = time.perf_counter()
        if self._registry.runs_in_thread(tool.TOOL_NAME):
            work: Any = BULKHEADS.run_tool(context.org, tool.execute, call.arguments_json, context)
            started = await self._finish(tool, work, context, limit, in_thread=True)
        else:
            started = self._start(tool, call.arguments_json, context)
            if type(started) is Resumed:
                started = await self._continue(tool, started, context, limit)
        if (
            limit is not None
            and time.perf_counter() - clock > limit
            and getattr(started, "successful", False)
        ):
            # It blocked the event loop (no await let the timer fire): not a success.
            started = self._timed_out(tool, context, limit, "blocked the event loop")
        if (
            type(started) is _Stopped
            and started.outcome == "abandoned"
            and _only_reads(tool, call.arguments_json)
        ):
            # "Check whether it took effect" is for a change (review r4 F2, round 73).
            message = ABANDONED_READ.format(name=tool.TOOL_NAME, limit=limit or 0)
            started = _Stopped(message, "abandoned")
        return self._resolved(tool, call, started, context)

    def _resolved(
        self, tool: AgentTool, call: AgentToolCall, started: Any, context: AgentToolExecutionContext
    ) -> AgentToolCall:
        if type(started) is _Stopped:
            return replace(
                call, is_server_tool=True, error_message=started.message, outcome=started.outcome
            )
        outcome = self._checked(tool, started, context)
        if outcome.errors:
            return replace(
                call,
                is_server_tool=True,
                error_message=storable(outcome.error_message or ""),  # never blank: _said
                outcome="failed",
            )
        result = as_json_text(outcome.result)
        size = len(result)
        # Text that cannot be encoded (a lone surrogate) would poison every later read.
        if not result.isascii():
            result = storable(result)
            size = len(result.encode())
        if size > self._max_result_bytes:
            limit = self._max_result_bytes
            message = TOO_BIG.format(name=tool.TOOL_NAME, size=size, limit=limit)
            return replace(call, is_server_tool=True, error_message=message, outcome="failed")
        # Built directly: dataclasses.replace costs more than the rest of the dispatch.
        return AgentToolCall(
            call.call_id,
            call.name,
            call.arguments_json,
            True,  # is_server_tool
            True,  # was_executed
            not self._registry.server_final(tool.TOOL_NAME),  # requires_client_execution
            result,  # result_json
            None,  # error_message
            "succeeded",
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
        """Run a tool outside a model turn (CLI, HTTP, MCP) and return its ``InvokeResult``.

        A call stopped by its time limit says so in its error's ``outcome``.
        """
        with log_ids(context.session_id, context.conversation_id, context.org):
            done = await self.execute(AgentToolCall("direct", name, arguments_json), context)
        if done.was_executed and done.result_json is not None:
            return InvokeResult.create(done.result_json)
        message = done.error_message or "The tool did not run."
        stopped = done.outcome if done.outcome in ("timed_out", "abandoned") else None
        return InvokeResult(errors=(ErrorMessage(message, stopped),))

    def _refused(self, tool: AgentTool, call: AgentToolCall, reason: str) -> None:
        """Called when the guard refuses ``call`` (a traced executor records an event)."""

    def _not_run(self, failed: AgentToolCall, context: AgentToolExecutionContext) -> AgentToolCall:
        """``failed``: a registered tool's call that failed here before it could run.

        The tool could not be built, or the workflows could not be read: a traced executor
        records it as a failed ``execute_tool`` span, unlike a refusal, which is an event.
        """
        return failed

    def _start(
        self, tool: AgentTool, arguments_json: str, context: AgentToolExecutionContext
    ) -> Any:
        """Run the tool up to its first suspension; most tools finish right here.

        Only a suspended tool needs a timeout scope, and setting one up costs more than the
        whole call of a small tool, so the scope is entered in :meth:`_finish` only.
        """
        try:
            coro = tool.execute(arguments_json, context)
            return Resumed(coro, coro.send(None))
        except StopIteration as stop:
            return stop.value
        except BaseException as exc:
            # No cancellation reaches a coroutine between two suspensions: a CancelledError
            # here is the tool's own, and so is anything else it raised.
            return self._crashed(tool, exc, context)

    async def _finish(
        self,
        tool: AgentTool,
        work: Awaitable[Any],
        context: AgentToolExecutionContext,
        limit: float | None,
        *,
        in_thread: bool = False,
    ) -> Any:
        # A task of its own, so the limit holds even when the tool swallows cancellation;
        # ``contained`` keeps SystemExit and the like out of the task (asyncio re-raises some
        # from the loop).
        task = asyncio.ensure_future(contained(work))
        try:
            done, _ = await asyncio.wait((task,), timeout=limit)
        except asyncio.CancelledError:
            task.cancel()
            self._abandon(task)
            raise
        if not done:
            task.cancel()
            if not in_thread:  # a coroutine usually stops at once; a thread never does
                await asyncio.wait((task,), timeout=STOP_GRACE)
            if in_thread or not task.done():
                self._abandon(task)
                return self._abandoned(tool, context, limit or 0)
            return self._timed_out(tool, context, limit or 0, "did not finish")
        if task.cancelled():
            return self._crashed(tool, RuntimeError("the tool cancelled itself"), context)
        error = task.exception()
        if error is None:
            value = task.result()
            if type(value) is Raised:
                return self._crashed(tool, value.error, context)
            return value
        return self._crashed(tool, error, context)

    async def _continue(
        self,
        tool: AgentTool,
        resumed: Resumed,
        context: AgentToolExecutionContext,
        limit: float | None,
    ) -> Any:
        """Finish, in this task, a tool begun in this task.

        Its anyio cancel scopes and context-variable tokens (httpx, the mcp SDK) belong to
        this task, so it must not be moved to another one. A tool that swallows the time
        limit's cancellation is the exception: it is left to finish in a task of its own.
        """
        try:
            if limit is None:
                return await resumed
            async with asyncio.timeout(limit) as scope:
                resumed.limit = scope
                resumed.abandon = self._abandon
                value = await resumed
        except TimeoutError:
            if getattr(type(tool), "runs_in_thread", False):
                # Its worker thread was not stopped with it: it may still take effect.
                return self._abandoned(tool, context, limit or 0)
            return self._timed_out(tool, context, limit or 0, "did not finish")
        except asyncio.CancelledError as exc:
            if cancel_requested():
                raise  # the caller's cancellation (a cancelled turn) goes on
            return self._crashed(tool, exc, context)
        except BaseException as exc:  # whatever the tool raised is its failure, not ours
            return self._crashed(tool, exc, context)
        if value is ABANDONED:
            return self._abandoned(tool, context, limit)
        return value

    async def _execute_approved(
        self,
        tool: AgentTool,
        call: AgentToolCall,
        context: AgentToolExecutionContext,
        limit: float | None,
    ) -> AgentToolCall:
        run = getattr(tool, "run_approved", None)
        if run is None:
            message = f"The tool '{tool.name}' takes no approval."
            return replace(call, error_message=message, outcome="failed")
        finished = await self._finish(tool, run(call.arguments_json, context), context, limit)
        done = self._resolved(tool, call, finished, context)
        done.requires_client_execution = False  # approved: the server's run is final
        return done

    def _abandon(self, task: asyncio.Future[Any]) -> None:
        self._stray.add(task)
        task.add_done_callback(forget(self._stray))

    def _timed_out(
        self, tool: AgentTool, context: AgentToolExecutionContext, limit: float, why: str
    ) -> _Stopped:
        self._logger.add_error(
            f"[{tool.TOOL_NAME}_ExecuteAsync__Timeout]",
            f"timed out after {limit:g} s ({why})",
            *context.log_pairs(),
        )
        if why == "blocked the event loop":
            message = (
                f"The tool '{tool.TOOL_NAME}' blocked the server past its limit of {limit:g} "
                "seconds; it finished, but its result was discarded."
            )
        else:
            message = f"The tool '{tool.TOOL_NAME}' timed out after {limit:g} seconds."
        return _Stopped(message, "timed_out")

    def _abandoned(
        self, tool: AgentTool, context: AgentToolExecutionContext, limit: float
    ) -> _Stopped:
        self._logger.add_error(
            f"[{tool.TOOL_NAME}_ExecuteAsync__Timeout]",
            f"timed out after {limit:g} s and could not be stopped (abandoned)",
            *context.log_pairs(),
        )
        return _Stopped(
            f"The tool '{tool.TOOL_NAME}' did not finish within {limit:g} seconds and could not "
            "be stopped: it may still complete. Check whether it took effect before retrying.",
            "abandoned",
        )

    def _crashed(
        self, tool: AgentTool, exc: BaseException, context: AgentToolExecutionContext
    ) -> InvokeResult[str] | _Stopped:
        if isinstance(exc, CallEndedError):  # the tool said how it ended: not a crash
            return _Stopped(storable(str(exc)), exc.outcome)
        # Aptix's own database failing under a tool (a built-in's store call): the surface
        # logs an outage or a refusal once, without a traceback. A tool's own database (a
        # SQLite file, its own engine or socket) failing is the tool's failure.
        if (failure := _database_failure(exc)) is not None:
            return InvokeResult.from_error(failure)
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
            return self._said(tool, outcome, context) if outcome.errors else outcome
        self._logger.add_error(
            f"[{tool.TOOL_NAME}_ExecuteAsync__Contract]",
            f"execute() returned {type(outcome).__name__}, not InvokeResult[str]",
            *context.log_pairs(),
        )
        return InvokeResult.from_error(GENERIC_FAILURE.format(name=tool.TOOL_NAME))

    def _said(
        self, tool: AgentTool, failed: InvokeResult[str], context: AgentToolExecutionContext
    ) -> InvokeResult[str]:
        """``failed`` with only the error messages that say something (TUL-011 §3).

        A blank message (or an entry that is no ``ErrorMessage`` of text) would reach the
        model, the stored turn and every surface as nothing, or as a fallback saying the
        tool did not run; a failure with no message left says truthfully that it said none.
        """
        said = tuple(
            e
            for e in failed.errors
            if type(e) is ErrorMessage and type(e.message) is str and strip_blank(e.message)
        )
        if len(said) == len(failed.errors):
            return failed
        self._logger.add_error(
            f"[{tool.TOOL_NAME}_ExecuteAsync__Contract]",
            f"execute() returned a failed InvokeResult with {len(failed.errors) - len(said)} "
            f"of {len(failed.errors)} error messages blank or not text",
            *context.log_pairs(),
        )
        if said:
            return InvokeResult(errors=said)
        return InvokeResult.from_error(SILENT_FAILURE.format(name=tool.TOOL_NAME))


class _Stopped:
    """A call ended by its time limit: the message for the model and the outcome."""

    __slots__ = ("message", "outcome")

    def __init__(self, message: str, outcome: CallOutcome) -> None:
        self.message = message
        self.outcome = outcome


def _unknown_tool_message(
    name: str, registry: AgentToolRegistry, context: AgentToolExecutionContext
) -> str:
    """The failure of a call naming no registered tool.

    Only a call outside any session is shown the registry: a session's mode or workflow
    narrows what it may call, and naming the tools it would refuse points the model at them.
    """
    if not name:
        return "The tool call has no tool name."
    if context.session_id or context.mode or context.active_workflow_id:
        return (
            f"Unknown tool '{name}'. Call one of the tools this session's mode or workflow offers."
        )
    known = ", ".join(registry.registered_tools) or "none"
    return f"Unknown tool '{name}'. Registered tools: {known}."


def _only_reads(tool: AgentTool, arguments_json: str) -> bool:
    """Whether this call changes nothing: a read-only tool, or one whose ``reads_only`` says so.

    A tool of reads and changes (workflow authoring) tells them apart by its arguments.
    """
    if (tool.TOOL_ANNOTATIONS or {}).get("readOnlyHint") is True:
        return True
    reads_only = getattr(tool, "reads_only", None)
    return callable(reads_only) and reads_only(arguments_json) is True


def _database_failure(exc: BaseException) -> str | None:
    """The call's failure when ``exc`` is Aptix's own database refusing or unreachable.

    The surfaces know these words (HTTP answers 503, MCP a tool error, a turn tells the
    model); None for any other error, a tool's own database's included.
    """
    if not from_aptix_database(exc):
        return None
    if (reason := database_refusal(exc)) is not None:
        return DATABASE_REFUSED.format(reason=reason)
    return DATABASE_UNAVAILABLE if is_database_outage(exc) else None
