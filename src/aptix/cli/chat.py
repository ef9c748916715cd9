"""``aptix chat``: an interactive terminal chat with the configured model.

Each line is a turn of :class:`~aptix.reasoner.AgentReasoner`, run as its own task: Ctrl-C
while it runs cancels that task through :meth:`AgentReasoner.cancel`, the path the HTTP cancel
endpoint takes, so the turn is stored ``cancelled`` and the chat goes on. Ctrl-C at an empty
prompt right after (or twice in a row) quits, as does Ctrl-D. SIGTERM and SIGHUP end the chat
with the terminal restored (see :mod:`aptix.cli.chat_signals`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from aptix.cli.charset import tolerant_output
from aptix.cli.chat_approval import ApprovalQuestion
from aptix.cli.chat_commands import (
    COMMANDS,
    ORG,
    USER,
    ChatState,
    help_line,
    open_session,
    repeated_names,
    run_command,
    show_call,
    show_refusal,
)
from aptix.cli.chat_signals import ChatSignals, cut_short, end_by, ending_note
from aptix.cli.main import INTERRUPTED
from aptix.cli.output import console, fail, folded, refuse_unstorable, say, say_rows, unstorable
from aptix.cli.runtime import config_failed, database_failed, database_failure, is_database_error
from aptix.llm.demo import is_demo
from aptix.urls import mask_credentials

if TYPE_CHECKING:
    from aptix.cli.chat_input import LineReader
    from aptix.cli.chat_view import TurnView
    from aptix.reasoner import AgentReasoner, ToolResultInput, TurnResult
    from aptix.reasoner.running import PreparedTurn
    from aptix.runtime import Runtime
    from aptix.settings import AptixSettings

APPROVAL_TOOL = "request_user_approval"
#: Why a turn ending so cut off the text it was streaming, by its result's kind.
_CUT_OFF = {"cancelled": "turn cancelled", "error": "turn failed"}
#: The outcomes of calls a cancel stopped while they ran (or left running in their thread).
_CUT_MID_RUN = ("unknown", "abandoned")
DEMO_TRY = "Try: calculate 2*(3+4), list the modes, show the workflows, ask me for approval."
#: Where the chat's log lines go (in the data directory): the screen is the conversation's.
LOG_FILE = "chat.log"
#: What follows a database failure's line, for a message that failed before its turn began,
#: and for a turn that the failure cut short (ended on record, its calls with their outcomes).
_NOT_SENT = "The message was not sent: send it again once the database is back."
_CUT_SHORT = "The turn ended there; any tool call shown above did run."


def chat(
    session_id: Annotated[
        str | None, typer.Option("--session-id", help="Continue this session.")
    ] = None,
    resume_last: Annotated[
        bool,
        typer.Option(
            "--continue/--no-continue",
            "-c",
            metavar="",
            help="Continue the most recently used session.",
        ),
    ] = False,
    mode: Annotated[
        str | None,
        typer.Option(help="Mode of a new session (not with --session-id or --continue)."),
    ] = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo/--no-demo",
            metavar="",
            help="Chat with the built-in offline demo model (APTIX_LLM_MODEL=demo).",
        ),
    ] = False,
    tool_details: Annotated[
        bool,
        typer.Option(
            "--tool-details/--no-tool-details",
            metavar="",
            help="Show tool calls in full (default: one line; Ctrl-O toggles).",
        ),
    ] = False,
) -> None:
    """Chat with the agent: text streams in, tool calls show as they run, approvals are asked here.

    Arrow keys edit and recall earlier lines (kept in the data directory), Alt-Enter (or Esc
    then Enter) starts a new line, Tab completes slash commands, Ctrl-C stops a running turn,
    Ctrl-D quits. --session-id and --continue show the session's last turns first.
    """
    from aptix.errors import AptixError, ConfigurationError
    from aptix.llm.demo import use_demo_model

    refuse_unstorable({"--session-id": session_id, "--mode": mode})
    if session_id == "":
        # An unset variable ("--session-id $SID") must not start a new session unnoticed.
        fail(
            "--session-id is empty; give a session's id (aptix sessions list shows them), "
            "or leave the option out to start a new session.",
            code=2,
        )
    if mode is not None and (session_id is not None or resume_last):
        # A continued session keeps its own mode; switching it silently would surprise.
        fail(
            "--mode chooses the mode of a new session, not of a continued one; "
            "switch a continued session's mode with /mode KEY in the chat.",
            code=2,
        )
    if demo:
        use_demo_model()
    try:
        with tolerant_output():  # a Latin-1 terminal: what it lacks is replaced, never fatal
            asyncio.run(_main(session_id, mode, tool_details, resume_last))
    except ConfigurationError as exc:
        config_failed(exc)
    except AptixError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        # Before the chat began (the database opening) or on its way out: the command was
        # interrupted, and ends as every other command Ctrl-C ends.
        console.print()
        raise typer.Exit(INTERRUPTED) from None
    except EOFError:
        console.print()


async def _main(session_id: str | None, mode: str | None, details: bool, resume: bool) -> None:
    from aptix.log_setup import log_to_file
    from aptix.settings import load_settings

    settings = load_settings()
    # From start-up on, and every library's lines (a trace exporter's), not over the chat.
    log_to_file(settings.data_dir / LOG_FILE)
    try:
        await _chat(settings, session_id, mode, details, resume)
    except Exception as exc:  # before the chat began (its session), or on its way out
        if not is_database_error(exc):
            raise
        database_failed(settings.effective_database_url, exc)
    finally:
        log_to_file(None)  # for whatever this process does next (a test's next command)


async def _chat(
    settings: AptixSettings, session_id: str | None, mode: str | None, details: bool, resume: bool
) -> None:
    # Here, not at the top: every ``aptix`` command (``--help`` too) imports this module.
    from aptix.cli.chat_input import open_reader
    from aptix.runtime import open_runtime

    async with open_runtime(settings) as runtime:
        reasoner = runtime.reasoner()
        modes = await runtime.services.modes.get_all_modes()
        state = ChatState(
            await open_session(runtime, session_id, mode, resume_last=resume),
            details=details,
            mode_keys=tuple(m.key for m in modes),
        )
        reader = open_reader(
            runtime.settings.data_dir, COMMANDS, lambda: state.mode_keys, state.toggle_details
        )
        say(("Aptix chat", "bold"), f" — session {state.session_id}. {help_line()}")
        if is_demo(runtime.settings.llm_model, runtime.settings.llm_base_url):
            say(("Demo model:", "bold yellow"), f" offline and rule-based, not an LLM. {DEMO_TRY}")
        with ChatSignals() as interrupts:
            try:
                if await _answer_waiting_turn(runtime, reasoner, reader, state, interrupts):
                    await _converse(runtime, reasoner, reader, state, interrupts)
            except (asyncio.CancelledError, OSError):
                # SIGTERM or SIGHUP: everything on the way out has restored the terminal
                # (a hung-up one answers writes with OSError) and left the turn on record.
                if interrupts.ended_by is None:
                    raise
                if (task := asyncio.current_task()) is not None:
                    task.uncancel()  # closing the runtime below must not be cancelled too
        if (ended_by := interrupts.ended_by) is not None:
            note = await ending_note(runtime, state.session_id)
            if (lost := interrupts.output_lost) is not None:
                _to_stderr(f"Ended by {ended_by.name}: {lost}. {note}")
            else:
                with contextlib.suppress(OSError):  # a hung-up terminal shows nothing more
                    say((f"Ended by {ended_by.name}.", "yellow"), f" {note}")
    if (ended_by := interrupts.ended_by) is not None:  # also one that came on the way out
        end_by(ended_by)


def _to_stderr(line: str) -> None:
    """One last line on stderr, if it can still be written (our own words, no outside text)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


