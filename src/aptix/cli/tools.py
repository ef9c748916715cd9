"""``aptix tools``: list, describe and call the registered tools."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from aptix.cli.output import (
    add_row,
    fail,
    new_table,
    print_json,
    print_table,
    refuse_bad_names,
    refuse_unstorable,
)
from aptix.cli.runtime import database_failure, is_database_error, run_with_runtime
from aptix.results import InvokeResult, json_value

if TYPE_CHECKING:
    from aptix.runtime import Runtime

app = typer.Typer(help="List, describe and call tools.", no_args_is_help=True)

JsonFlag = Annotated[
    bool, typer.Option("--json/--no-json", metavar="", help="Print JSON instead of a table.")
]


@app.command("list")
def list_tools(as_json: JsonFlag = False) -> None:
    """List every registered tool."""

    async def work(runtime: Runtime) -> list[dict[str, Any]]:
        return [
            {
                "name": schema["name"],
                "serverFinal": _server_final(runtime, schema["name"]),
                "description": schema["description"],
                "annotations": _annotations(runtime, schema["name"]),
            }
            for schema in runtime.registry.schemas()
        ]

    rows = run_with_runtime(work)
    if as_json:
        print_json(rows)
        return
    table = new_table(
        "Aptix tools", "name", "runs", "hints", "description", bold_first=True, ids=("name",)
    )
    for row in rows:
        add_row(
            table,
            row["name"],
            "server" if row["serverFinal"] else "client",
            _hints(row["annotations"]),
            row["description"],
        )
    print_table(table)


@app.command("schema")
def show_schema(name: Annotated[str, typer.Argument(help="Tool name.")]) -> None:
    """Print a tool's function schema as JSON."""
    refuse_unstorable({"NAME": name})

    async def work(runtime: Runtime) -> dict[str, Any] | str:
        tool_cls = runtime.registry.get_tool_type(name)
        if tool_cls is None:
            known = ", ".join(runtime.registry.registered_tools)
            return f"Unknown tool '{name}'. Registered tools: {known}."
        return tool_cls.schema()

    schema = run_with_runtime(work)
    if isinstance(schema, str):
        fail(schema)
    print_json(schema)


@app.command("call")
def call_tool(
    name: Annotated[str, typer.Argument(help="Tool name.")],
    arguments: Annotated[str, typer.Argument(help="Arguments as a JSON object.")] = "{}",
    session_id: Annotated[
        str | None, typer.Option("--session-id", help="Session the tool runs in.")
    ] = None,
    org: Annotated[str, typer.Option(help="Organisation of the caller.")] = "local",
    user: Annotated[str, typer.Option(help="User of the caller.")] = "local",
    role: Annotated[str, typer.Option(help="Role of the caller: user, author or admin.")] = "admin",
    as_json: Annotated[
        bool,
        typer.Option(
            "--json/--no-json",
            metavar="",
            help="Print the whole {successful, result, errors} envelope, not only the result.",
        ),
    ] = False,
) -> None:
    """Call a tool once and print its result as JSON; exits 1 when the call fails."""
    from aptix.settings import ROLES

    if role not in ROLES:
        fail(f"--role must be one of: {', '.join(ROLES)}.", code=2)
    refuse_unstorable({"NAME": name, "--session-id": session_id, "--org": org, "--user": user})
    refuse_bad_names({"--org": org, "--user": user})
    _refuse_unstorable(arguments)

    async def work(runtime: Runtime) -> tuple[InvokeResult[str], str | None]:
        from aptix.errors import NotFoundError

        try:
            context = await runtime.session_context(
                org=org, user=user, role=role, session_id=session_id
            )
        except NotFoundError as exc:
            return InvokeResult.from_error(str(exc)), None
        with _held_logs() as held:
            outcome = await runtime.executor.invoke(name, arguments, context)
        # The failure is printed below as the command's message; a log line saying the same
        # would show it twice, and one with the traceback of a database error (a tool that
        # logs what it met, as agent_change_mode does) is said in the message instead.
        # Every other record is passed on as it was.
        database = None
        for record in held:
            met = record.exc_info[1] if record.exc_info else None
            if met is not None and not outcome.successful and is_database_error(met):
                database = database_failure(runtime.settings.effective_database_url, met)
            elif outcome.error_message is None or outcome.error_message not in record.getMessage():
                logging.getLogger(record.name).handle(record)
        return outcome, database

    outcome, database = run_with_runtime(work)
    result = json_value(outcome.result)
    if as_json:
        print_json({**outcome.to_wire(), "result": result})
        if database is not None:
            fail(database)
    elif outcome.successful:
        print_json(result)
    else:
        said = outcome.error_message or "The tool call failed."
        fail(f"{said} {database}" if database is not None else said)
    if not outcome.successful:
        raise typer.Exit(1)


def _refuse_unstorable(arguments: str) -> None:
    """End the command when ``arguments`` hold a NUL or a lone surrogate, as HTTP and MCP do.

    Exit code 2, as for every other typed value refused: the tool never ran, so it is not a
    failed call (exit code 1).
    """
    from aptix.nul import (
        NUL_REFUSED,
        SURROGATE_REFUSED,
        find_nul_in_json,
        find_surrogate_in_json,
        not_utf8,
    )

    # A byte that is not UTF-8 is named as such; a "\\ud800" escape the person wrote in the
    # JSON is a real lone surrogate, and is named as one.
    if (byte := not_utf8(arguments)) is not None:
        fail(f"{byte} (found in ARGUMENTS).", code=2)
    # Before the tool runs: what it stores would fail on PostgreSQL and succeed on SQLite.
    for found, refused in (
        (find_nul_in_json(arguments), NUL_REFUSED),
        (find_surrogate_in_json(arguments), SURROGATE_REFUSED),
    ):
        if found is not None:
            fail(f"{refused} (found in '{found}').", code=2)


def _annotations(runtime: Runtime, name: str) -> dict[str, Any] | None:
    tool_cls = runtime.registry.get_tool_type(name)
    return tool_cls.TOOL_ANNOTATIONS if tool_cls is not None else None


def _hints(annotations: dict[str, Any] | None) -> str:
    """Short words for the MCP hints that are set (``read-only``, ``destructive``, ...)."""
    hints = annotations or {}
    words = {
        "readOnlyHint": "read-only",
        "destructiveHint": "destructive",
        "idempotentHint": "idempotent",
        "openWorldHint": "open-world",
    }
    return ", ".join(word for key, word in words.items() if hints.get(key) is True)


@contextmanager
def _held_logs() -> Iterator[list[logging.LogRecord]]:
    """Hold back the ``aptix`` log records emitted inside the block (yielded as a list)."""
    held: list[logging.LogRecord] = []
    handlers = logging.getLogger("aptix").handlers

    def hold(record: logging.LogRecord) -> bool:
        if not any(r is record for r in held):  # one record passes every handler
            held.append(record)
        return False

    for handler in handlers:
        handler.addFilter(hold)
    try:
        yield held
    finally:
        for handler in handlers:
            handler.removeFilter(hold)


def _server_final(runtime: Runtime, name: str) -> bool:
    return runtime.registry.server_final(name) is True
