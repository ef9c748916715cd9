"""``aptix workflows``: list, show, match and validate workflow manifests."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from aptix.cli.output import console, fail, print_json
from aptix.cli.runtime import run_with_runtime, settings_or_exit

if TYPE_CHECKING:
    from aptix.runtime import Runtime
    from aptix.settings import AptixSettings

app = typer.Typer(help="List, show, match and validate workflows.", no_args_is_help=True)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@app.command("list")
def list_workflows(
    as_json: JsonFlag = False,
    show_all: Annotated[
        bool, typer.Option("--all", help="Include hidden and disabled workflows.")
    ] = False,
) -> None:
    """List the workflows the model can discover (public and experimental, runnable)."""

    async def work(runtime: Runtime) -> list[dict[str, Any]]:
        registry = runtime.workflows.registry
        manifests = registry.all() if show_all else registry.listed()
        return [
            {
                "workflowId": m.workflow_id,
                "title": m.title,
                "version": m.version,
                "status": m.status.value,
                "visibility": m.visibility.value,
                "source": registry.source_of(m.workflow_id),
            }
            for m in manifests
        ]

    rows = run_with_runtime(work)
    if as_json:
        print_json(rows)
        return
    table = Table(title="Aptix workflows")
    for column in ("workflowId", "title", "version", "status", "visibility"):
        table.add_column(column, style="bold" if column == "workflowId" else None)
    for row in rows:
        table.add_row(
            *(str(row[c]) for c in ("workflowId", "title", "version", "status", "visibility"))
        )
    console.print(table)


@app.command("show")
def show_workflow(
    workflow_id: Annotated[str, typer.Argument(help="Workflow id (hidden ones too).")],
    as_json: JsonFlag = False,
) -> None:
    """Print one workflow's manifest; hidden workflows are shown only this way, by id."""
    from aptix.workflows.registry import status_note

    async def work(runtime: Runtime) -> dict[str, Any] | None:
        registry = runtime.workflows.registry
        manifest = registry.get(workflow_id)
        if manifest is None:
            return None
        out: dict[str, Any] = {
            "workflow": manifest.to_wire(),
            "source": registry.source_of(manifest.workflow_id),
        }
        note = status_note(manifest)
        if note:
            out["warnings"] = [note]
        return out

    found = run_with_runtime(work)
    if found is None:
        fail(f"Unknown workflow '{workflow_id}'.")
    if as_json:
        print_json(found)
        return
    manifest = found["workflow"]
    console.print(f"[bold]{manifest['workflowId']}[/] {manifest['version']} — {manifest['title']}")
    console.print(
        f"status {manifest['status']}, visibility {manifest['visibility']}, from {found['source']}"
    )
    for warning in found.get("warnings", ()):
        console.print(f"[yellow]warning:[/] {warning}")
    console.print(f"\n{manifest['description']}\n")
    console.print("[bold]Intent patterns[/]: " + "; ".join(manifest["userIntentPatterns"]))
    console.print("[bold]Permitted tools[/]: " + (", ".join(manifest["permittedTools"]) or "-"))
    console.print("[bold]Instructions[/]:\n" + manifest["instructionText"])


@app.command("match")
def match_workflows(
    message: Annotated[str, typer.Argument(help="A user message.")],
    limit: Annotated[int, typer.Option(min=1, max=20, help="Most matches to show.")] = 5,
    as_json: JsonFlag = False,
) -> None:
    """Rank the workflows that fit a user message (as match_workflow does)."""
    if not message.strip():
        fail("The message must not be empty.")

    async def work(runtime: Runtime) -> list[dict[str, Any]]:
        return [m.to_wire() for m in runtime.workflows.registry.match(message, limit)]

    rows = run_with_runtime(work)
    if as_json:
        print_json({"matches": rows})
        return
    if not rows:
        console.print("No workflow matches.")
        return
    table = Table(title="Matching workflows")
    for column in ("workflowId", "title", "matchScore", "runnable", "note"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["workflowId"],
            row["title"],
            f"{row['matchScore']:.2f}",
            "yes" if row["runnable"] else "no",
            row.get("note", ""),
        )
    console.print(table)


@app.command("validate")
def validate_workflows(
    path: Annotated[
        Path | None,
        typer.Argument(help="A folder of *.yaml workflows or one file (default: the configured)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Check the built-in workflows and PATH as start-up does; exit 1 on any problem."""
    from aptix.workflows.loader import collect_catalog

    settings = settings_or_exit()
    target = path or settings.workflows_path
    if target is not None and not target.exists():
        fail(f"{target} does not exist.")
    loaded, problems = collect_catalog(_known_tools(settings), target)
    if as_json:
        print_json(
            {
                "valid": not problems,
                "workflows": len(loaded),
                "problems": [
                    {
                        "source": p.source,
                        "workflowId": p.workflow_id,
                        "field": p.field,
                        "message": p.message,
                    }
                    for p in problems
                ],
            }
        )
    elif problems:
        for problem in problems:
            console.print(f"[red]✗[/] {problem}", markup=True, highlight=False, soft_wrap=True)
        console.print(f"{len(problems)} problem(s) in the workflow catalog.")
    else:
        console.print(f"[green]✓[/] {len(loaded)} workflows are valid.")
    if problems:
        raise typer.Exit(1)


def _known_tools(settings: AptixSettings) -> tuple[str, ...]:
    """The names a running server would register, without opening the database."""
    from aptix.logger import StdlibAdminLogger
    from aptix.runtime import BUILTIN_TOOLS
    from aptix.tools.plugins import register_plugins
    from aptix.tools.registry import AgentToolRegistry

    def never() -> Any:  # only the classes are checked; nothing is built
        raise AssertionError("validation builds no tools")

    registry = AgentToolRegistry(StdlibAdminLogger())
    for tool_cls in BUILTIN_TOOLS:
        registry.register(tool_cls, never)
    if settings.load_plugins:
        register_plugins(registry)
    return registry.registered_tools
