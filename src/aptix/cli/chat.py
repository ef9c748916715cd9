"""``aptix chat``: an interactive terminal chat with the configured model."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.prompt import Confirm

from aptix.cli.output import console, fail, say
from aptix.cli.runtime import config_failed

if TYPE_CHECKING:
    from aptix.reasoner import AgentReasoner, TurnEvent, TurnResult
    from aptix.runtime import Runtime

HELP = "Commands: /mode KEY, /modes, /workflows, /new, /quit"
APPROVAL_TOOL = "request_user_approval"


def chat(
    session_id: Annotated[
        str | None, typer.Option("--session-id", help="Continue this session.")
    ] = None,
    mode: Annotated[str | None, typer.Option(help="Mode of a new session.")] = None,
) -> None:
    """Chat with the agent: tool calls show as they run; approvals are asked here."""
    from aptix.errors import AptixError, ConfigurationError

    try:
        asyncio.run(_main(session_id, mode))
    except ConfigurationError as exc:
        config_failed(exc)
    except AptixError as exc:
        fail(str(exc))
    except (KeyboardInterrupt, EOFError):
        console.print()


async def _main(session_id: str | None, mode: str | None) -> None:
    from aptix.runtime import open_runtime

    async with open_runtime() as runtime:
        reasoner = runtime.reasoner()
        current = await _open_session(runtime, session_id, mode)
        say(("Aptix chat", "bold"), f" — session {current}. {HELP}")
        while True:
            line = (await asyncio.to_thread(console.input, "you> ")).strip()
            if not line:
                continue
            if line.startswith("/"):
                done, current = await _command(runtime, current, line)
                if done:
                    return
                continue
            await _turn(runtime, reasoner, current, instruction=line)


async def _open_session(runtime: Runtime, session_id: str | None, mode: str | None) -> str:
    from aptix.errors import AptixError

    sessions = runtime.services.sessions
    if session_id:
        if await sessions.get_session(session_id, "local") is None:
            raise AptixError(f"Unknown session '{session_id}'.")
        return session_id
    created = await sessions.create_session(org="local", user="local", mode=mode)
    if created.result is None:
        raise AptixError(created.error_message or "Could not create a session.")
    welcome = runtime.services.modes.get_mode(created.result.mode).welcome_message
    if welcome:
        say((welcome, "italic"))
    return created.result.id


async def _command(runtime: Runtime, current: str, line: str) -> tuple[bool, str]:
    command, _, argument = line.partition(" ")
    if command in ("/quit", "/exit"):
        return True, current
    if command == "/new":
        return False, await _open_session(runtime, None, argument.strip() or None)
    if command == "/modes":
        for m in await runtime.services.modes.get_all_modes():
            say("  ", (m.key, "bold"), f" — {m.description}")
    elif command == "/workflows":
        for w in runtime.workflows.registry.listed():
            say("  ", (w.workflow_id, "bold"), f" — {w.title}")
    elif command == "/mode":
        changed = await runtime.services.sessions.set_session_mode(
            current, argument.strip(), "Changed by the user in aptix chat.", "local", "local"
        )
        if changed.result is None:
            say((changed.error_message or "", "red"))
        else:
            say("Mode is now ", (changed.result.mode, "bold"), ".")
    else:
        say(HELP)
    return False, current


async def _turn(
    runtime: Runtime, reasoner: AgentReasoner, session_id: str, instruction: str
) -> None:
    from aptix.reasoner import ToolResultInput

    results: list[ToolResultInput] | None = None
    while True:
        with console.status("thinking…"):
            result = await reasoner.execute(
                session_id=session_id,
                org="local",
                user="local",
                instruction=None if results else instruction,
                tool_results=results,
                on_event=_show,
            )
        if result.kind != "tool-only":
            _show_result(result)
            return
        results = [_client_result(c) for c in result.tool_calls if c["requiresClientExecution"]]


async def _show(event: TurnEvent) -> None:
    data = event.data
    if event.type == "text":
        say(("agent>", "bold green"), f" {data['text']}")
    elif event.type == "tool_call_finished" and not data["requiresClientExecution"]:
        outcome = data["resultJson"] if data["wasExecuted"] else f"error: {data['errorMessage']}"
        say((f"  ⚙ {data['name']}({data['argumentsJson']}) → {outcome}", "dim"))
    elif event.type == "mode_changed":
        say((f"mode → {data['mode']}", "yellow"))
        if data.get("welcomeMessage"):
            say((data["welcomeMessage"], "italic"))


def _client_result(call: dict[str, Any]) -> Any:
    from aptix.reasoner import ToolResultInput

    if call["name"] != APPROVAL_TOOL and not _asks_approval(call):
        message = {"error": f"aptix chat cannot run the client tool '{call['name']}'."}
        return ToolResultInput(call["callId"], json.dumps(message), is_error=True)
    request = json.loads(call["resultJson"])
    say(("approval needed:", "bold magenta"), f" {request['prompt']}")
    if request.get("details"):
        say(f"  {request['details']}")
    approved = Confirm.ask("approve?", console=console)
    return ToolResultInput(call["callId"], json.dumps({"approved": approved}))


def _asks_approval(call: dict[str, Any]) -> bool:
    """True for a call that waits for approval (an MCP tool under an approval policy)."""
    try:
        request = json.loads(call.get("resultJson") or "null")
    except ValueError:
        return False
    return isinstance(request, dict) and request.get("kind") == "approval_request"


def _show_result(result: TurnResult) -> None:
    if result.kind == "error":
        say((result.error or "", "red"))
    for warning in result.warnings:
        say(("warning:", "yellow"), f" {warning}")
    if result.branched_session_id:
        say(f"New branched session: {result.branched_session_id}")
