"""``aptix chat``: an interactive terminal chat with the configured model."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.prompt import Confirm

from aptix.cli.output import console, fail

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
        fail(str(exc), code=2)
    except AptixError as exc:
        fail(str(exc))
    except (KeyboardInterrupt, EOFError):
        console.print()


async def _main(session_id: str | None, mode: str | None) -> None:
    from aptix.runtime import open_runtime

    async with open_runtime() as runtime:
        reasoner = runtime.reasoner()
        current = await _open_session(runtime, session_id, mode)
        console.print(f"[bold]Aptix chat[/] — session {current}. {HELP}")
        while True:
            line = (await asyncio.to_thread(console.input, "[bold cyan]you>[/] ")).strip()
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
        console.print(f"[italic]{welcome}[/]")
    return created.result.id


async def _command(runtime: Runtime, current: str, line: str) -> tuple[bool, str]:
    command, _, argument = line.partition(" ")
    if command in ("/quit", "/exit"):
        return True, current
    if command == "/new":
        return False, await _open_session(runtime, None, argument.strip() or None)
    if command == "/modes":
        for m in await runtime.services.modes.get_all_modes():
            console.print(f"  [bold]{m.key}[/] — {m.description}")
    elif command == "/workflows":
        for w in runtime.workflows.registry.listed():
            console.print(f"  [bold]{w.workflow_id}[/] — {w.title}")
    elif command == "/mode":
        changed = await runtime.services.sessions.set_session_mode(
            current, argument.strip(), "Changed by the user in aptix chat.", "local", "local"
        )
        if changed.result is None:
            console.print(f"[red]{changed.error_message}[/]")
        else:
            console.print(f"Mode is now [bold]{changed.result.mode}[/].")
    else:
        console.print(HELP)
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
        console.print(f"[bold green]agent>[/] {data['text']}")
    elif event.type == "tool_call_finished" and not data["requiresClientExecution"]:
        outcome = data["resultJson"] if data["wasExecuted"] else f"error: {data['errorMessage']}"
        console.print(f"  [dim]⚙ {data['name']}({data['argumentsJson']}) → {outcome}[/]")
    elif event.type == "mode_changed":
        console.print(f"[yellow]mode → {data['mode']}[/]")
        if data.get("welcomeMessage"):
            console.print(f"[italic]{data['welcomeMessage']}[/]")


def _client_result(call: dict[str, Any]) -> Any:
    from aptix.reasoner import ToolResultInput

    if call["name"] != APPROVAL_TOOL:
        message = {"error": f"aptix chat cannot run the client tool '{call['name']}'."}
        return ToolResultInput(call["callId"], json.dumps(message), is_error=True)
    request = json.loads(call["resultJson"])
    console.print(f"[bold magenta]approval needed:[/] {request['prompt']}")
    if request.get("details"):
        console.print(f"  {request['details']}")
    approved = Confirm.ask("approve?", console=console)
    return ToolResultInput(call["callId"], json.dumps({"approved": approved}))


def _show_result(result: TurnResult) -> None:
    if result.kind == "error":
        console.print(f"[red]{result.error}[/]")
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    if result.branched_session_id:
        console.print(f"New branched session: {result.branched_session_id}")