async def _converse(
    runtime: Runtime,
    reasoner: AgentReasoner,
    reader: LineReader,
    state: ChatState,
    interrupts: ChatSignals,
) -> None:
    """Read and answer lines until /quit, Ctrl-D, or a second Ctrl-C at an empty prompt."""
    armed = False  # a Ctrl-C just happened: one more at an empty prompt quits
    while True:
        try:
            line = (await reader.read("you> ")).strip()
        except KeyboardInterrupt:
            if armed:
                return
            armed = True
            say(("Press Ctrl-C again or Ctrl-D to quit.", "dim"))
            continue
        except EOFError:
            console.print()  # end the prompt's line
            return
        armed = False
        if not line:
            continue
        if (refused := unstorable(line)) is not None:
            # Refused before anything stores it, as HTTP and MCP refuse it: the chat goes on.
            say(("error:", "bold red"), f" {refused}; the line was not sent.")
            continue
        try:
            if line.startswith("/"):
                if await run_command(runtime, state, line):
                    return
                continue
            interrupts.pressed.clear()  # only a Ctrl-C from now on stops this turn
            armed = await _turn(runtime, reasoner, reader, state, line, interrupts)
        except Exception as exc:
            # A command's (or a cancel's) database failed: said in one line, as every other
            # command says it, and the chat goes on, for the next line once it is back.
            if not is_database_error(exc):
                raise
            _say_database_failed(runtime, exc)


