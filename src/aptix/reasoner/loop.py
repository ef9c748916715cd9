"""``AgentReasoner``: one instruction in, a finished (or handed-off) turn out (AGN-005 §6)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from aptix.errors import LlmError, NotFoundError, TurnError
from aptix.llm.types import LlmClient, LlmRequest, LlmResponse, Message, TextSink, Usage
from aptix.logger import AdminLogger, LogLevel
from aptix.modes.catalog import ModeCatalog
from aptix.reasoner.prompt import system_message
from aptix.reasoner.result import EventSink, ToolResultInput, TurnEvent, TurnResult
from aptix.reasoner.turns import TurnRecord, TurnStore
from aptix.sessions.manager import SessionManager
from aptix.sessions.models import AgentSession
from aptix.tools.context import AgentToolCall, AgentToolExecutionContext
from aptix.tools.executor import AgentToolExecutor

__all__ = ["AgentReasoner"]

MODE_CHANGE_TOOL = "agent_change_mode"
WORKFLOW_RUN_TOOL = "agent_workflow_run"

#: Chooses the tools to offer: (active workflow id, the mode's tools) -> tool names.
OfferedTools = Callable[[str | None, Collection[str]], list[str]]


@dataclass(slots=True)
class _Turn:
    """The mutable state of the turn being run."""

    record: TurnRecord
    session: AgentSession
    usage: Usage
    executed: list[dict[str, Any]]
    resume_key: str | None = None
    branched_session_id: str | None = None
    welcome_message: str | None = None
    finish_reason: str | None = None
    model_id: str | None = None


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
        boot_message: Callable[[], str] = lambda: "",
        offered_tools: OfferedTools | None = None,
        max_iterations: int = 10,
        token_budget: int | None = None,
    ) -> None:
        self._model = model
        self._executor = executor
        self._sessions = sessions
        self._modes = modes
        self._turns = turns
        self._logger = logger
        self._boot_message = boot_message
        self._offered = offered_tools or (lambda _workflow, tools: list(tools))
        self._max_iterations = max_iterations
        self._token_budget = token_budget

    async def execute(
        self,
        *,
        session_id: str,
        org: str,
        user: str,
        instruction: str | None = None,
        tool_results: Sequence[ToolResultInput] | None = None,
        on_event: EventSink | None = None,
    ) -> TurnResult:
        """Run a new instruction, or resume the pending turn with the client's tool results.

        Raises :class:`NotFoundError` for an unknown session and :class:`TurnError` for a
        request that cannot be honoured (nothing is executed then). A model failure ends the
        turn with ``kind="error"``.
        """
        session = await self._sessions.get_session(session_id, org)
        if session is None:
            raise NotFoundError(f"Unknown session '{session_id}'.")
        history = await self._turns.list_turns(session_id, org)
        if tool_results:
            if instruction:
                raise TurnError("Send either an instruction or toolResults, not both.")
            prior, turn = await self._resume(session, history, tool_results)
            if prior is not None:
                return prior
            assert turn is not None
        else:
            turn = await self._start(session, history, user, instruction)
        transcript = [m for t in history if t.status == "completed" for m in t.messages]
        return await self._run(turn, transcript, on_event)

    async def _start(
        self, session: AgentSession, history: list[TurnRecord], user: str, instruction: str | None
    ) -> _Turn:
        text = (instruction or "").strip()
        if not text:
            raise TurnError("The request needs a non-empty instruction or toolResults.")
        pending = _pending_turn(history)
        if pending is not None:
            ids = ", ".join(c["callId"] for c in pending.pending_calls)
            raise TurnError(
                f"The session is waiting for the results of tool call(s) {ids}; "
                "post them as toolResults before a new instruction."
            )
        record = TurnRecord(
            id=uuid.uuid4().hex,
            session_id=session.id,
            org=session.org,
            user=user,
            seq=(history[-1].seq + 1) if history else 1,
            instruction=text,
            messages=[{"role": "user", "content": text}],
        )
        await self._turns.add(record)
        return _Turn(record, session, Usage(), [])

    async def _resume(
        self,
        session: AgentSession,
        history: list[TurnRecord],
        results: Sequence[ToolResultInput],
    ) -> tuple[TurnResult | None, _Turn | None]:
        ids = [r.call_id for r in results]
        if len(set(ids)) != len(ids):
            raise TurnError("toolResults lists the same call id more than once.")
        key = ",".join(sorted(ids))
        for past in reversed(history):
            if key in past.answers:  # the same resume posted again: same outcome
                return TurnResult.from_wire(past.answers[key]), None
        pending = _pending_turn(history)
        waiting = {c["callId"] for c in pending.pending_calls} if pending else set()
        unknown = sorted(set(ids) - waiting)
        if unknown:
            raise TurnError(
                f"Unknown or already answered tool call id(s): {', '.join(unknown)}. "
                + (
                    f"Waiting for: {', '.join(sorted(waiting))}."
                    if waiting
                    else "No tool calls are waiting in this session."
                )
            )
        missing = sorted(waiting - set(ids))
        if missing:
            raise TurnError(f"Results are missing for pending tool call(s): {', '.join(missing)}.")
        assert pending is not None
        calls = {c["callId"]: c for c in pending.pending_calls}
        pending.status = "running"
        pending.pending_calls = []
        if not await self._turns.update(pending):
            raise TurnError("These tool results are already being processed; retry shortly.")
        for result in results:
            pending.messages.append(
                {"role": "tool", "tool_call_id": result.call_id, "content": result.output}
            )
            pending.tool_calls.append(
                {
                    **calls[result.call_id],
                    "clientResult": result.output,
                    "clientError": result.is_error,
                }
            )
        return None, _Turn(pending, session, Usage(), [], resume_key=key)

    async def _run(
        self, turn: _Turn, transcript: list[Message], on_event: EventSink | None
    ) -> TurnResult:
        record = turn.record
        for iteration in range(1, self._max_iterations + 1):
            if self._token_budget is not None and turn.usage.total_tokens >= self._token_budget:
                record.warnings.append(
                    f"Stopped: the turn used {turn.usage.total_tokens} tokens, over its budget "
                    f"of {self._token_budget}."
                )
                return await self._finish(turn, on_event)
            tool_names = self._tool_names(turn.session)
            request = LlmRequest(
                messages=(self._system(turn.session, tool_names), *transcript, *record.messages),
                tools=tuple(self._executor.registry.schemas(set(tool_names))),
            )
            started = time.perf_counter()
            try:
                response = await self._model.complete(request, _text_sink(on_event))
            except LlmError as exc:
                return await self._fail(turn, exc, on_event)
            self._note_model_call(turn, response, time.perf_counter() - started)
            record.messages.append(_assistant_message(response))
            if response.text:
                record.text = response.text  # text beside tool calls is shown too
                await _emit(on_event, "text", {"text": response.text})
            if not response.tool_calls:
                return await self._finish(turn, on_event)
            pending = await self._run_tools(turn, response, iteration, on_event)
            if pending:
                return await self._hand_off(turn, pending, on_event)
        record.warnings.append(
            f"Stopped after {self._max_iterations} model calls without a final answer "
            "(the iteration cap)."
        )
        return await self._finish(turn, on_event)

    def _tool_names(self, session: AgentSession) -> list[str]:
        mode_tools = self._modes.tools_for_mode(session.mode)
        registry = self._executor.registry
        return [
            t for t in self._offered(session.active_workflow_id, mode_tools) if registry.has_tool(t)
        ]

    def _system(self, session: AgentSession, tool_names: list[str]) -> Message:
        mode = self._modes.get_mode(session.mode)
        return system_message(mode, tool_names, self._executor.registry, self._boot_message())

    def _note_model_call(self, turn: _Turn, response: LlmResponse, seconds: float) -> None:
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

    async def _run_tools(
        self, turn: _Turn, response: LlmResponse, iteration: int, on_event: EventSink | None
    ) -> list[AgentToolCall]:
        """Run every call of the response; return the client-final calls to hand off."""
        session = turn.session
        context = AgentToolExecutionContext(
            session_id=session.id,
            conversation_id=turn.record.id,
            org=session.org,
            user=turn.record.user,
            mode=session.mode,
            active_workflow_id=session.active_workflow_id,
        )
        offered = set(self._tool_names(session))
        calls = [AgentToolCall(c.id, c.name, c.arguments) for c in response.tool_calls]
        for call in calls:
            await _emit(on_event, "tool_call_started", {"callId": call.call_id, "name": call.name})
        started = time.perf_counter()
        done = await self._executor.execute_many(
            [c for c in calls if c.name in offered or not self._executor.registry.has_tool(c.name)],
            context,
        )
        by_id = {c.call_id: c for c in done}
        seconds = time.perf_counter() - started
        results = [by_id.get(c.call_id) or _not_offered(c) for c in calls]
        handed_off: list[AgentToolCall] = []
        session_changed = False
        for call in results:
            self._audit(turn, call, iteration, seconds)
            await _emit(on_event, "tool_call_finished", _wire_call(call))
            if call.requires_client_execution and call.was_executed:
                handed_off.append(call)
                continue
            content = (
                call.result_json if call.was_executed else json.dumps({"error": call.error_message})
            )
            turn.record.messages.append(
                {"role": "tool", "tool_call_id": call.call_id, "content": content}
            )
            if call.was_executed and call.name in (MODE_CHANGE_TOOL, WORKFLOW_RUN_TOOL):
                session_changed = True
                if call.name == MODE_CHANGE_TOOL:
                    turn.branched_session_id = _branched_id(call) or turn.branched_session_id
        turn.executed.extend(
            _wire_call(c) for c in results if not c.requires_client_execution or not c.was_executed
        )
        if session_changed:
            await self._reload_session(turn, on_event)
        return handed_off

    async def _reload_session(self, turn: _Turn, on_event: EventSink | None) -> None:
        before = turn.session.mode
        fresh = await self._sessions.get_session(turn.session.id, turn.session.org)
        if fresh is None:
            return
        turn.session = fresh
        if fresh.mode != before:
            welcome = self._modes.get_mode(fresh.mode).welcome_message or None
            turn.welcome_message = welcome
            await _emit(
                on_event,
                "mode_changed",
                {"previousMode": before, "mode": fresh.mode, "welcomeMessage": welcome},
            )

    def _audit(self, turn: _Turn, call: AgentToolCall, iteration: int, seconds: float) -> None:
        turn.record.tool_calls.append(
            {
                **_wire_call(call),
                "iteration": iteration,
                "batchDurationMs": round(seconds * 1000, 3),
            }
        )
        if call.error_message:
            self._logger.add_custom_event(
                LogLevel.WARNING,
                "[AgentReasoner_ToolCall]",
                f"{call.name} failed: {call.error_message}",
                ("SessionId", turn.session.id),
                ("ConversationId", turn.record.id),
            )

    async def _hand_off(
        self, turn: _Turn, pending: list[AgentToolCall], on_event: EventSink | None
    ) -> TurnResult:
        record = turn.record
        record.status = "pending"
        record.pending_calls = [_wire_call(c) for c in pending]
        result = self._result(turn, "tool-only", [*turn.executed, *record.pending_calls])
        await _emit(on_event, "client_calls_pending", {"toolCalls": record.pending_calls})
        return await self._save(turn, result, on_event)

    async def _finish(self, turn: _Turn, on_event: EventSink | None) -> TurnResult:
        turn.record.status = "completed"
        kind = "ok" if turn.record.text else "empty"
        return await self._save(turn, self._result(turn, kind, turn.executed), on_event)

    async def _fail(self, turn: _Turn, exc: LlmError, on_event: EventSink | None) -> TurnResult:
        self._logger.add_exception(
            "[AgentReasoner_ExecuteAsync__Exception]",
            exc,
            ("SessionId", turn.session.id),
            ("ConversationId", turn.record.id),
        )
        turn.record.status = "error"
        result = self._result(turn, "error", turn.executed, error=str(exc))
        return await self._save(turn, result, on_event)

    def _result(
        self, turn: _Turn, kind: str, calls: list[dict[str, Any]], error: str | None = None
    ) -> TurnResult:
        return TurnResult(
            session_id=turn.session.id,
            turn_id=turn.record.id,
            kind=kind,  # type: ignore[arg-type]
            mode=turn.session.mode,
            text=turn.record.text,
            tool_calls=tuple(calls),
            warnings=tuple(turn.record.warnings),
            usage=turn.usage,
            finish_reason=turn.finish_reason,
            model_id=turn.model_id,
            branched_session_id=turn.branched_session_id,
            welcome_message=turn.welcome_message,
            error=error,
        )

    async def _save(
        self, turn: _Turn, result: TurnResult, on_event: EventSink | None
    ) -> TurnResult:
        record = turn.record
        record.result = result.to_wire()
        if turn.resume_key is not None:
            record.answers[turn.resume_key] = record.result
        if not await self._turns.update(record):
            raise TurnError(f"Turn {record.id} was changed by another request meanwhile.")
        self._logger.trace(
            f"turn {record.id} {result.kind}",
            ("SessionId", turn.session.id),
            ("ConversationId", record.id),
        )
        await _emit(on_event, "turn_finished", record.result)
        return result


def _pending_turn(history: list[TurnRecord]) -> TurnRecord | None:
    return next((t for t in reversed(history) if t.status == "pending"), None)


def _assistant_message(response: LlmResponse) -> Message:
    message: Message = {"role": "assistant", "content": response.text}
    if response.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in response.tool_calls
        ]
    return message


def _not_offered(call: AgentToolCall) -> AgentToolCall:
    return AgentToolCall(
        call.call_id,
        call.name,
        call.arguments_json,
        error_message=f"The tool '{call.name}' is not offered in this mode or workflow.",
    )


def _branched_id(call: AgentToolCall) -> str | None:
    try:
        value = json.loads(call.result_json or "{}").get("branchedSessionId")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _wire_call(call: AgentToolCall) -> dict[str, Any]:
    return {
        "callId": call.call_id,
        "name": call.name,
        "argumentsJson": call.arguments_json,
        "isServerTool": call.is_server_tool,
        "wasExecuted": call.was_executed,
        "requiresClientExecution": call.requires_client_execution,
        "resultJson": call.result_json,
        "errorMessage": call.error_message,
    }


def _text_sink(sink: EventSink | None) -> TextSink | None:
    if sink is None:
        return None

    async def on_text(piece: str) -> None:
        await sink(TurnEvent("text_delta", {"delta": piece}))

    return on_text


async def _emit(sink: EventSink | None, kind: str, data: dict[str, Any]) -> None:
    if sink is not None:
        await sink(TurnEvent(kind, data))  # type: ignore[arg-type]
