"""The slash commands of ``aptix chat``: modes, workflows, a new session, tool details, quit."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text

from aptix.cli.output import Part, console, folded, inert, say, say_rows

if TYPE_CHECKING:
    from aptix.reasoner.record import TurnRecord
    from aptix.runtime import Runtime

__all__ = [
    "COMMANDS",
    "ORG",
    "RECENT_TURNS",
    "USER",
    "ChatState",
    "help_line",
    "open_session",
    "repeated_names",
    "run_command",
    "show_call",
    "show_refusal",
]

#: Turns of a resumed session shown before its prompt.
RECENT_TURNS = 5

#: Who the chat acts as: the local CLI's org and user, as ``aptix sessions`` defaults to.
ORG = USER = "local"

#: Every command with what it does (shown by Tab completion and /help).
COMMANDS: dict[str, str] = {
    "/mode": "show the modes, or switch: /mode KEY",
    "/modes": "list the modes (* marks the current one)",
    "/workflows": "list the workflows",
    "/new": "start a new session: /new [MODE]",
    "/details": "show tool calls in full, or on one line: /details [on|off] (also Ctrl-O)",
    "/help": "list the commands",
    "/quit": "leave the chat (also Ctrl-D)",
}
QUIT = ("/quit", "/exit")
#: Commands that take nothing after them: a word there is refused, not silently dropped.
NO_ARGUMENT = ("/modes", "/workflows", "/help", *QUIT)


def help_line() -> str:
    """The commands, on one line."""
    return "Commands: " + ", ".join(COMMANDS) + ". Ctrl-C stops a turn."


@dataclass
class ChatState:
    """What the chat is on: its session, whether tool calls show in full, the mode keys."""

    session_id: str
    details: bool = False
    mode_keys: tuple[str, ...] = ()

    def toggle_details(self, on: bool | None = None) -> None:
        """Switch tool calls between one line and everything (to ``on`` when it is given)."""
        self.details = not self.details if on is None else on
        say(("tool details ", "dim"), ("on" if self.details else "off", "bold"))


async def open_session(
    runtime: Runtime, session_id: str | None, mode: str | None, *, resume_last: bool = False
) -> str:
    """The session to chat in, its last turns shown; a new one in ``mode`` if none is named.

    ``session_id`` names it; with ``resume_last`` it is the most recently used one.
    """
    from aptix.errors import AptixError
    from aptix.sessions.access import owned_session

    sessions = runtime.services.sessions
    if resume_last and session_id is None:
        latest = await sessions.list_sessions(ORG, USER, limit=1)
        if not latest:
            say(("No earlier session to continue: starting a new one.", "dim"))
        session_id = latest[0].id if latest else None
    if session_id is not None:  # "" too: an unknown session, never a new one
        # The owner check every surface applies (org AND user): another user's session of the
        # org looks missing, so its turns are never shown nor its mode changed from here.
        if await owned_session(sessions, session_id, ORG, USER) is None:
            raise AptixError(f"Unknown session '{session_id}'.")
        await _show_recent(runtime, session_id)
        return session_id
    created = await sessions.create_session(org=ORG, user=USER, mode=mode)
    if created.result is None:
        raise AptixError(created.error_message or "Could not create a session.")
    welcome = runtime.services.modes.get_mode(created.result.mode).welcome_message
    if welcome:
        say((welcome, "italic"))
    return created.result.id


async def run_command(runtime: Runtime, state: ChatState, line: str) -> bool:
    """Carry out one slash command; True when the chat should end."""
    from aptix.errors import AptixError

    command, _, argument = line.partition(" ")
    argument = argument.strip()
    if command in NO_ARGUMENT and argument:
        # Dropping the word would run something other than what was typed (and /quit would
        # end the chat on a line that may have been meant as a message).
        say((f"{command} takes no argument.", "red"), f" {help_line()}")
        return False
    if command in QUIT:
        return True
    if command == "/new":
        try:
            state.session_id = await open_session(runtime, None, argument or None)
        except AptixError as exc:
            say((str(exc), "red"))
        else:
            say("New session ", (state.session_id, "bold"), ".")
    elif command == "/modes" or (command == "/mode" and not argument):
        await _list_modes(runtime, state)
    elif command == "/mode":
        changed = await runtime.services.sessions.set_session_mode(
            state.session_id, argument, "Changed by the user in aptix chat.", ORG, USER
        )
        if changed.result is None:
            say((changed.error_message or "", "red"))
        else:
            say("Mode is now ", (changed.result.mode, "bold"), ".")
    elif command == "/workflows":
        # The chat's org: the list its model's list_workflows gives.
        for w in runtime.workflows.registry.listed(ORG):
            say("  ", (w.workflow_id, "bold"), f" — {w.title}")
    elif command == "/details":
        # A switch, and also set explicitly: "/details off" must never turn them on.
        if argument.lower() not in ("", "on", "off"):
            say(("/details takes on, off or nothing (to switch).", "red"))
        else:
            state.toggle_details({"on": True, "off": False}.get(argument.lower()))
    elif command == "/help":
        say(help_line())
    else:
        close = difflib.get_close_matches(command, [*COMMANDS, *QUIT], n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        say((f"Unknown command {command}.", "red"), f"{hint} {help_line()}")
    return False


async def _show_recent(runtime: Runtime, session_id: str) -> None:
    """The session's last turns, so a resumed chat shows where it left off."""
    from aptix.cli.chat_view import LABEL

    turns = await runtime.turns.list_turns(session_id, ORG, limit=RECENT_TURNS)
    if not turns:
        return
    say((f"Last {len(turns)} turn(s) of this session:", "dim"))
    for turn in turns:
        # Every row of stored text sits under its label, so no line of it (an instruction
        # holding "agent> done", say) can pass for one of the chat's own labels.
        if turn.instruction:
            say_rows(folded(turn.instruction, indent=5, label=("you>", "bold")))
        if turn.status == "completed":
            if turn.text:
                say_rows(folded(turn.text, indent=len(LABEL[0]) + 1, label=LABEL))
            if turn.refusal:
                show_refusal(turn.refusal)
            continue
        _show_unfinished(turn)


