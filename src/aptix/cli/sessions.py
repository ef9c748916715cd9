"""``aptix sessions``: create, list, inspect and prune sessions in the local store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from aptix.cli.output import (
    add_row,
    err_console,
    fail,
    folded,
    new_table,
    print_json,
    print_table,
    refuse_bad_names,
    refuse_unstorable,
    say,
    say_rows,
)
from aptix.cli.runtime import run_with_runtime
from aptix.cli.sessions_prune import prune
from aptix.sessions.wire import session_to_json

if TYPE_CHECKING:
    from aptix.results import InvokeResult
    from aptix.runtime import Runtime
    from aptix.sessions.models import AgentSession

app = typer.Typer(help="Create, list, inspect and prune sessions.", no_args_is_help=True)

JsonFlag = Annotated[bool, typer.Option("--json/--no-json", metavar="", help="Print JSON.")]
OrgOption = Annotated[str, typer.Option(help="Organisation of the caller.")]
UserOption = Annotated[str, typer.Option(help="User of the caller.")]

#: Most rows ``sessions list`` skips, as ``GET /v1/sessions`` (a larger one overflowed SQLite's
#: INTEGER into a traceback, and no one pages that far).
MAX_OFFSET = 1_000_000


@app.command("create")
def create(
    mode: Annotated[str | None, typer.Option(help="Mode key (default: the default mode).")] = None,
    title: Annotated[str | None, typer.Option(help="A title for the session.")] = None,
    org: OrgOption = "local",
    user: UserOption = "local",
    as_json: JsonFlag = False,
) -> None:
    """Create a session and print its id."""
    refuse_unstorable({"--mode": mode, "--title": title, "--org": org, "--user": user})
    refuse_bad_names({"--org": org, "--user": user})
    from aptix.sessions.models import MAX_TITLE_LENGTH

    # The limits POST /v1/sessions applies, so a session the CLI made is one HTTP could make.
    if title is not None and len(title) > MAX_TITLE_LENGTH:
        fail(f"--title is {len(title)} characters long; the most is {MAX_TITLE_LENGTH}.", code=2)

    async def work(runtime: Runtime) -> InvokeResult[AgentSession]:
        return await runtime.services.sessions.create_session(
            org=org, user=user, mode=mode, title=title
        )

    created = run_with_runtime(work)
    if created.result is None:
        fail(created.error_message or "Could not create the session.")
    if as_json:
        print_json(session_to_json(created.result))
    else:
        # The id alone on stdout, so that `S=$(aptix sessions create)` holds it; a person
        # at a terminal also reads the mode.
        say(created.result.id)
        if err_console.is_terminal:
            say(f"Created in mode {created.result.mode}.", to=err_console)


@app.command("list")
def list_sessions(
    limit: Annotated[int, typer.Option(min=1, max=200, help="Page size.")] = 50,
    offset: Annotated[int, typer.Option(min=0, max=MAX_OFFSET, help="Rows to skip.")] = 0,
    org: OrgOption = "local",
    user: UserOption = "local",
    as_json: JsonFlag = False,
) -> None:
    """List your sessions, most recently updated first."""
    refuse_unstorable({"--org": org, "--user": user})
    refuse_bad_names({"--org": org, "--user": user})

    async def work(runtime: Runtime) -> list[AgentSession]:
        return await runtime.services.sessions.list_sessions(org, user, limit=limit, offset=offset)

    sessions = run_with_runtime(work)
    if as_json:
        print_json([session_to_json(s) for s in sessions])
        return
    table = new_table(
        f"Sessions of {user} in {org}",
        *("id", "mode", "title", "parent", "updated"),
        ids=("id", "mode", "parent"),
    )
    for s in sessions:
        add_row(table, s.id, s.mode, s.title, s.parent_session_id, f"{s.updated_at:%Y-%m-%d %H:%M}")
    print_table(table)


@app.command("show")
def show(
    session_id: Annotated[str, typer.Argument(help="Session id.")],
    org: OrgOption = "local",
    user: UserOption = "local",
    as_json: JsonFlag = False,
) -> None:
    """Show a session with its mode history and branched sessions."""
    refuse_unstorable({"SESSION_ID": session_id, "--org": org, "--user": user})
    refuse_bad_names({"--org": org, "--user": user})
    from aptix.sessions.access import owned_session

    async def work(runtime: Runtime) -> tuple[AgentSession | None, list[AgentSession]]:
        sessions = runtime.services.sessions
        # The owner check of every surface: another user's session looks missing, as over HTTP.
        found = await owned_session(sessions, session_id, org, user)
        children = await sessions.list_children(session_id, org) if found else []
        return found, children

    session, children = run_with_runtime(work)
    if session is None:
        fail(f"Unknown session '{session_id}'.")
    if as_json:
        print_json({**session_to_json(session), "childSessionIds": [c.id for c in children]})
        return
    say((f"Session {session.id}", "bold"), f"  ({session.org}/{session.user})")
    # The title (any caller's) and the reason (the model's) may hold line breaks and run past
    # the terminal's width: folded under their label, they never start a line as ours do.
    reason = f" — {session.mode_reason}" if session.mode_reason else ""
    say_rows(folded((session.mode, "bold"), reason, indent=6, label="mode:"))
    if session.title:
        say_rows(folded(session.title, indent=7, label="title:"))
    if session.parent_session_id:
        say(f"branched from: {session.parent_session_id}")
    if session.active_workflow_id:
        say(f"active workflow: {session.active_workflow_id}")
    table = new_table("Mode history", "#", "from", "to", "reason", "by", "at", ids=("from", "to"))
    for i, h in enumerate(session.mode_history, 1):
        add_row(
            table,
            i,
            h.previous_mode,
            h.mode,
            h.reason,
            h.changed_by,
            f"{h.changed_at:%Y-%m-%d %H:%M:%S}",
        )
    print_table(table)
    for child in children:
        say(f"branched session: {child.id} (mode {child.mode})")


@app.command("cancel-workflow")
def cancel_workflow(
    session_id: Annotated[str, typer.Argument(help="Session id.")],
    org: OrgOption = "local",
    user: UserOption = "local",
    as_json: JsonFlag = False,
) -> None:
    """Cancel the session's active workflow, as the user."""
    refuse_unstorable({"SESSION_ID": session_id, "--org": org, "--user": user})
    refuse_bad_names({"--org": org, "--user": user})
    from aptix.errors import NotFoundError
    from aptix.results import InvokeResult

    async def work(runtime: Runtime) -> InvokeResult[str]:
        try:
            return await runtime.cancel_workflow(
                org=org, user=user, role="user", session_id=session_id
            )
        except NotFoundError:
            return InvokeResult.from_error(f"Unknown session '{session_id}'.")

    cancelled = run_with_runtime(work)
    if cancelled.result is None:
        fail(cancelled.error_message or "The workflow could not be cancelled.")
    if as_json:
        print_json({"sessionId": session_id, "cancelled": cancelled.result})
    else:
        say("Cancelled workflow ", (cancelled.result, "bold"), f" of session {session_id}.")


app.command("prune")(prune)
