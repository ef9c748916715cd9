"""``aptix tools``: list, describe and call the registered tools."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from aptix.cli.output import console, fail, print_json
from aptix.cli.runtime import run_with_runtime

if TYPE_CHECKING:
    from aptix.results import InvokeResult
    from aptix.runtime import Runtime

app = typer.Typer(help="List, describe and call tools.", no_args_is_help=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("list")
def list_tools(as_json: JsonFlag = False) -> None:
    """List every registered tool."""

    async def work(runtime: Runtime) -> list[dict[str, Any]]:
        return [
            {
                "name": schema["name"],
                "serverFinal": _server_final(runtime, schema["name"]),
                "description": schema["description"],
            }
            for schema in runtime.registry.schemas()
        ]

    rows = run_with_runtime(work)
    if as_json:
        print_json(rows)
        return
    table = Table(title="Aptix tools")
    table.add_column("name", style="bold")
    table.add_column("runs")
    table.add_column("description")
    for row in rows:
        table.add_row(row["name"], "server" if row["serverFinal"] else "client", row["description"])
    console.print(table)


@app.command("schema")
def show_schema(name: Annotated[str, typer.Argument(help="Tool name.")]) -> None:
    """Print a tool's function schema as JSON."""

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
    as_json: JsonFlag = False,
) -> None:
    """Call a tool once and print its InvokeResult; exits 1 when the call fails."""

    async def work(runtime: Runtime) -> InvokeResult[str]:
        context = runtime.tool_context(session_id=session_id, org=org, user=user)
        return await runtime.executor.invoke(name, arguments, context)

    outcome = run_with_runtime(work)
    result = _decode(outcome.result)
    if as_json:
        print_json({**outcome.to_wire(), "result": result})
    elif outcome.successful:
        print_json(result)
    else:
        fail(outcome.error_message or "The tool call failed.")
    if not outcome.successful:
        raise typer.Exit(1)


def _decode(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _server_final(runtime: Runtime, name: str) -> bool:
    tool_cls = runtime.registry.get_tool_type(name)
    return bool(tool_cls and tool_cls.is_fully_executed_on_server)