def show_refusal(refusal: str) -> None:
    """The model declining to answer (OpenAI's ``message.refusal``): its reason, as it said it."""
    from aptix.cli.chat_view import LABEL

    say(LABEL, " ", ("(the model declined to answer)", "yellow"))
    say_rows(folded(refusal, indent=4))


#: How a turn that has no finished answer stands, by its status.
_UNFINISHED = {
    "cancelled": "it was cancelled and ended without a finished answer",
    "error": "it failed and ended without a finished answer",
    "interrupted": (
        "the process running it stopped or lost contact with the database; it ended without a "
        "finished answer"
    ),
    "pending": "it waits for tool results and has no finished answer yet",
    "running": "it has no finished answer yet",
}
#: Calls of an unfinished turn listed under it; the rest are counted.
SHOWN_CALLS = 10
#: The indent of a call's rows, under its ``⚙``.
_CALL_INDENT = 4
#: The fewest cells a call's arguments are cut to, on the narrowest screen.
_FEWEST_CELLS = 16


def _show_unfinished(turn: TurnRecord) -> None:
    """A turn that did not complete: how it ended, why, its calls' outcomes, its partial text.

    Text a cancelled or failed turn kept ("I will do it now.") is never shown as an answer:
    it comes under its turn's ending, labelled as partial.
    """
    from aptix.cli.chat_view import LABEL
    from aptix.logger import bounded
    from aptix.reasoner import ledger, pre_ledger

    how = _UNFINISHED.get(turn.status, "it ended without a finished answer")
    say(LABEL, " ", (f"(turn {turn.status}: {how})", "yellow"))
    if turn.status == "error":
        say_rows(folded(bounded(_failure(turn)), indent=9, label=("  error:", "red")))
    if turn.text:
        say(("  partial text, not a finished answer:", "dim"))
        say_rows(folded(turn.text, indent=4))
    calls = [
        ledger.wire(e)
        for e in pre_ledger.stated_calls(turn.tool_calls, waiting=turn.status == "pending")
    ]
    repeated = repeated_names(calls)
    for call in calls[:SHOWN_CALLS]:
        show_call(call, arguments=call.get("name") in repeated)
    if len(calls) > SHOWN_CALLS:
        say((f"    … and {len(calls) - SHOWN_CALLS} more call(s)", "dim"))


def show_call(call: dict[str, Any], *, arguments: bool = False) -> None:
    """A call as its record states it: ``⚙ name → outcome``, and why unless it succeeded.

    With ``arguments``, ``⚙ name(arguments) → outcome``: what tells apart two calls of one
    tool (see :func:`repeated_names`), on at most one row, cut with ``…``.
    """
    from aptix.logger import bounded

    outcome = str(call.get("outcome") or call.get("state") or "")
    message = str(call.get("errorMessage") or "")
    parts: list[Part] = [(str(call.get("name") or ""), "bold")]
    if arguments:
        parts.append((f"({_one_row(str(call.get('argumentsJson') or ''))})", "dim"))
    parts.append((f" → {outcome}", "dim"))
    if message and outcome != "succeeded":
        parts.append(f": {' '.join(bounded(message).split())}")
    say_rows(folded(*parts, indent=_CALL_INDENT, label=("  ⚙", "dim")))


def repeated_names(calls: Sequence[dict[str, Any]]) -> set[str]:
    """The tool names ``calls`` hold more than once: their calls are shown with arguments.

    Named alone, two stopped calls of ``send_report`` read the same, and the person cannot
    tell which one to check (round 73, review r2, F4).
    """
    counts = Counter(str(call.get("name") or "") for call in calls)
    return {name for name, count in counts.items() if count > 1}


def _one_row(arguments: str) -> str:
    """``arguments`` on one line, cut to a row of the screen (the record keeps them whole)."""
    # Inert first: split() takes some controls (U+001C, U+0085) for spaces and would drop them.
    line = Text(" ".join(inert(arguments).split()))
    line.truncate(max(console.width - _CALL_INDENT - 2, _FEWEST_CELLS), overflow="ellipsis")
    return line.plain


def _failure(turn: TurnRecord) -> str:
    """Why an ``error`` turn failed, with its code, as the sessions API gives it."""
    from aptix.reasoner.endings import ERROR_CODE

    stored = turn.result or {}
    message = stored.get("error") or (turn.warnings[-1] if turn.warnings else None)
    code = stored.get(ERROR_CODE) or "turn_failed"
    return f"{code}: {' '.join(str(message or 'The turn failed.').split())}"


async def _list_modes(runtime: Runtime, state: ChatState) -> None:
    session = await runtime.services.sessions.get_session(state.session_id, ORG)
    current = session.mode if session is not None else None
    for m in await runtime.services.modes.get_all_modes():
        mark = "*" if m.key == current else " "
        say(f"{mark} ", (m.key, "bold"), f" — {m.description}")
    say(("Switch with /mode KEY (* is the current mode).", "dim"))
