"""Running one model response's tool calls through the ledger: on record, then run, then told."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from aptix.logger import AdminLogger, LogLevel, bounded
from aptix.reasoner import ledger
from aptix.reasoner.call_states import CANCELLED_BEFORE_START, NOT_STARTED, SHUT_DOWN_BEFORE_START
from aptix.reasoner.result import EventSink
from aptix.reasoner.running import RunningTurn, TurnLost, emit
from aptix.reasoner.stopping import process_stopping
from aptix.reasoner.tool_batch import MODE_CHANGE_TOOL, WORKFLOW_RUN_TOOL, branched_id, not_offered
from aptix.sessions.models import AgentSession
from aptix.telemetry import REFUSAL_EVENT, Tracing, refusal_attributes
from aptix.tools.base import is_idempotent
from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
from aptix.tools.executor import AgentToolExecutor
from aptix.tools.registry import AgentToolRegistry

__all__ = ["SESSION_TOOLS", "ToolRunner"]

#: Tools that change the session itself: they run in call order, never concurrently.
SESSION_TOOLS = frozenset({MODE_CHANGE_TOOL, WORKFLOW_RUN_TOOL})


def _session_tool(name: str) -> bool:
    """Whether ``name`` (in any casing) is one of :data:`SESSION_TOOLS`."""
    return name.casefold() in SESSION_TOOLS


@dataclass(frozen=True, slots=True)
class ToolRunner:
    """Puts a batch of calls on record as ``started``, runs them, records each outcome."""

    executor: AgentToolExecutor
    logger: AdminLogger
    tracing: Tracing
    #: The tools a session is offered now (its mode and active workflow decide).
    tool_names: Callable[[AgentSession], list[str]]

    def using(
        self, executor: AgentToolExecutor, tool_names: Callable[[AgentSession], list[str]]
    ) -> ToolRunner:
        """A runner with the same services on another executor (a request's client tools)."""
        return replace(self, executor=executor, tool_names=tool_names)

    def idempotent(self, name: str) -> bool:
        """Whether ``name``'s calls may run again after a crash left their outcome unknown."""
        tool_cls = self.executor.registry.get_tool_type(name)
        return tool_cls is not None and is_idempotent(tool_cls)

    def in_thread(self, name: str) -> bool:
        """Whether ``name`` runs in a worker thread that a cancellation cannot stop."""
        registry = self.executor.registry
        tool_cls = registry.get_tool_type(name)
        return registry.runs_in_thread(name) or bool(getattr(tool_cls, "runs_in_thread", False))

    async def run_response(
        self,
        turn: RunningTurn,
        entries: list[dict[str, Any]],
        context: AgentToolExecutionContext,
        save: Callable[[], Awaitable[None]],
        on_event: EventSink | None,
    ) -> list[dict[str, Any]]:
        """Run the calls put on record by :func:`ledger.take_response`; return the hand-offs."""
        record = turn.record
        session = turn.session
        registry = self.executor.registry
        calls = [AgentToolCall(e["callId"], e["name"], e["argumentsJson"]) for e in entries]
        # Tool names are case-insensitive on every surface (the registry's rule): a call
        # naming an offered tool in another casing is that tool.
        offered = {name.casefold() for name in self.tool_names(session)}
        runnable: list[tuple[AgentToolCall, dict[str, Any]]] = []
        for call, entry in zip(calls, entries, strict=True):
            # While a workflow is active the executor's guard refuses what it does not
            # permit, with the workflow error the model must see (TUL-006 §7.2).
            if (
                call.name.casefold() in offered
                or not registry.has_tool(call.name)
                or (session.active_workflow_id and self.executor.guarded)
            ):
                runnable.append((call, entry))
            else:
                ledger.record_outcome(entry, self._not_offered(call))
        tool_types = {c.name: registry.get_tool_type(c.name) for c, _ in runnable}
        for call, entry in runnable:
            # Known before it runs: a call a crash or a cancel cuts short still says so.
            entry["isServerTool"] = tool_types[call.name] is not None
        # A client-final tool's run only prepares its hand-off: nothing to guard. The rest are
        # on record as started, in the checkpoint that stores the model's response.
        server_calls = [e for c, e in runnable if _server_final(registry, c.name)]
        ledger.start(server_calls)
        try:
            await save()
            for call in calls:
                await emit(
                    on_event, "tool_call_started", {"callId": call.call_id, "name": call.name}
                )
        except asyncio.CancelledError:
            # Cancelled (a client hung up) or shut down before any call was dispatched: the
            # turn's ending must not read them as stopped mid-run.
            stopping = process_stopping()
            why = SHUT_DOWN_BEFORE_START if stopping else CANCELLED_BEFORE_START
            ledger.not_run(entries, why)
            raise
        except TurnLost:
            raise  # closed elsewhere: the settlement tells what the stored turn holds
        except Exception:
            # The save failed (the database): none of them reached its tool, and the turn's
            # ending must say so rather than "unknown" (the request is answered "retry").
            ledger.not_run(entries, NOT_STARTED)
            raise
        turn.calls_ran = turn.calls_ran or bool(server_calls)
        started = time.perf_counter()
        kept = _Outcomes(len(runnable), save)
        # Calls that change the session are not independent: they run one after another, in
        # the model's order, so the last mode change of a response is the one that holds.
        await self._run_all(
            [(c, e) for c, e in runnable if not _session_tool(c.name)], context, record.id, kept
        )
        for pair in [(c, e) for c, e in runnable if _session_tool(c.name)]:
            await self._run_one(*pair, context, record.id, kept)
        seconds = time.perf_counter() - started
        return await self._told(turn, entries, seconds, on_event)

    async def run_started(
        self,
        turn: RunningTurn,
        context: AgentToolExecutionContext,
        save: Callable[[], Awaitable[None]],
        on_event: EventSink | None,
    ) -> bool:
        """Run the calls on record as ``started`` that have not run (approved or retried).

        They run one after another; each outcome but the last is saved before the next call
        starts (the caller saves the last), so a crash between two loses none.
        """
        entries = ledger.calls_to_run(turn.record)
        turn.calls_ran = turn.calls_ran or bool(entries)
        kept = _Outcomes(len(entries), save)
        for entry in entries:
            call = AgentToolCall(entry["callId"], entry["name"], entry["argumentsJson"])
            approved = entry.get("approved") is True
            done = await self._execute(call, context, turn.record.id, approved=approved)
            ledger.record_outcome(entry, done)
            if approved:
                key = "approvedResultJson" if done.was_executed else "approvedErrorMessage"
                entry[key] = done.result_json if done.was_executed else done.error_message
            turn.touched.append(entry["callId"])
            turn.record.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.call_id,
                    "content": ledger.tool_content(entry),
                }
            )
            await kept.arrived()
            await emit(on_event, "tool_call_finished", ledger.wire(entry))
        return bool(entries)

    async def _run_all(
        self,
        pairs: Sequence[tuple[AgentToolCall, dict[str, Any]]],
        context: AgentToolExecutionContext,
        turn_id: str,
        kept: _Outcomes,
    ) -> None:
        if len(pairs) == 1:
            await self._run_one(*pairs[0], context, turn_id, kept)
        elif pairs:
            await asyncio.gather(*(self._run_one(c, e, context, turn_id, kept) for c, e in pairs))

    async def _run_one(
        self,
        call: AgentToolCall,
        entry: dict[str, Any],
        context: AgentToolExecutionContext,
        turn_id: str,
        kept: _Outcomes,
    ) -> None:
        done = await self._execute(call, context, turn_id)
        # In memory at once: a cancel or an error ending the turn keeps this outcome.
        approval = self.executor.registry.asks_approval(call.name)
        ledger.record_outcome(entry, done, approval=approval)
        await kept.arrived()

    async def _execute(
        self,
        call: AgentToolCall,
        context: AgentToolExecutionContext,
        turn_id: str,
        *,
        approved: bool = False,
    ) -> AgentToolCall:
        keyed = replace(context, idempotency_key=f"{turn_id}:{call.call_id}")
        if approved:
            return await self.executor.execute(call, keyed, approved=True)
        return await self.executor.execute(call, keyed)

    async def _told(
        self,
        turn: RunningTurn,
        entries: list[dict[str, Any]],
        seconds: float,
        on_event: EventSink | None,
    ) -> list[dict[str, Any]]:
        """Tell the model each outcome; return the calls that wait for the client."""
        handed_off: list[dict[str, Any]] = []
        for entry in entries:
            entry["batchDurationMs"] = round(seconds * 1000, 3)
            self._log_failure(turn, entry)
            await emit(on_event, "tool_call_finished", ledger.wire(entry))
            if entry["state"] in ("awaiting_client", "awaiting_approval"):
                handed_off.append(entry)
                continue
            turn.record.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": entry["callId"],
                    "content": ledger.tool_content(entry),
                }
            )
            if entry["wasExecuted"] and entry["name"].casefold() == MODE_CHANGE_TOOL:
                # The session's new mode is read again by the loop before it goes on.
                turn.branched_session_id = (
                    branched_id(entry.get("resultJson")) or turn.branched_session_id
                )
        return handed_off

    def _not_offered(self, call: AgentToolCall) -> AgentToolCall:
        refused = not_offered(call)
        self.tracing.event(REFUSAL_EVENT, refusal_attributes(call, refused.error_message or ""))
        return refused

    def _log_failure(self, turn: RunningTurn, entry: dict[str, Any]) -> None:
        if not entry.get("errorMessage"):
            return
        ids = (("SessionId", turn.session.id), ("ConversationId", turn.record.id))
        # The name is the model's text, of any size: cut as a span cuts it.
        name, call_id = bounded(entry["name"]), bounded(entry["callId"])
        # A tool's message often quotes the user's input: only DEBUG may carry user text.
        self.logger.add_custom_event(
            LogLevel.WARNING,
            "[AgentReasoner_ToolCall]",
            f"{name} failed (call {call_id}); the message is in the turn record",
            *ids,
        )
        # The message is outside text too (it quotes the name, or the tool's own words).
        self.logger.trace(f"{name} failed: {bounded(entry['errorMessage'])}", *ids)


class _Outcomes:
    """Stores each outcome of a batch as it arrives while other calls of it still run.

    A crash then loses none that came back (DESIGN §14); the last one is stored with the
    batch. One save at a time: each is a compare-and-set on the version the previous one left.
    """

    def __init__(self, calls: int, save: Callable[[], Awaitable[None]]) -> None:
        self._running = calls
        self._save = save
        self._lock = asyncio.Lock()
        self._saving = True

    async def arrived(self) -> None:
        """One call of the batch has its outcome in the ledger."""
        self._running -= 1
        if self._running == 0 or not self._saving:
            return
        async with self._lock:
            if not self._saving:
                return
            try:
                await self._save()
            except Exception:
                # Closed elsewhere, or the database failed: raising here would leave the
                # batch's other calls running unwatched. The save at the batch's end meets the
                # same condition and ends the turn as it should.
                self._saving = False


def _server_final(registry: AgentToolRegistry, name: str) -> bool:
    """True unless ``name`` is known to be client-final; never raises (a turn must go on)."""
    try:
        return registry.server_final(name) is not False
    except Exception:  # a tool that cannot be built is a failed call, reported by the executor
        return True
