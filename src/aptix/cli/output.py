"""Shared console helpers: JSON for pipes, Rich for people, clean errors for both.

Every string that came from outside (model text, tool results, titles, file contents, error
details) reaches the terminal through :func:`say`, :func:`styled`, :func:`new_table` or
:func:`fail`, which build Rich :class:`~rich.text.Text` objects: nothing is ever parsed as
markup or emoji codes, so ``[bold]``, ``[/x]`` or ``list[str]`` print byte for byte. The
consoles themselves have markup off too, so a plain ``console.print(s)`` is also safe.
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = [
    "Part",
    "add_row",
    "console",
    "err_console",
    "fail",
    "new_table",
    "print_json",
    "say",
    "styled",
    "warn",
]

console = Console(highlight=False, markup=False, emoji=False)
err_console = Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)

#: A piece of a line: plain text, or ``(text, style)`` where only the style is ours.
Part = str | tuple[str, str]


def styled(*parts: Part) -> Text:
    """One line built from plain and ``(text, style)`` parts, none of it read as markup."""
    line = Text()
    for part in parts:
        if isinstance(part, tuple):
            line.append(str(part[0]), style=part[1])
        else:
            line.append(str(part))
    return line


def say(*parts: Part, to: Console | None = None) -> None:
    """Print one line of :func:`styled` parts (stdout unless ``to`` says otherwise)."""
    (to or console).print(styled(*parts), soft_wrap=True)


def warn(message: str) -> None:
    """Print a notice on stderr (kept out of stdout so pipes see only results)."""
    say(message, to=err_console)


def new_table(title: str, *columns: str, bold_first: bool = False) -> Table:
    """A table whose title and header are text; add rows with :func:`add_row`-safe cells."""
    table = Table(title=Text(title))
    for index, column in enumerate(columns):
        table.add_column(Text(column), style="bold" if bold_first and index == 0 else None)
    return table


def add_row(table: Table, *cells: Any) -> None:
    """Add a row whose cells are shown as text, whatever they contain."""
    table.add_row(*(Text("" if c is None else str(c)) for c in cells))


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON to stdout (no colour, so pipes get plain text)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: <message>`` on one stderr line and exit with ``code``."""
    say(("error:", "bold red"), " ", " ".join(message.split("\n")), to=err_console)
    raise typer.Exit(code)
