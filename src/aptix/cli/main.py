"""The ``aptix`` application: sub-commands are registered here."""

from __future__ import annotations

from typing import Annotated

import typer

from aptix.cli import chat, db, mcp, modes, serve, sessions, tools, workflows

app = typer.Typer(
    name="aptix",
    help="Aptix: a governed runtime for LLM agent tools.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # sub-commands inherit it
)


def _show_version(value: bool) -> None:
    if value:
        from aptix import __version__

        typer.echo(f"aptix {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_show_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Aptix: a governed runtime for LLM agent tools."""


app.add_typer(tools.app, name="tools")
app.add_typer(modes.app, name="modes")
app.add_typer(sessions.app, name="sessions")
app.add_typer(db.app, name="db")
app.add_typer(serve.config_app, name="config")
app.command("serve")(serve.serve)
app.command("chat")(chat.chat)
app.command("mcp")(mcp.mcp)
app.add_typer(workflows.app, name="workflows")


def main() -> None:
    """Entry point of the ``aptix`` script."""
    from aptix.log_setup import claim_process

    # This process is Aptix's own: every line on stderr, other libraries' too, is in its format.
    claim_process()
    app()
