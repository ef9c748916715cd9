"""The context budget: every request to the model fits ``APTIX_LLM_CONTEXT_TOKENS`` (§10).

Earlier turns are dropped whole, oldest first, so a tool result never loses its call; the
system message (with the boot message inside it) and the current turn are always sent; a tool
result that would push the current turn over the budget is clipped in the request (the record
keeps it whole). With the ``summarize`` strategy the model writes a summary of what is dropped,
sent as a message of its own framed as a record, not as instructions. The summary gives way to
the current turn: it gets what the turn leaves (at most ``summary_tokens``), never room the
turn needs. Every turn that uses a summary stores it, so it keeps standing for the turns it
covers however many turns follow, until more has to go: turns dropped for the budget, and
turns that left the ``APTIX_HISTORY_TURNS`` window since it was written (folded in, a quarter
of the window ahead and at least one turn, so that the turns leaving it next are already in
the summary). Tokens are counted as :mod:`aptix.reasoner.tokens` says.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from aptix.errors import AptixError, LlmError
from aptix.llm.types import LlmClient, LlmResponse, Message
from aptix.reasoner import summary as summaries
from aptix.reasoner.clipping import clip, clip_result, result_marker_tokens, water_level
from aptix.reasoner.overflow import call_names, overflow_message
from aptix.reasoner.record import OPEN, TurnRecord
from aptix.reasoner.tokens import EstimatedTokens, TokenCounter, default_counter

__all__ = [
    "ContextBudget",
    "ContextOverflowError",
    "ContextStrategy",
    "EstimatedTokens",
    "Fitted",
    "OlderTurns",
    "PastTurn",
    "TokenCounter",
    "default_counter",
    "ending_note",
]

_K = TypeVar("_K")
_V = TypeVar("_V")

ContextStrategy = Literal["drop", "summarize"]
#: The session's turns with ``after < seq < before``, oldest first: the newest of them up to
#: the bound the caller keeps (the turns of the history window, at most, and at least one).
OlderTurns = Callable[[int, int], Awaitable[Sequence[TurnRecord]]]

#: Tokens a chat API adds around every message, and once to prime the answer.
MESSAGE_OVERHEAD = 4
REPLY_PRIMING = 3

#: A clipped tool result keeps at least this many tokens of its start beside its marker.
_MIN_RESULT_HEAD = 16
#: A summary with less room than this would say too little to be worth a model call.
_MIN_SUMMARY = 32
#: The fewest window turns folded ahead with turns leaving the window: a quarter of a window
#: under four turns is none, and each turn would make a summary request of its own.
_FOLD_AHEAD_MIN = 1

#: How a turn that ended without completing ended, in the note the model reads after it.
_ENDINGS = {
    "cancelled": "it was cancelled.",
    "interrupted": "the process running it stopped or lost contact with the database.",
}
#: An error's message in the note is cut here: it is the model endpoint's words, unbounded.
_NOTE_ERROR_CHARS = 500


_CACHE_SIZE = 10_000
_TURN_COSTS: dict[tuple[str, str, int], int] = {}
_TOOLS_COSTS: dict[tuple[str, bytes], int] = {}
#: (session id, seq) -> turn id, of the oldest turn of each window read: the next turn's
#: newest turn left out, which its ``contextDropped`` names, without reading it again.
_TURN_IDS: dict[tuple[str, int], str] = {}


def _remember(cache: dict[_K, _V], key: _K, value: _V) -> None:
    if len(cache) >= _CACHE_SIZE:
        del cache[next(iter(cache))]  # oldest first: dicts keep insertion order
    cache[key] = value


class ContextOverflowError(AptixError):
    """The current turn alone does not fit the context budget."""


@dataclass(frozen=True, slots=True)
class PastTurn:
    """An earlier turn of the session as the budget sees it."""

    id: str
    seq: int
    messages: Sequence[Message]
    #: The stored version: a finished turn's cost is counted once per (id, version).
    version: int | None = None


@dataclass(frozen=True, slots=True)
class Fitted:
    """The messages of one request, what they cost and which earlier turns were left out."""

    messages: tuple[Message, ...]
    tokens: int
    dropped: tuple[PastTurn, ...]
    #: Names of the tools whose results in the current turn were clipped to fit.
    clipped: tuple[str, ...] = ()
    #: Tokens kept free for a summary still to be written (at most the reserve asked for).
    reserved: int = 0


class ContextBudget:
    """Counts requests and fits them into ``limit`` tokens."""

    def __init__(
        self,
        limit: int,
        *,
        strategy: ContextStrategy = "drop",
        counter: TokenCounter | None = None,
    ) -> None:
        self.limit = limit
        self.strategy = strategy
        self.counter = counter or default_counter()
        # A summary may use at most this share of the budget (the rest is for turns).
        self.summary_tokens = max(64, limit // 8)
        # What the summary's message costs besides its text (2 for the counts' rounding).
        self._frame = self.message_tokens(summaries.summary_message("")) + 2

    def message_tokens(self, message: Message) -> int:
        """The tokens one message costs in a request."""
        # A refusal is sent as the message's text when it has none (openai_client.sendable).
        said = message.get("content") or message.get("refusal") or ""
        total = MESSAGE_OVERHEAD + self.counter.count(str(said))
        calls = message.get("tool_calls")
        if calls:
            total += self.counter.count(json.dumps(calls, ensure_ascii=False))
        call_id = message.get("tool_call_id")
        if call_id:
            total += self.counter.count(str(call_id))
        return total

    def request_tokens(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> int:
        """The tokens of a whole request: messages, tool schemas and the answer priming."""
        total = REPLY_PRIMING + sum(self.message_tokens(m) for m in messages)
        return total + self.tools_tokens(tools)

    def tools_tokens(self, tools: Sequence[dict[str, Any]]) -> int:
        """The tokens the tool schemas of a request cost (each set counted once)."""
        if not tools:
            return 0
        text = json.dumps(list(tools), ensure_ascii=False)
        # Keyed on the whole text: a schema whose parameters change under the same name (an
        # MCP server's new version) is counted again. Counting costs more than the digest.
        key = (self.counter.name, hashlib.blake2b(text.encode(), digest_size=16).digest())
        cost = _TOOLS_COSTS.get(key)
        if cost is None:
            cost = self.counter.count(text)
            _remember(_TOOLS_COSTS, key, cost)
        return cost

    def turn_tokens(self, turn: PastTurn) -> int:
        """The tokens of an earlier turn's messages (remembered per stored version)."""
        if turn.version is None:
            return sum(self.message_tokens(m) for m in turn.messages)
        key = (self.counter.name, turn.id, turn.version)
        cost = _TURN_COSTS.get(key)
        if cost is None:
            cost = sum(self.message_tokens(m) for m in turn.messages)
            _remember(_TURN_COSTS, key, cost)
        return cost

    def fit(
        self,
        system: Message,
        earlier: Sequence[PastTurn],
        current: Sequence[Message],
        tools: Sequence[dict[str, Any]],
        *,
        reserve: int = 0,
        summary: str | None = None,
        instructions: str = "",
    ) -> Fitted:
        """Keep the newest earlier turns that fit beside the system message and current turn.

        The current turn comes first: whole when it fits beside the system message and tool
        schemas, else with its tool results clipped. ``summary`` (of turns before
        ``earlier``) follows the system message in what the turn leaves, clipped or left out
        when that is too little; up to ``reserve`` tokens of the rest are kept free (for a
        summary still to be written), and earlier turns fill what remains. Raises
        :class:`ContextOverflowError` when the system message, tools and current turn (its
        tool results clipped) exceed the budget, naming ``instructions`` (the mode's, in
        ``system``) when they take the room.
        """
        sent, clipped = self._fit_current(system, current, tools, instructions)
        used = self.request_tokens([system, *sent], tools)
        head: tuple[Message, ...] = (system,)
        framed = self._framed(summary, self.limit - used) if summary else None
        if framed is not None:
            head, used = (system, framed), used + self.message_tokens(framed)
        reserved = max(0, min(reserve, self.limit - used))
        used, keep_from = used + reserved, len(earlier)
        for index in range(len(earlier) - 1, -1, -1):
            cost = self.turn_tokens(earlier[index])
            if used + cost > self.limit:
                break
            used, keep_from = used + cost, index
        kept = [m for turn in earlier[keep_from:] for m in turn.messages]
        messages = (*head, *kept, *sent)
        return Fitted(messages, used - reserved, tuple(earlier[:keep_from]), clipped, reserved)

    def _framed(self, summary: str, room: int) -> Message | None:
        """The summary's message within ``room`` tokens, its text clipped if need be."""
        message = summaries.summary_message(summary)
        if self.message_tokens(message) <= room:
            return message
        if room - self._frame < _MIN_SUMMARY:
            return None
        message = summaries.summary_message(
            self.clip(summaries.visible(summary), room - self._frame)
        )
        return message if self.message_tokens(message) <= room else None

    def _fit_current(
        self,
        system: Message,
        current: Sequence[Message],
        tools: Sequence[dict[str, Any]],
        instructions: str = "",
    ) -> tuple[tuple[Message, ...], tuple[str, ...]]:
        """``current`` as it can be sent beside ``system``, and the tools whose results were cut.

        When the turn does not fit, its largest tool results are cut to a common size (the
        smaller ones stay whole): the model learns what the tools returned first, and the
        turn goes on instead of failing after its tools already ran.
        """
        fixed = self.request_tokens([system, *current], tools)
        if fixed <= self.limit:
            return tuple(current), ()
        texts = {
            index: str(m.get("content") or "")
            for index, m in enumerate(current)
            if m.get("role") == "tool"
        }
        results = {index: self.counter.count(text) for index, text in texts.items()}
        room = self.limit - fixed + sum(results.values())
        cap = water_level(list(results.values()), room)
        floor = max(
            (result_marker_tokens(self.counter, texts[i]) for i in results if results[i] > cap),
            default=0,
        )
        if not results or cap < floor + _MIN_RESULT_HEAD:
            raise ContextOverflowError(
                overflow_message(self, fixed, system, tools, current, instructions)
            )
        names = call_names(current)
        sent, clipped = list(current), []
        for index, cost in results.items():
            if cost > cap:
                sent[index] = {
                    **current[index],
                    "content": clip_result(self.counter, texts[index], cap),
                }
                clipped.append(names.get(str(current[index].get("tool_call_id")), "?"))
        return tuple(sent), tuple(clipped)

    async def prepare(
        self,
        record: TurnRecord,
        system: Message,
        history: Sequence[TurnRecord],
        tools: Sequence[dict[str, Any]],
        model: LlmClient,
        on_response: Callable[[LlmResponse], None] | None = None,
        instructions: str = "",
        older: OlderTurns | None = None,
    ) -> tuple[Message, ...]:
        """The messages of ``record``'s next request, within the budget.

        ``history`` holds the session's earlier turns, oldest first (every ended one is
        replayed). Sets ``record.context_dropped`` (every earlier turn not sent whole: dropped,
        summarized, or older than ``history``) and ``record.context_summary`` (the summary
        the turn uses, written now or carried from the latest turn that used one: ``history``
        is a window, and the summary must outlive the turn that wrote it); a failing summary
        request, or a turn that leaves no room for a summary, leaves a warning on the turn and
        the turns are dropped instead. With the ``summarize`` strategy, ``older`` reads the
        turns that left the window since the summary was written, which it folds in (none
        is read without it); with either, the newest turn left out when no other read names
        it. Raises :class:`ContextOverflowError` when the current turn alone does not fit
        (naming ``instructions``, the mode's, when they take the room).
        """
        if history:  # the next turn's newest turn left out, most often
            _remember(_TURN_IDS, (record.session_id, history[0].seq), history[0].id)
        stored = record.context_summary or summaries.latest_summary(history)
        record.context_summary = stored
        through = int(stored["throughSeq"]) if stored else 0
        summary = str(stored["text"]) if stored else None
        earlier = [
            PastTurn(t.id, t.seq, _with_ending(t), t.version)
            for t in history
            if t.status not in OPEN and t.seq > through
        ]
        # Neither sent (out of the window) nor in the summary: folded in below, or dropped.
        gap = await self._left_window(record, history, through, older)
        current = record.messages
        offered = earlier
        plan = self.fit(system, earlier, current, tools, summary=summary, instructions=instructions)
        if (plan.dropped or gap) and self.strategy == "summarize":
            left_out = len(gap) + len(plan.dropped)
            # Room for the new summary comes from the turns it stands for, never from the
            # current turn: what the turn leaves, at most summary_tokens.
            wider = self.fit(
                system, earlier, current, tools, reserve=self.summary_tokens + self._frame
            )
            # Turns leave the window one per turn: a quarter of it (at least one turn, for a
            # window under four) is folded ahead with them, so that one summary request
            # serves that many turns and the next, not one each.
            ahead = min(len(earlier), max(_FOLD_AHEAD_MIN, len(history) // 4)) if gap else 0
            folded = earlier[: max(len(wider.dropped), ahead)]
            if wider.reserved - self._frame < _MIN_SUMMARY:
                _warn(
                    record,
                    f"No summary of {left_out} earlier turn(s): this turn leaves no "
                    "room for one in the context budget (APTIX_LLM_CONTEXT_TOKENS); they were "
                    "left out of the request instead.",
                )
            elif folded or gap:  # neither when only a summary from a larger budget took the room
                try:
                    text = await self.summarize(model, summary, (*gap, *folded), on_response)
                except LlmError as exc:
                    _warn(
                        record,
                        f"Could not summarize {left_out} earlier turn(s) ({exc}); "
                        "they were left out of the request instead.",
                    )
                else:
                    last = (*gap, *folded)[-1]
                    covered = int(stored["turns"]) if stored else 0
                    stored = {
                        "text": text,
                        "throughTurnId": last.id,
                        "throughSeq": last.seq,
                        "turns": covered + len(gap) + len(folded),
                    }
                    record.context_summary = stored
                    gap = ()
                    offered = earlier[len(folded) :]
                    plan = self.fit(system, offered, current, tools, summary=text)
        for name in plan.clipped:
            _warn(
                record,
                f"The result of '{name}' was clipped to fit the context budget "
                "(APTIX_LLM_CONTEXT_TOKENS): the model saw its start; the turn keeps it whole.",
            )
        sent = offered[len(plan.dropped) :]
        # Every turn before the oldest one sent was not sent whole (the turns of a session
        # are numbered 1, 2, ... without holes): dropped, summarized, or out of the window.
        left = (sent[0].seq if sent else record.seq) - 1
        if left > 0:
            newest = await self._newest_left_out(record, left, (*gap, *plan.dropped), older)
            if newest is not None:
                record.context_dropped = {
                    "turns": left,
                    "throughTurnId": newest,
                    "summarized": int(stored["turns"]) if stored else 0,
                }
        return plan.messages

    async def _newest_left_out(
        self,
        record: TurnRecord,
        left: int,
        unsent: Sequence[PastTurn],
        older: OlderTurns | None,
    ) -> str | None:
        """The id of the newest turn ``record`` left out (seq ``left``), read if need be.

        Known when the budget dropped it, a summary ends with it, or this process saw it as
        the oldest turn of a window; else read (None when it cannot be).
        """
        if unsent:
            return unsent[-1].id
        stored = record.context_summary
        if stored and int(stored["throughSeq"]) >= left:
            return str(stored["throughTurnId"])
        key = (record.session_id, left)
        known = _TURN_IDS.get(key)
        if known is None and older is not None:
            for turn in await older(left - 1, left + 1):
                if turn.seq == left:
                    known = turn.id
                    _remember(_TURN_IDS, key, known)
        return known

    async def _left_window(
        self,
        record: TurnRecord,
        history: Sequence[TurnRecord],
        through: int,
        older: OlderTurns | None,
    ) -> tuple[PastTurn, ...]:
        """The turns between the summary (``through``) and the window, under ``summarize``.

        Turns older than the window are not sent; under ``summarize`` every turn that is not
        sent is in the summary, so those that left the window since it was written are read
        to be folded in. At most what ``older`` reads: the rest (a session that ran under
        ``drop``, or turns that left the window before this was so) is named in a warning.
        """
        if self.strategy != "summarize" or older is None or not history:
            return ()  # none without a window (APTIX_HISTORY_TURNS=0): nothing is replayed
        first = history[0].seq
        if first <= through + 1:  # a session's turns are numbered 1, 2, ... without holes
            return ()
        turns = [t for t in await older(through, first) if through < t.seq < first]
        unread = first - through - 1 - len(turns)
        if unread > 0:
            _warn(
                record,
                f"{unread} earlier turn(s) had left the history window (APTIX_HISTORY_TURNS) "
                "before a summary took them: they are neither sent nor summarized.",
            )
        return tuple(
            PastTurn(t.id, t.seq, _with_ending(t), t.version) for t in turns if t.status not in OPEN
        )

    async def summarize(
        self,
        model: LlmClient,
        previous: str | None,
        turns: Sequence[PastTurn],
        on_response: Callable[[LlmResponse], None] | None = None,
    ) -> str:
        """Ask ``model`` to fold ``turns`` into ``previous``, each request within the budget."""
        return await summaries.summarize(self, model, previous, turns, on_response)

    def clip(self, text: str, tokens: int) -> str:
        """``text`` cut to at most ``tokens`` tokens (marked with an ellipsis when cut)."""
        return clip(self.counter, text, tokens)


def ending_note(turn: TurnRecord) -> Message | None:
    """The message telling the model how an ended turn ended, unless it completed."""
    if turn.status == "completed" or turn.status in OPEN:
        return None
    if turn.status == "error":
        reason = (turn.result or {}).get("error") or (turn.warnings[-1] if turn.warnings else "")
        reason = str(reason).strip()
        if len(reason) > _NOTE_ERROR_CHARS:
            reason = reason[:_NOTE_ERROR_CHARS] + " [...]"
        how = f"it failed. {reason}" if reason else "it failed."
    else:
        how = _ENDINGS.get(turn.status, f"it ended {turn.status}.")
        if _answered(turn):
            # The model answered before the turn was closed (an answer that came after is
            # not kept: merging.merge_closed): not "without a final answer".
            return {
                "role": "assistant",
                "content": f"[This turn ended after the answer above, before it completed: {how}]",
            }
    # An assistant message: it may follow the instruction (a user message; another user
    # message would put two back to back) or the last tool results (valid after them in the
    # chat format), and the next turn's instruction follows it as usual. Written in brackets
    # in the third person so that it reads as the record it is, not as something the
    # assistant said to the user.
    return {"role": "assistant", "content": f"[This turn ended without a final answer: {how}]"}


def _answered(turn: TurnRecord) -> bool:
    """Whether ``turn``'s last message is an answer of the model (text, no tool calls)."""
    last = turn.messages[-1] if turn.messages else {}
    return (
        last.get("role") == "assistant"
        and not last.get("tool_calls")
        and bool(str(last.get("content") or "").strip())
    )


def _with_ending(turn: TurnRecord) -> Sequence[Message]:
    """``turn``'s messages and, after its last one, the note saying how it ended (if any).

    Part of the turn, the note is counted by the budget and left out with it, so it never
    comes between a call and its result.
    """
    note = ending_note(turn)
    return turn.messages if note is None else (*turn.messages, note)


def _warn(record: TurnRecord, warning: str) -> None:
    """Add ``warning`` to the turn once (each model call of the turn fits again)."""
    if warning not in record.warnings:
        record.warnings.append(warning)
