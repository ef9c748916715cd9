"""The ``aptix`` application: sub-commands are registered here (:mod:`.main` runs it)."""

from __future__ import annotations

import os
from typing import Annotated

import typer
import typer.rich_utils
from typer.core import TyperOption

from aptix.cli import chat, db, mcp, modes, serve, sessions, tools, workflows
from aptix.cli.output import say

_typed = TyperOption.display_type_rich


def _display_type_rich(self: TyperOption, ctx: typer.Context) -> str | None:
    # Typer's boxed help shows "<bool>" beside a flag (--help, --version, the completion
    # options), as if it took a value; its plain help shows none, as here.
    return None if self.is_flag else _typed(self, ctx)


TyperOption.display_type_rich = _display_type_rich  # type: ignore[method-assign,assignment]


def _paragraphs(paragraphs: list[str], markup_mode: object) -> str:
    # Typer keeps a docstring's line breaks after its first paragraph, and rich then wraps
    # each line again: lines ended after two words. A paragraph is one line to wrap, unless
    # it opts out with \b as click's own help does.
    return "\n\n".join(p if p.startswith("\b") else p.replace("\n", " ") for p in paragraphs)


typer.rich_utils._fix_linebreaks = _paragraphs

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

        say(f"aptix {__version__}")
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


def run() -> None:
    """Run the ``aptix`` command line in this process, which is Aptix's own."""
    from aptix.log_setup import claim_process

    # This process is Aptix's own: every line on stderr, other libraries' too, is in its format.
    claim_process()
    _reserve_closed_stdout()
    app()


def _reserve_closed_stdout() -> None:
    """Put the null device at file descriptor 1 when the process started with stdout closed.

    Python then has no ``sys.stdout`` (a command's output ends with one line saying so), and
    the first file the command opens, the SQLite database say, would otherwise get the
    descriptor: whatever a library or a subprocess writes to "stdout" would land in it.
    """
    try:
        os.fstat(1)
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY)
        if null != 1:
            os.dup2(null, 1)
            os.close(null)
