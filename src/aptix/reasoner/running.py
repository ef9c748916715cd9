"""The state of a turn while it runs, and the small helpers the loop and its endings share."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aptix.llm.types import LlmRequest, TextSink, Usage
from aptix.reasoner import ledger
from aptix.reasoner.claims import Lease
from aptix.reasoner.context import ContextBudget
from aptix.reasoner.record import TurnRecord
from aptix.reasoner.result import EventSink, TurnEvent, TurnKind, TurnResult
from aptix.reasoner.turns import TurnStore
from aptix.sessions.models import AgentSession

__all__ = [
    "Heartbeat",
    "PreparedTurn",
    "RunningTurn",
    "TurnLost",
    "emit",
    "keep_streamed",
    "note_cut_call",
    "result_of",
    "text_sink",
]


@dataclass(slots=True)
class PreparedTurn:
    """A claimed turn ready to run, or the stored answer of a resume posted again."""

    turn: RunningTurn | None = None
    history: list[TurnRecord] = field(default_factory=list)
    replay: TurnResult | None = None


class TurnLost(Exception):
    """The turn was closed by someone else (cancelled, or swept as interrupted)."""

    #: The ``error.type`` of the turn's span: how the turn ended is whoever closed it's to say.
    error_type = "aptix.turn_lost"


@dataclass(slots=True)
class RunningTurn:
    """The mutable state of the turn being run."""

    record: TurnRecord
    session: AgentSession
    usage: Usage
    #: The calls of this request (run, refused or handed off), as ids into the ledger.
    touched: list[str] = field(default_factory=list)
    resume_key: str | None = None
    role: str = "user"
    branched_session_id: str | None = None
    welcome_message: str | None = None
    #: Told to the model in this turn's system message (an active workflow it released).
    notice: str | None = None
    finish_reason: str | None = None
    model_id: str | None = None
    saving: asyncio.Future[bool] | None = None
    #: A server call of this request was sent to its tool: the request sent again would run
    #: it again, so a failure after it is answered as the turn ended, never as "retry".
    calls_ran: bool = False
    #: The text pieces the model call under way has streamed to the caller so far; emptied
    #: once its response is taken. A turn cut short meanwhile keeps them (:func:`keep_streamed`).
    streamed: list[str] = field(default_factory=list)
    #: For a resume: its turn as the resume found it, the client's results stored
    #: (:func:`ledger.as_found`), which a run ended before any call ran leaves it as.
    found: TurnRecord | None = None


def result_of(turn: RunningTurn, kind: TurnKind, error: str | None = None) -> TurnResult:
    """The response of ``turn`` as it stands: this request's calls with their outcomes."""
    touched = set(turn.touched)
    calls = [ledger.wire(e) for e in turn.record.tool_calls if e["callId"] in touched]
    return TurnResult(
        session_id=turn.session.id,
        turn_id=turn.record.id,
        kind=kind,
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
        refusal=turn.record.refusal,
    )


class Heartbeat:
    """Renews a running turn's lease every third of its length, off the turn's own path.

    A renewal that finds the turn no longer running under this run stops renewing; if the
    turn was cancelled (a cancel request another process answered), it calls ``on_cancel``,
    which stops the run as a cancel in this process does. So a cancel from anywhere stops the
    turn's running call within a third of the lease.
    """

    def __init__(
        self,
        turns: TurnStore,
        record: TurnRecord,
        lease: Lease,
        on_cancel: Callable[[], object] | None = None,
    ) -> None:
        self._turns, self._record, self._lease = turns, record, lease
        self._on_cancel = on_cancel
        self._task: asyncio.Task[None] | None = None
        self._handle = asyncio.get_running_loop().call_later(lease.seconds / 3, self._fire)

    def _fire(self) -> None:
        self._task = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        try:
            if await self._turns.heartbeat(self._record, self._lease.until()):
                self._again()
                return
            status = await self._turns.status(self._record)
        except Exception:  # a missed beat only shortens the lease
            self._again()
            return
        # No longer this run's: nothing to renew. Nothing awaits between the read and the
        # call, and the run stops its heartbeat before it begins any ending of its own.
        if status == "cancelled" and self._on_cancel is not None:
            self._on_cancel()

    def _again(self) -> None:
        self._handle = asyncio.get_running_loop().call_later(self._lease.seconds / 3, self._fire)

    def stop(self) -> None:
        """Stop renewing (the turn has ended or left this process)."""
        self._handle.cancel()
        if self._task is not None:
            self._task.cancel()


def text_sink(
    sink: EventSink | None,
    max_chars: int | None = None,
    sent: list[str] | None = None,
    heard: list[str] | None = None,
) -> TextSink | None:
    """The model's text pieces as ``text_delta`` events (None without a sink).

    At most ``max_chars`` characters are sent per response: the same cut as the final text
    gets (``APTIX_MAX_MODEL_TEXT_CHARS``), so a client never sees more streamed than kept.
    Each piece sent is added to ``sent`` too (:attr:`RunningTurn.streamed`), and each piece
    the model sent, uncut, to ``heard`` (what a call cut short is charged for).
    """
    if sink is None:
        return None
    remaining = max_chars

    async def on_text(piece: str) -> None:
        nonlocal remaining
        if heard is not None:
            heard.append(piece)
        if remaining is not None:
            piece, remaining = piece[:remaining], max(remaining - len(piece), 0)
        if piece:
            if sent is not None:
                sent.append(piece)  # before the event: a cancel while it is sent was seen
            await sink(TurnEvent("text_delta", {"delta": piece}))

    return on_text


def note_cut_call(
    turn: RunningTurn, counts: ContextBudget, request: LlmRequest, heard: list[str], seconds: float
) -> None:
    """Put on record a model call that ended without its response once its output came.

    The provider bills such a call, and ``/v1/usage`` charges it an estimate
    (:class:`aptix.quotas.MeteredModel`): its prompt and what it had streamed (``heard``: its
    text, and the tool calls or refusal it was writing, :mod:`aptix.llm.heard`), counted as
    the context budget ``counts`` (the runtime gives the metered model the same counts). The
    turn's ``model_calls`` and usage hold that estimate, marked so. One that ended before any
    of it came is neither charged nor recorded.
    """
    if not heard:
        return
    usage = Usage(
        counts.request_tokens(request.messages, request.tools),
        counts.counter.count("".join(heard)),
    )
    turn.usage = turn.usage + usage
    turn.record.model_calls.append(
        {
            "promptTokens": usage.prompt_tokens,
            "completionTokens": usage.completion_tokens,
            "estimated": True,
            "finishReason": None,
            "modelId": None,
            "toolCalls": 0,
            "durationMs": round(seconds * 1000, 3),
        }
    )


def keep_streamed(turn: RunningTurn) -> None:
    """Keep as the turn's text what the model call cut short had streamed (DESIGN §14).

    The caller was shown it (``aptix chat``'s screen, an SSE client): a turn cancelled, or
    stopped, mid-answer must not read as if nothing was said. Its status says it is no
    finished answer; the model is not shown it again (it is no message of the turn). A
    model stream that broke off is a model error whose message says its partial answer was
    not kept (:mod:`aptix.llm.openai_client`): that ending keeps none.
    """
    streamed = "".join(turn.streamed)
    turn.streamed.clear()
    if streamed.strip():
        turn.record.text = streamed


async def emit(sink: EventSink | None, kind: str, data: dict[str, Any]) -> None:
    """Send one event to ``sink`` if there is one."""
    if sink is not None:
        await sink(TurnEvent(kind, data))  # type: ignore[arg-type]