async def _answer_waiting_turn(
    runtime: Runtime,
    reasoner: AgentReasoner,
    reader: LineReader,
    state: ChatState,
    interrupts: ChatSignals,
) -> bool:
    """Ask what the session's latest turn waits for, as the chat asks for its own turns.

    A turn left waiting by another client (HTTP, the console, an older Aptix) holds the
    session: the chat answers its approvals, or offers to cancel it when it waits for a
    client tool a terminal cannot run. False when the person quit instead.
    """
    from aptix.errors import AptixError

    latest = await runtime.turns.list_turns(state.session_id, ORG, limit=1)
    if not latest or latest[0].status != "pending" or not latest[0].pending_calls:
        return True
    turn, calls = latest[0], latest[0].pending_calls
    others = [c["name"] for c in calls if c["name"] != APPROVAL_TOOL and not _asks_approval(c)]
    if not others:
        say(("The latest turn waits for your answer:", "bold"))
        results = await _client_results(runtime, reader, state.session_id, turn.id, calls)
        if results is not None:
            await _turn(runtime, reasoner, reader, state, "", interrupts, results)
        return True
    names = ", ".join(f"'{name}'" for name in others)
    say(f"The latest turn waits for the client tool {names}, which aptix chat cannot run.")
    try:
        answer = (await reader.ask("cancel that turn? [y/n] ")).strip().lower()
    except (KeyboardInterrupt, EOFError):
        console.print()
        return False
    if answer.startswith("y"):
        with contextlib.suppress(AptixError):  # already ended meanwhile
            await runtime.turns.cancel(state.session_id, ORG, turn.id)
        say(("Turn cancelled.", "yellow"))
    else:
        say(("The session waits for that client until the turn is answered or cancelled.", "dim"))
    return True


async def _turn(
    runtime: Runtime,
    reasoner: AgentReasoner,
    reader: LineReader,
    state: ChatState,
    instruction: str,
    interrupts: ChatSignals,
    results: list[ToolResultInput] | None = None,
) -> bool:
    """Run one instruction (or resume with ``results``) to its end, answering approvals.

    True when it was cancelled.
    """
    from aptix.cli.chat_view import TurnView
    from aptix.errors import AptixError

    while True:
        # A failed write ends the chat as the hang-up (or SIGPIPE) behind it would: the turn is
        # cut short and reads interrupted, never "error" for a screen that could not be drawn.
        view = TurnView(details=state.details, on_lost=interrupts.lose_output)
        view.open()
        prepared: PreparedTurn | None = None
        try:
            prepared = await reasoner.prepare(
                session_id=state.session_id,
                org=ORG,
                user=USER,
                instruction=None if results else instruction,
                tool_results=results,
            )
            result = await _run(runtime, reasoner, state.session_id, prepared, view, interrupts)
        except AptixError as exc:  # busy session, unknown session: nothing ran
            view.close(cut_off="turn failed")
            _say_error(str(exc))
            return False
        except BaseException as exc:  # SIGTERM or SIGHUP: the spinner gives the cursor back
            ended = interrupts.ended_by
            view.close(cut_off=f"ended by {ended.name}" if ended is not None else "turn failed")
            if ended is not None or not is_database_error(exc):
                raise
            # The database failed (a restart, a lock held past the busy timeout): one line, and
            # the chat goes on. A turn it cut short is ended on record with its calls' outcomes.
            _say_database_failed(runtime, exc, _NOT_SENT if prepared is None else _CUT_SHORT)
            return False
        # Text streamed by a turn that ends without its answer is marked so where it stands.
        view.close(cut_off=_CUT_OFF.get(result.kind))
        if view.lost:  # the chat ends: its task's cancel, asked for meanwhile, comes here
            await asyncio.sleep(0)
        if result.kind != "tool-only":
            _show_result(result)
            return result.kind == "cancelled"
        results = await _client_results(
            runtime, reader, result.session_id, result.turn_id, result.tool_calls
        )
        if results is None:
            return True


def _say_database_failed(runtime: Runtime, exc: BaseException, then: str = "") -> None:
    """One ``error:`` line for a database error: the driver's words, a hint, and ``then``."""
    line = database_failure(runtime.settings.effective_database_url, exc)
    if then:
        line = f"{line.rstrip('.')}. {then}"
    # As fail() says it for the other commands, one line (the words of the operator's own
    # database, not the model's): a driver's words may quote a URL.
    say(("error:", "bold red"), " ", mask_credentials(" ".join(line.split())))


