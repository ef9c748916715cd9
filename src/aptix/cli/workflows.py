"""``aptix workflows``: list, show, match and validate workflow manifests."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from aptix.cli.foreign_output import stdout_kept_for_results
from aptix.cli.output import (
    add_row,
    fail,
    new_table,
    print_json,
    print_table,
    refuse_bad_names,
    refuse_unstorable,
    say,
    warn,
)
from aptix.cli.runtime import config_failed, run_with_runtime, settings_or_exit
from aptix.errors import ConfigurationError
from aptix.tool_names import is_pattern, matches

if TYPE_CHECKING:
    from aptix.results import InvokeResult
    from aptix.runtime import Runtime
    from aptix.settings import AptixSettings
    from aptix.workflows.loader import ManifestProblem

app = typer.Typer(help="List, show, match and validate workflows.", no_args_is_help=True)

#: How long ``workflows match`` waits for the cascade's larger index (a few seconds for a
#: catalog of some dozens of workflows; ten thousand take minutes).
CASCADE_WAIT_SECONDS = 60.0

JsonFlag = Annotated[
    bool, typer.Option("--json/--no-json", metavar="", help="Print JSON instead of a table.")
]
OrgOption = Annotated[
    str,
    typer.Option(
        "--org", help="Whose authored workflows to include (deployment-wide ones always are)."
    ),
]


@app.command("list")
def list_workflows(
    as_json: JsonFlag = False,
    show_all: Annotated[
        bool,
        typer.Option("--all/--no-all", metavar="", help="Include hidden and disabled workflows."),
    ] = False,
    org: OrgOption = "local",
) -> None:
    """List the workflows the model can discover (public and experimental, runnable)."""
    refuse_unstorable({"--org": org})
    refuse_bad_names({"--org": org})

    async def work(runtime: Runtime) -> list[dict[str, Any]]:
        registry = runtime.workflows.registry
        manifests = registry.all(org) if show_all else registry.listed(org)
        return [
            {
                "workflowId": m.workflow_id,
                "title": m.title,
                "version": m.version,
                "status": m.status.value,
                "visibility": m.visibility.value,
                "source": registry.source_of(m.workflow_id, org),
            }
            for m in manifests
        ]

    rows = run_with_runtime(work)
    if as_json:
        print_json(rows)
        return
    columns = ("workflowId", "title", "version", "status", "visibility")
    table = new_table("Aptix workflows", *columns, bold_first=True, ids=("workflowId",))
    for row in rows:
        add_row(table, *(row[c] for c in columns))
    print_table(table)


@app.command("show")
def show_workflow(
    workflow_id: Annotated[str, typer.Argument(help="Workflow id (hidden ones too).")],
    as_json: JsonFlag = False,
    org: OrgOption = "local",
) -> None:
    """Print one workflow's manifest; hidden workflows are shown only this way, by id."""
    refuse_unstorable({"WORKFLOW_ID": workflow_id, "--org": org})
    refuse_bad_names({"--org": org})
    from aptix.workflows.registry import status_note

    async def work(runtime: Runtime) -> dict[str, Any] | None:
        registry = runtime.workflows.registry
        manifest = registry.get(workflow_id, org)
        if manifest is None:
            return None
        out: dict[str, Any] = {
            "workflow": manifest.to_wire(),
            "source": registry.source_of(manifest.workflow_id, org),
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
    say((manifest["workflowId"], "bold"), f" {manifest['version']} — {manifest['title']}")
    say(f"status {manifest['status']}, visibility {manifest['visibility']}, from {found['source']}")
    for warning in found.get("warnings", ()):
        say(("warning:", "yellow"), f" {warning}")
    say(f"\n{manifest['description']}\n")
    say(("Intent patterns", "bold"), ": " + "; ".join(manifest["userIntentPatterns"]))
    say(("Permitted tools", "bold"), ": " + (", ".join(manifest["permittedTools"]) or "-"))
    say(("Instructions", "bold"), ":\n" + manifest["instructionText"])


@app.command("match")
def match_workflows(
    message: Annotated[str, typer.Argument(help="A user message.")],
    limit: Annotated[int, typer.Option(min=1, max=20, help="Most matches to show.")] = 5,
    as_json: JsonFlag = False,
    org: OrgOption = "local",
) -> None:
    """Rank the workflows that fit a user message (as match_workflow does)."""
    # Before anything else: the message goes to the registry tool as JSON, whose parser would
    # blame "Arguments" for a byte the person typed.
    refuse_unstorable({"MESSAGE": message, "--org": org})
    refuse_bad_names({"--org": org})
    from aptix.tools.builtin.base import too_long
    from aptix.tools.builtin.workflow_registry import MAX_MESSAGE_LENGTH

    text = message.strip()
    if not text:
        fail("The message must not be empty.", code=2)
    if long := too_long("The message", text, MAX_MESSAGE_LENGTH):
        fail(long, code=2)

    async def work(runtime: Runtime) -> InvokeResult[str]:
        registry = runtime.workflows.registry
        # A server orders unsure matches with the cascade once its index is built: wait for
        # it, so that this command answers as match_workflow does.
        ready = await asyncio.to_thread(registry.settle, org, min(1.0, CASCADE_WAIT_SECONDS))
        if ready is False and CASCADE_WAIT_SECONDS > 1.0:
            warn("Building the larger encoder's index of the workflows...")
            ready = await asyncio.to_thread(registry.settle, org, CASCADE_WAIT_SECONDS - 1.0)
        if ready is False:
            warn(
                f"warning: the larger encoder's index was not built within "
                f"{CASCADE_WAIT_SECONDS:.0f} s; these matches are in MiniLM's order "
                "(APTIX_MATCH_CASCADE=false skips the wait)"
            )
        # Through the registry tool, as match_workflow and POST /v1/workflows/match: the same
        # limits, and the model as arbiter when APTIX_MATCH_ARBITER asks for it.
        arguments = {"operation": "match_workflow", "userMessage": text, "limit": limit}
        return await runtime.executor.invoke(
            "agent_workflow_registry", json.dumps(arguments), runtime.tool_context(org=org)
        )

    outcome = run_with_runtime(work, matches=True)
    if outcome.result is None:
        fail(outcome.error_message or "The workflow registry failed.")
    rows: list[dict[str, Any]] = json.loads(outcome.result)["matches"]
    if as_json:
        print_json({"matches": rows})
        return
    if not rows:
        say("No workflow matches.")
        return
    table = new_table(
        "Matching workflows",
        *("workflowId", "title", "matchScore", "runnable", "note"),
        ids=("workflowId",),
    )
    for row in rows:
        add_row(
            table,
            row["workflowId"],
            row["title"],
            f"{row['matchScore']:.2f}",
            "yes" if row["runnable"] else "no",
            row.get("note", ""),
        )
    print_table(table)


@app.command("validate")
def validate_workflows(
    path: Annotated[
        Path | None,
        typer.Argument(help="A folder of *.yaml workflows or one file (default: the configured)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Check the built-in workflows and PATH as start-up does; exit 1 on any problem.

    Without PATH, the published workflows in the database are checked too: start-up serves
    the others and leaves those out. A PATH that does not exist exits 2.
    """
    from aptix.nul import not_utf8
    from aptix.workflows.loader import collect_catalog
    from aptix.workflows.sync import left_out

    settings = settings_or_exit()
    target = path or settings.workflows_path
    if target is not None and not target.exists():
        # A byte that is not UTF-8 is most likely a terminal's other encoding: named as such.
        byte = not_utf8(str(target))
        fail(f"{byte} (found in PATH)." if byte else f"{target} does not exist.", code=2)
    with stdout_kept_for_results():
        known = _known_tools(settings)
    patterns = _mcp_patterns(settings)
    note = ""
    if patterns:
        # No server is started, so a tool under a server's prefix is taken to be one of its own.
        first, _ = collect_catalog([*known, *patterns], target)
        listed = {t for item in first for t in item.manifest.permitted_tools}
        # A listed pattern is not lent: only the servers' own `<prefix>_*` are, as at start-up.
        under = (t for t in listed if not is_pattern(t) and any(matches(t, p) for p in patterns))
        known = (*known, *patterns, *under)
        note = (
            f"MCP servers are not started: tools under {', '.join(patterns)} "
            "are checked by prefix only."
        )
    loaded, problems = collect_catalog(known, target)
    # The store's revisions are checked by the runtime, which a broken file does not open.
    stored = _stored_problems(settings) if path is None and not problems else None
    if note and not as_json:
        say(("note:", "yellow"), f" {note}")
    if as_json:
        print_json(
            {
                "valid": not problems and not stored,
                "workflows": len(loaded),
                "problems": [_wire(p) for p in problems],
                **({"stored": [_wire(p) for p in stored]} if stored is not None else {}),
                **({"note": note} if note else {}),
            }
        )
    elif problems:
        for problem in problems:
            say(("✗", "red"), f" {problem}")
        say(f"{len(problems)} problem(s) in the workflow catalog.")
    else:
        say(("✓", "green"), f" {len(loaded)} workflows are valid.")
        if stored:
            for sentence in left_out(stored):
                say(("✗", "red"), f" {sentence}")
            say(f"{len(stored)} problem(s) in stored workflows, which are not served.")
    if problems or stored:
        raise typer.Exit(1)


def _stored_problems(settings: AptixSettings) -> list[ManifestProblem]:
    """The problems of the stored revisions that start-up leaves out (every org's)."""
    from aptix.workflows.sync import read_published

    async def work(runtime: Runtime) -> list[ManifestProblem]:
        services = runtime.workflows
        return (await read_published(services.store, services.registry))[1]

    # No matching is done, and MCP servers lend their prefixes as while one is down.
    quick = settings.model_copy(update={"semantic_matching": False})
    return run_with_runtime(work, quick, connect_mcp=False)


def _wire(problem: ManifestProblem) -> dict[str, Any]:
    return {
        "source": problem.source,
        "workflowId": problem.workflow_id,
        "field": problem.field,
        "message": problem.message,
    }


def _known_tools(settings: AptixSettings) -> tuple[str, ...]:
    """The names a running server would register, without opening the database or MCP servers."""
    from aptix.logger import StdlibAdminLogger
    from aptix.runtime import BUILTIN_TOOLS
    from aptix.tools.modules import load_tool_modules, register_tool_modules
    from aptix.tools.plugins import register_plugins
    from aptix.tools.registry import AgentToolRegistry

    def never() -> Any:  # only the classes are checked; nothing is built
        raise AssertionError("validation builds no tools")

    registry = AgentToolRegistry(StdlibAdminLogger())
    for tool_cls in BUILTIN_TOOLS:
        registry.register(tool_cls, never)
    try:
        if settings.load_plugins:
            register_plugins(registry)
        register_tool_modules(registry, load_tool_modules(settings.tool_modules))
    except ConfigurationError as exc:
        config_failed(exc)
    return registry.registered_tools


def _mcp_patterns(settings: AptixSettings) -> list[str]:
    """``<prefix>_*`` of every enabled MCP server, as start-up lends them while a server is down."""
    from aptix.settings_mcp import tool_prefix

    return [
        f"{tool_prefix(name, config)}_*"
        for name, config in settings.mcp_servers.items()
        if config.enabled
    ]
