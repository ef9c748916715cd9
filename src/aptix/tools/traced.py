"""``TracedToolExecutor``: the executor with an ``execute_tool`` span around each call."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from aptix.telemetry import REFUSAL_EVENT, SpanHandle, Tracing, refusal_attributes
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
from aptix.tools.executor import AgentToolExecutor

__all__ = ["TracedToolExecutor", "tool_executor"]


class TracedToolExecutor(AgentToolExecutor):
    """An executor that runs each call inside an ``execute_tool`` span.

    A subclass rather than a check in :meth:`AgentToolExecutor.execute`, so that the plain
    executor does not pay for tracing when it is off.
    """

    def __init__(self, tracing: Tracing, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tracing = tracing

    async def execute(
        self, call: AgentToolCall, context: AgentToolExecutionContext, *, approved: bool = False
    ) -> AgentToolCall:
        """Run one call; a call that runs is inside its ``execute_tool`` span.

        A call that is not run (a name no tool has, a call the guard refuses) is an
        ``aptix.tool_call.refused`` event on the current span (the turn's), not a span:
        spans count executions.
        """
        if not self.registry.has_tool(call.name):
            # The name is model output, of any size and content: never a span's name.
            done = await super().execute(call, context, approved=approved)
            self.tracing.event(REFUSAL_EVENT, refusal_attributes(call, done.error_message or ""))
            return done
        return await super().execute(call, context, approved=approved)

    async def _run(
        self,
        tool: AgentTool,
        call: AgentToolCall,
        context: AgentToolExecutionContext,
        *,
        approved: bool,
    ) -> AgentToolCall:
        """Run a call the guard let through inside its ``execute_tool`` span."""
        with self._span(call, context) as span:
            done = await super()._run(tool, call, context, approved=approved)
            span.tool_outcome(
                outcome=done.outcome,
                error=done.error_message,
                waiting=self._waiting(done),
                approved=approved,
            )
            return done

    def _not_run(self, failed: AgentToolCall, context: AgentToolExecutionContext) -> AgentToolCall:
        # Not refused but failed here (the tool could not be built, the database is out of
        # reach): a failed execution of the tool, as the turn's record says.
        with self._span(failed, context) as span:
            span.tool_outcome(outcome=failed.outcome, error=failed.error_message)
        return failed

    def _span(
        self, call: AgentToolCall, context: AgentToolExecutionContext
    ) -> AbstractContextManager[SpanHandle]:
        return self.tracing.tool_call(
            call,
            session_id=context.session_id,
            turn_id=context.conversation_id,
            org=context.org or None,
        )

    def _waiting(self, done: AgentToolCall) -> str | None:
        """The ledger state a handed-off call waits in; None for a call that ran."""
        if not (done.requires_client_execution and done.was_executed):
            return None
        # As the ledger records it (ToolRunner._run_one): a tool with an approved run
        # has only asked its question.
        return "awaiting_approval" if self.registry.asks_approval(done.name) else "awaiting_client"

    def _refused(self, tool: AgentTool, call: AgentToolCall, reason: str) -> None:
        self.tracing.event(REFUSAL_EVENT, refusal_attributes(call, reason))


def tool_executor(tracing: Tracing, *args: Any, **kwargs: Any) -> AgentToolExecutor:
    """An executor built with these arguments: a traced one when ``tracing`` is on."""
    if tracing.enabled:
        return TracedToolExecutor(tracing, *args, **kwargs)
    return AgentToolExecutor(*args, **kwargs)