def _say_error(message: str) -> None:
    """``error: message``, folded under its label: words from outside never reach column 0.

    A model endpoint's own words come in ``message``; printed as one line, the terminal
    wrapped it to column 0, where they could draw the chat's ``approval needed:`` (round 73,
    review r2, F2).
    """
    say_rows(folded(message, indent=len("error: "), label=("error:", "bold red")))


async def _run(
    runtime: Runtime,
    reasoner: AgentReasoner,
    session_id: str,
    prepared: PreparedTurn,
    view: TurnView,
    interrupts: ChatSignals,
) -> TurnResult:
    """Run one claimed turn as a task; Ctrl-C cancels it, recorded ``cancelled``."""
    from aptix.errors import AptixError
    from aptix.reasoner import TurnResult

    task = asyncio.ensure_future(reasoner.run(prepared, view.on_event))
    pressed = asyncio.ensure_future(interrupts.pressed.wait())
    try:
        await asyncio.wait({task, pressed}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # SIGTERM or SIGHUP ends the chat
        pressed.cancel()
        await cut_short(task)
        raise
    pressed.cancel()
    interrupts.pressed.clear()
    if task.done() or prepared.turn is None:
        return await task
    turn_id = prepared.turn.record.id
    if not reasoner.cancel(turn_id):  # not started yet: stop the task, close the turn here
        task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        if interrupts.ended_by is not None:  # SIGTERM or SIGHUP while the cancel went on
            raise
        with contextlib.suppress(AptixError):  # already closed
            await runtime.turns.cancel(session_id, ORG, turn_id)
        return TurnResult(session_id, turn_id, "cancelled", prepared.turn.session.mode)


async def _client_results(
    runtime: Runtime,
    reader: LineReader,
    session_id: str,
    turn_id: str,
    calls: Sequence[dict[str, Any]],
) -> list[ToolResultInput] | None:
    """Answers for the calls the client runs; None when Ctrl-C or Ctrl-D cancelled the turn."""
    from aptix.errors import AptixError

    pending = [c for c in calls if c.get("requiresClientExecution")]
    try:
        return [await _client_result(reader, call) for call in pending]
    except (KeyboardInterrupt, EOFError) as exc:  # left pending, the turn would hold the session
        if isinstance(exc, EOFError):
            console.print()  # end the question's line, as Ctrl-D at the prompt does
        with contextlib.suppress(AptixError):
            await runtime.turns.cancel(session_id, ORG, turn_id)
        say(("Turn cancelled.", "yellow"))
        return None


async def _client_result(reader: LineReader, call: dict[str, Any]) -> ToolResultInput:
    from aptix.reasoner import ToolResultInput

    if call["name"] != APPROVAL_TOOL and not _asks_approval(call):
        message = {"error": f"aptix chat cannot run the client tool '{call['name']}'."}
        return ToolResultInput(call["callId"], json.dumps(message), is_error=True)
    question = ApprovalQuestion.of(json.loads(call["resultJson"]))
    hidden = question.show()
    question.restate()  # the rows right above the question name what it approves
    while True:
        answer = await reader.ask("approve? [y/n/s] " if hidden else "approve? [y/n] ")
        answer = answer.strip().lower()
        if answer in ("y", "yes", "n", "no"):
            approved = answer.startswith("y")
            return ToolResultInput(call["callId"], json.dumps({"approved": approved}))
        if answer == "s" and hidden:
            question.show_all()
            question.restate()
            hidden = 0


def _asks_approval(call: dict[str, Any]) -> bool:
    """True for a call that waits for approval (an MCP tool under an approval policy)."""
    try:
        request = json.loads(call.get("resultJson") or "null")
    except (ValueError, RecursionError):
        return False
    return isinstance(request, dict) and request.get("kind") == "approval_request"


def _show_result(result: TurnResult) -> None:
    if result.refusal:
        show_refusal(result.refusal)
    if result.kind == "error":
        _say_error(" ".join((result.error or "").split()))
    elif result.kind == "cancelled":
        # A call the cancel cut mid-run may have partly taken effect: said as recorded.
        repeated = repeated_names(result.tool_calls)
        for call in result.tool_calls:
            if call.get("outcome") in _CUT_MID_RUN:
                show_call(call, arguments=call.get("name") in repeated)
        say(("Turn cancelled.", "yellow"), " The chat goes on; Ctrl-C again quits.")
    for warning in result.warnings:
        if warning == result.error:
            continue  # a limit's reason is both the error and a warning: said once
        if result.kind != "cancelled" or "Cancelled" not in warning:
            say_rows(folded(warning, indent=len("warning: "), label=("warning:", "yellow")))
    if result.branched_session_id:
        say(f"New branched session: {result.branched_session_id}")
