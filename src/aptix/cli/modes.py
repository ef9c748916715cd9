"""``aptix modes``: the mode catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from aptix.cli.output import add_row, new_table, print_json, print_table
from aptix.cli.runtime import run_with_runtime

if TYPE_CHECKING:
    from aptix.modes.models import ModeDefinition
    from aptix.runtime import Runtime

app = typer.Typer(help="Show the configured modes.", no_args_is_help=True)


@app.command("list")
def list_modes(
    as_json: Annotated[
        bool, typer.Option("--json/--no-json", metavar="", help="Print JSON instead of a table.")
    ] = False,
) -> None:
    """List every mode of the catalog, with the tools it offers."""

    async def work(runtime: Runtime) -> list[tuple[ModeDefinition, list[str]]]:
        catalog = runtime.services.modes
        return [(m, catalog.tools_for_mode(m.key)) for m in await catalog.get_all_modes()]

    modes = run_with_runtime(work)
    if as_json:
        print_json(
            [{**m.model_dump(mode="json", by_alias=True), "offeredTools": t} for m, t in modes]
        )
        return
    table = new_table(
        "Aptix modes",
        *("key", "name", "default", "description", "tools offered"),
        bold_first=True,
        ids=("key",),
    )
    for mode, tools in modes:
        add_row(
            table,
            mode.key,
            mode.display_name,
            "yes" if mode.is_default else "",
            mode.description,
            ", ".join(tools),
        )
    print_table(table)
