"""``AgentReasoner``: one instruction in, a finished (or handed-off) turn out (AGN-005 §6).

A turn is claimed under the session's lock (see :mod:`aptix.reasoner.claims`), then
checkpointed after every model response and every tool batch while a lease heartbeat says
its process is alive. Cancelling the task that runs it marks it ``cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

from aptix.blank import strip_blank
from aptix.db.types import utc_now
from aptix.errors import LlmError, TurnError
from aptix.llm.heard import hearing
from aptix.llm.types import LlmClient, LlmRequest, LlmResponse, Message, Usage, answers_in_formats
from aptix.log_setup import log_ids
from aptix.logger import AdminLogger, LogLevel
from aptix.modes.catalog import ModeCatalog
from aptix.reasoner import ledger
from aptix.reasoner.batch import ToolRunner
from aptix.reasoner.caps import Capped, ResponseCaps
from aptix.reasoner.claims import Lease, mark_dead, resume_plan, start_plan
from aptix.reasoner.context import ContextBudget, ContextOverflowError, OlderTurns
from aptix.reasoner.endings import TurnEndings
from aptix.reasoner.overflow import crowded_mode_warning
from aptix.reasoner.prompt import system_message
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.result import EventSink, ToolResultInput, TurnResult
from aptix.reasoner.running import (
    Heartbeat,
    PreparedTurn,
    RunningTurn,
    TurnLost,
    emit,
    note_cut_call,
    text_sink,
)
from aptix.reasoner.spanned import SpannedModel
from aptix.reasoner.stopping import TurnTasks, process_stopping
from aptix.reasoner.turns import TurnStore
from aptix.sessions.manager import SessionManager
from aptix.sessions.models import AgentSession
from aptix.telemetry import (
    CAPPED_EVENT,
    DENIAL_EVENT,
    HAND_OFF_EVENT,
    NO_TRACING,
    Tracing,
    capped_attributes,
    denial_attributes,
)
from aptix.telemetry import hand_off_attributes as _hand_off_attributes
from aptix.tools.base import AgentTool
from aptix.tools.context import AgentToolCall, AgentToolExecutionContext, context_for
from aptix.tools.executor import AgentToolExecutor

__all__ = ["AgentReasoner", "PreparedTurn"]

#: Chooses the tools to offer: (active workflow id, the mode's tools, org) -> tool names.
OfferedTools = Callable[[str | None, Collection[str], str], list[str]]
#: The session with an active workflow that is no longer served cleared, and the note why.
ReleaseWorkflow = Callable[[AgentSession], Awaitable[tuple[AgentSession, str | None]]]


class AgentReasoner:
    """Calls the model, runs server tools, hands client tools to the caller, resumes later."""

    def __init__(
        self,
        *,
        model: LlmClient,
        executor: AgentToolExecutor,
        sessions: SessionManager,
        modes: ModeCatalog,
        turns: TurnStore,
        logger: AdminLogger,
        boot_message: Callable[[str], str] = lambda _org: "",
        active_workflow: Callable[[str | None, str], str] = lambda _workflow, _org: "",
        offered_tools: OfferedTools | None = None,
        max_iterations: int = 10,
        token_budget: int | None = None,
        lease_seconds: float = 30.0,
        history_turns: int = 50,
        context: ContextBudget | None = None,
        caps: ResponseCaps | None = None,
        tracing: Tracing = NO_TRACING,
        refresh_workflows: Callable[[], Awaitable[object]] | None = None,
        running: TurnTasks | None = None,
        release_workflow: ReleaseWorkflow | None = None,
    ) -> None:
        self._model = model
        #: Awaited before each turn is claimed and before each of its steps: the runtime
        #: brings its workflows up to date (another process may change them mid-turn).
        self._refresh_workflows = refresh_workflows
        #: Ends a claimed turn's active workflow that is no longer served, with a note why.
        self._release_workflow = release_workflow
        self._executor = executor
        self._sessions = sessions
        self._modes = modes
        self._turns = turns
        self._logger = logger
        self._end = TurnEndings(turns, logger)
        self._boot_message = boot_message
        #: The system message's lines on the session's active workflow: (its id, org) -> text.
        self._active_workflow = active_workflow
        self._offered = offered_tools or (lambda _workflow, tools, _org: list(tools))
        self._max_iterations = max_iterations
        self._token_budget = token_budget
        self._lease = Lease(lease_seconds)
        self._history_turns = history_turns
        self._context = context or ContextBudget(32_000)
        self._caps = caps or ResponseCaps()
        self._tracing = tracing
        #: The turns running in this process (the runtime's, shared by all its reasoners).
        self._running = running if running is not None else TurnTasks()
        self._tools = ToolRunner(executor, logger, tracing, self._tool_names)

    async def execute(
        self,
        *,
        session_id: str,
        org: str,
        user: str,
        instruction: str | None = None,
        tool_results: Sequence[ToolResultInput] | None = None,
        on_event: EventSink | None = None,
        role: str = "user",
    ) -> TurnResult:
        """Run a new instruction, or resume the pending turn with the client's tool results.

        Raises :class:`NotFoundError` for an unknown session, :class:`SessionBusyError` while
        another turn of the session runs, and :class:`TurnError` for a request that cannot be
        honoured (nothing is executed then). A model failure ends the attempt with
        ``kind="error"``; a resume that failed so stays retryable with the stored results.
        """
        prepared = await self.prepare(
            session_id=session_id,
            org=org,
            user=user,
            instruction=instruction,
            tool_results=tool_results,
            role=role,
        )
        return await self.run(prepared, on_event)

    async def prepare(
        self,
        *,
        session_id: str,
        org: str,
        user: str,
        instruction: str | None = None,
        tool_results: Sequence[ToolResultInput] | None = None,
        role: str = "user",
        supersede_pending: bool = False,
        response_format: dict[str, Any] | None = None,
    ) -> PreparedTurn:
        """Claim the session's next turn (or find the stored answer) without running it.

        Raises exactly what :meth:`execute` raises before anything runs, so a streaming
        caller can answer 404/409 before it starts streaming. ``supersede_pending``: a new
        instruction closes the calls the session waits for as not run, instead of being
        refused (a chat client that sends a new message has left them unanswered).
        ``response_format`` (Chat Completions' shape) is recorded on the turn and sent with
        its model calls; a resume without one keeps the format the turn has.
        """
        if self._refresh_workflows is not None:
            await self._refresh_workflows()
        if tool_results:
            if instruction:
                raise TurnError("Send either an instruction or toolResults, not both.")
            decide = resume_plan(tool_results, self._lease)
        else:
            text = strip_blank(instruction or "")
            if not text:
                raise TurnError("The request needs a non-empty instruction or toolResults.")
            decide = start_plan(
                session_id=session_id,
                org=org,
                user=user,
                instruction=text,
                lease=self._lease,
                turn_id=uuid.uuid4().hex,
                supersede=supersede_pending,
            )
        # One transaction: the owner check, the session's lock, the latest turns, the claim.
        claim = asyncio.ensure_future(
            self._turns.claim(session_id, org, user, decide, history=self._history_turns)
        )
        try:
            session, plan, history = await asyncio.shield(claim)
        except asyncio.CancelledError:
            # The claim can still commit after the caller is gone (on SQLite it runs whole on
            # a worker thread): a turn it started must not hold the session until its lease
            # runs out.
            await asyncio.shield(self._abandon(claim))
            raise
        if plan.replay is not None:
            return PreparedTurn(replay=TurnResult.from_wire(plan.replay))
        assert plan.run is not None
        if response_format is not None:
            plan.run.response_format = response_format
        turn = RunningTurn(
            plan.run, session, Usage(), resume_key=plan.run.resume_key, role=role, found=plan.found
        )
        if tool_results:
            turn.touched.extend(ledger.resumed_calls(plan.run, [r.call_id for r in tool_results]))
        return PreparedTurn(turn=turn, history=history)

    async def _abandon(self, claim: asyncio.Future[Any]) -> None:
        """Mark ``interrupted`` the turn a claim started for a caller that was cancelled."""
        with contextlib.suppress(Exception):
            _, plan, _ = await claim
            if plan.run is not None:
                # As if its process had died before running anything: a resume keeps the
                # client's results, and the same request retried continues from them.
                plan.run.lease_until = None
                mark_dead(plan.run, utc_now())
                await self._turns.save(plan.run)

    async def run(self, prepared: PreparedTurn, on_event: EventSink | None = None) -> TurnResult:
        """Run a turn claimed by :meth:`prepare` to its end (or its hand-off)."""
        if prepared.replay is not None:
            await _replay(prepared.replay, on_event)
            return prepared.replay
        assert prepared.turn is not None
        return await self._drive(prepared.turn, prepared.history, on_event)

    @property
    def structured_output(self) -> bool:
        """Whether its model answers in a requested ``response_format`` (the demo model not)."""
        return answers_in_formats(self._model)

    def with_client_tools(self, tools: Sequence[type[AgentTool]]) -> AgentReasoner:
        """A shallow copy (sharing running turns) also offering one client's ``tools``.

        While a workflow is active, its permitted tools decide whether they are offered and run.
        """
        other, offered, names = copy.copy(self), self._offered, [t.TOOL_NAME for t in tools]
        other._executor = self._executor.with_client_tools(tools)
        other._offered = lambda flow, mode_tools, org: offered(flow, [*mode_tools, *names], org)
        other._tools = self._tools.using(other._executor, other._tool_names)
        return other

    def cancel(self, turn_id: str) -> bool:
        """Cancel the task running ``turn_id`` in this process; False when none does."""
        return self._running.cancel(turn_id)

    async def stop(self, turn_id: str) -> bool:
        """Cancel ``turn_id`` if it runs here and wait until its ending is on record."""
        return await self._running.stop(turn_id)

    async def _drive(
        self, turn: RunningTurn, history: list[TurnRecord], on_event: EventSink | None
    ) -> TurnResult:
        turn_id = turn.record.id
        task = asyncio.current_task()
        assert task is not None
        self._running.add(turn_id, task)
        # A cancel recorded by another process stops the turn here as one sent here would.
        stop = functools.partial(self._running.cancel, turn_id)
        heartbeat = Heartbeat(self._turns, turn.record, self._lease, stop)
        # The endings below log inside it too: their lines carry the org as the turn's do.
        with log_ids(turn.session.id, turn_id, turn.session.org):
            try:
                with self._tracing.turn(turn) as span:
                    result = await self._run(turn, history, on_event)
                    span.turn_result(result)
                    return result
            except TurnLost:
                heartbeat.stop()  # before any ending: a beat must not cancel the ending itself
                result = await asyncio.shield(self._end.lost(turn))
                await emit(on_event, "turn_finished", result.to_wire())
                return result
            except asyncio.CancelledError:
                heartbeat.stop()
                if process_stopping() and not self._running.stopping(task):
                    # Cut short by the server's shutdown, not cancelled by anyone.
                    await asyncio.shield(self._end.shut_down(turn, self._tools.in_thread))
                    raise
                result = await asyncio.shield(self._end.cancelled(turn, self._tools.in_thread))
                if self._running.stopping(task) and task.uncancel() == 0:
                    # Cancelled through cancel(): the caller, streaming or not, gets the outcome.
                    await emit(on_event, "turn_finished", result.to_wire())
                    return result
                raise
            except Exception as exc:
                heartbeat.stop()
                # A database outage or a bug: the turn ends now with a true status, rather than
                # holding the session until its lease runs out and then reading "interrupted".
                result = await asyncio.shield(self._end.broken(turn, exc))
                if not turn.calls_ran:
                    # Nothing ran: a 503 "retry shortly" (or a bug's 500) runs nothing twice,
                    # and a resume the database cut short waits for that retry to continue it.
                    raise
                # The database or a bug failed the turn after calls of this request ran:
                # answered as the failed turn it is, with what ran, never as a status clients
                # send the request again on by themselves (which would run them again).
                await emit(on_event, "turn_finished", result.to_wire())
                return result
            finally:
                heartbeat.stop()
                # Only this run: a run that took the turn over in this process stays stoppable.
                self._running.remove(turn_id, task)

    async def _run(
        self, turn: RunningTurn, history: list[TurnRecord], on_event: EventSink | None
    ) -> TurnResult:
        record = turn.record
        for denied in _denied(turn):  # settled by the claim: the trace's only record of them
            self._tracing.event(DENIAL_EVENT, denial_attributes(denied))
        if self._release_workflow is not None:
            turn.session, turn.notice = await self._release_workflow(turn.session)
        # Calls on record as started but not run: approved by the client's answer (stored as
        # started by the claim), or idempotent calls a crash interrupted.
        checkpoint = functools.partial(self._end.checkpoint, turn)
        # The claim has just read the session; once anything has run, it is read again.
        stale = False
        if await self._tools.run_started(turn, self._tool_context(turn), checkpoint, on_event):
            await checkpoint()
            stale = True
        for iteration in range(1, self._max_iterations + 1):
            if stale:
                await self._reread_session(turn, on_event)
            if self._token_budget is not None and turn.usage.total_tokens >= self._token_budget:
                reason = (
                    f"Stopped: the turn used {turn.usage.total_tokens} tokens, over its budget "
                    f"of {self._token_budget}, before a final answer."
                )
                return await self._end.stopped(turn, reason, "turn_token_budget", on_event)
            tool_names = self._tool_names(turn.session)
            tools = tuple(self._executor.registry.schemas(set(tool_names)))
            system = self._system(turn.session, tool_names, turn.notice)
            try:
                messages = await self._context.prepare(
                    record,
                    system,
                    history,
                    tools,
                    SpannedModel(self._model, self._tracing),  # summaries get chat spans
                    self._summary_noter(turn),
                    self._modes.get_mode(turn.session.mode).instructions,
                    self._older_turns(record),
                )
            except ContextOverflowError as exc:
                return await self._end.overflow(turn, exc, on_event)
            request = LlmRequest(messages, tools, response_format=record.response_format)
            started = time.perf_counter()
            turn.streamed.clear()
            heard: list[str] = []
            sink = text_sink(on_event, self._caps.max_text_chars, turn.streamed, heard)
            try:
                # Beside its text, what a streamed call writes that no one is shown (a tool
                # call's arguments, a refusal) is heard too: a call cut short is charged it.
                with self._tracing.model_call(self._model, request) as span, hearing(heard):
                    response = await self._model.complete(request, sink)
                    span.model_response(response)
            except LlmError as exc:
                note_cut_call(turn, self._context, request, heard, time.perf_counter() - started)
                return await self._end.fail(turn, exc, on_event)
            except BaseException:  # cancelled (a hang-up, a cancel, a shutdown) or broken
                note_cut_call(turn, self._context, request, heard, time.perf_counter() - started)
                raise
            turn.streamed.clear()  # the response's own text is what it said
            self._note_model_call(turn, response, time.perf_counter() - started)
            capped = self._capped(turn, response)
            response, renamed = ledger.fresh_ids(record, capped.response)
            # The response and its calls go on record at once, before anything can be cut short.
            entries = ledger.take_response(
                record, response, renamed, iteration, self._tools.idempotent
            )
            turn.touched.extend(e["callId"] for e in entries)
            refused = [(entries[i], why) for i, why in capped.refused.items()]
            ledger.refuse(record, refused)
            if response.text:
                record.text = response.text  # text beside tool calls is shown too
                await emit(on_event, "text", {"text": response.text})
            # Before the batch (the offered tools and the guard) and before the answer.
            await self._reread_session(turn, on_event)
            if not response.tool_calls:
                return await self._end.finish(turn, on_event)
            for entry, _ in refused:  # shown as a call not offered is: started, then failed
                await emit(
                    on_event,
                    "tool_call_started",
                    {"callId": entry["callId"], "name": entry["name"]},
                )
                await emit(on_event, "tool_call_finished", ledger.wire(entry))
            # One checkpoint stores the model's response and its calls as started (those
            # refused as failed), before any of them runs; a second stores their outcomes.
            pending = await self._tools.run_response(
                turn,
                [e for i, e in enumerate(entries) if i not in capped.refused],
                self._tool_context(turn),
                checkpoint,
                on_event,
            )
            if pending:
                await self._reread_session(turn, on_event)
                self._tracing.event(HAND_OFF_EVENT, _hand_offs(pending))
                return await self._end.hand_off(turn, pending, on_event)
            await self._end.checkpoint(turn)
            stale = True
        await self._reread_session(turn, on_event)
        reason = (
            f"Stopped after {self._max_iterations} model calls without a final answer "
            "(the iteration cap)."
        )
        return await self._end.stopped(turn, reason, "iteration_cap", on_event)

    async def _reread_session(self, turn: RunningTurn, on_event: EventSink | None) -> None:
        """Read the session's mode, active workflow and the workflows again (DESIGN §6, §15).

        A change made meanwhile, by a tool of this turn or on any surface or process,
        governs the rest of the turn: the tools offered, the executor's guard, and the mode
        its answer reports. So does a workflow disabled, narrowed or removed by any process.
        """
        if self._refresh_workflows is not None:
            await self._refresh_workflows()
        fresh = await self._turns.read_session(turn.session.id, turn.session.org)
        if fresh is None:
            return
        before, turn.session = turn.session.mode, fresh
        if fresh.mode != before:
            welcome = self._modes.get_mode(fresh.mode).welcome_message or None
            turn.welcome_message = welcome
            await emit(
                on_event,
                "mode_changed",
                {"previousMode": before, "mode": fresh.mode, "welcomeMessage": welcome},
            )

    def crowded_modes(self) -> list[str]:
        """Warnings for the modes whose own system message and tool schemas fill the budget.

        Counted without a boot message or workflow: every turn in such a mode would end with
        ``context_overflow``, so the operator is told at start-up instead.
        """
        registry = self._executor.registry
        warnings = []
        for key in self._modes.keys:
            mode = self._modes.get_mode(key)
            names = self._offered_names(key, None, "")
            system = system_message(mode, names, registry, "")
            tools = registry.schemas(set(names))
            warning = crowded_mode_warning(self._context, key, system, tools, mode.instructions)
            if warning is not None:
                warnings.append(warning)
        return warnings

    def _tool_names(self, session: AgentSession) -> list[str]:
        return self._offered_names(session.mode, session.active_workflow_id, session.org)

    def _offered_names(self, mode: str, workflow: str | None, org: str) -> list[str]:
        mode_tools = self._modes.tools_for_mode(mode)
        registry = self._executor.registry
        return [t for t in self._offered(workflow, mode_tools, org) if registry.has_tool(t)]

    def _system(
        self, session: AgentSession, tool_names: list[str], notice: str | None = None
    ) -> Message:
        mode = self._modes.get_mode(session.mode)
        boot = self._boot_message(session.org)
        return system_message(
            mode,
            tool_names,
            self._executor.registry,
            f"{notice}\n\n{boot}" if notice else boot,
            self._active_workflow(session.active_workflow_id, session.org),
        )

    def _capped(self, turn: RunningTurn, response: LlmResponse) -> Capped:
        capped = self._caps.apply(response)
        for warning in capped.warnings:
            turn.record.warnings.append(warning)
            self._tracing.event(CAPPED_EVENT, capped_attributes(warning))
            self._logger.add_custom_event(
                LogLevel.WARNING,
                "[AgentReasoner_ResponseCaps]",
                warning,
                ("SessionId", turn.session.id),
                ("ConversationId", turn.record.id),
            )
        return capped

    def _older_turns(self, record: TurnRecord) -> OlderTurns:
        """Reads the session's turns before the history window.

        Under ``summarize`` they are folded into the summary (:class:`ContextBudget`): at
        most a window's worth per turn, so a turn still reads no more than twice the window.
        Under either strategy, the newest of them when the turn's ``contextDropped`` must name
        it and no other read did: one turn, even with a window of 0.
        """

        async def read(after: int, before: int) -> Sequence[TurnRecord]:
            limit = min(before - after - 1, max(self._history_turns, 1))
            return await self._turns.list_turns(
                record.session_id, record.org, limit=limit, before=before
            )

        return read

    def _summary_noter(self, turn: RunningTurn) -> Callable[[LlmResponse], None]:
        def note(response: LlmResponse) -> None:
            turn.usage = turn.usage + response.usage
            turn.record.model_calls.append(
                {
                    "purpose": "contextSummary",
                    "promptTokens": response.usage.prompt_tokens,
                    "completionTokens": response.usage.completion_tokens,
                    "finishReason": response.finish_reason,
                    "modelId": response.model_id,
                    "toolCalls": 0,
                }
            )

        return note

    def _note_model_call(self, turn: RunningTurn, response: LlmResponse, seconds: float) -> None:
        turn.usage = turn.usage + response.usage
        turn.finish_reason = response.finish_reason
        turn.model_id = response.model_id
        turn.record.model_calls.append(
            {
                "promptTokens": response.usage.prompt_tokens,
                "completionTokens": response.usage.completion_tokens,
                "finishReason": response.finish_reason,
                "modelId": response.model_id,
                "toolCalls": len(response.tool_calls),
                "durationMs": round(seconds * 1000, 3),
            }
        )

    def _tool_context(self, turn: RunningTurn) -> AgentToolExecutionContext:
        session = turn.session
        return context_for(
            session,
            org=session.org,
            user=turn.record.user,
            role=turn.role,
            conversation_id=turn.record.id,
        )


async def _replay(result: TurnResult, on_event: EventSink | None) -> None:
    """Stream a replayed answer as its run streamed it: its text, its hand-off, its end.

    A resume posted again runs nothing, but a streaming client still needs ``turn_finished``
    (the body the JSON answer repeats), or it cannot tell how the turn ended. The answer is
    the turn as it stands (:func:`aptix.reasoner.claims.resume_plan`), not a snapshot it
    has moved past.
    """
    if result.text:
        await emit(on_event, "text", {"text": result.text})
    if result.kind == "tool-only":
        pending = [c for c in result.tool_calls if c.get("requiresClientExecution")]
        await emit(on_event, "client_calls_pending", {"toolCalls": pending})
    await emit(on_event, "turn_finished", result.to_wire())


def _hand_offs(pending: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [AgentToolCall(e["callId"], e["name"], e["argumentsJson"]) for e in pending]
    return _hand_off_attributes(calls)


def _denied(turn: RunningTurn) -> list[AgentToolCall]:
    """The calls held for approval that this resume's answer denied."""
    touched = set(turn.touched)
    return [
        AgentToolCall(e["callId"], e["name"], e["argumentsJson"])
        for e in turn.record.tool_calls
        if e["callId"] in touched and e.get("approved") is False
    ]
