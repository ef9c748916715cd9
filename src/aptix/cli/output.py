"""Shared console helpers: JSON for pipes, Rich for people, clean errors for both.

Every string that came from outside (model text, tool results, titles, file contents, error
details) reaches the terminal through :func:`say`, :func:`styled`, :func:`folded`,
:func:`new_table`, :func:`add_row`, :func:`print_json` or :func:`fail`. They pass it through
:func:`inert`, so no control character or escape sequence reaches the terminal (a screen
clear or an OSC title change shows as ``␛[2J`` / ``␛]0;…``), nor an invisible one
(:mod:`aptix.invisible`), and build Rich :class:`~rich.text.Text` objects, so
nothing is ever parsed as markup or emoji codes: ``[bold]``, ``[/x]`` or ``list[str]`` print
as typed. The consoles themselves have markup off too.

What a command writes to stdout is its result, written through :func:`say`,
:func:`print_json` or :func:`print_table`: a reader that leaves early (``| head -1``) ends the
command quietly with :data:`READER_LEFT`, and output that cannot be written (a full disk, a
closed stdout) ends it with one ``error:`` line and exit code 1, never a traceback.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, NoReturn

import typer
from rich.cells import cell_len
from rich.console import Console, ConsoleDimensions, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from aptix import invisible
from aptix.cli.charset import carried
from aptix.urls import mask_credentials

__all__ = [
    "READER_LEFT",
    "Part",
    "add_row",
    "console",
    "err_console",
    "fail",
    "folded",
    "inert",
    "new_table",
    "print_json",
    "print_table",
    "refuse_bad_names",
    "refuse_unstorable",
    "say",
    "say_rows",
    "styled",
    "unstorable",
    "warn",
]

#: The widest table line written to a pipe or a file (a table is as wide as its contents).
_WIDEST_LINE = 100_000

#: The exit code when the reader of stdout left before the output was all written (a pipe
#: closed by ``head``): 128 + SIGPIPE, the code of a command the signal ends, as ``cat`` would.
READER_LEFT = 141


class _Console(Console):
    @property
    def size(self) -> ConsoleDimensions:
        """Rich's, except that a dumb terminal (``TERM=dumb``) has its real size.

        Rich takes one to be 80 columns: on a narrower one, the terminal wrapped rows folded
        at 80 to column 0, where outside text must never start (review r2, F2).
        """
        if not self.is_dumb_terminal or (self._width is not None and self._height is not None):
            return super().size
        real = shutil.get_terminal_size((0, 0))  # COLUMNS and LINES first, as Rich reads them
        return ConsoleDimensions(real.columns or 80, real.lines or 25)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    def on_broken_pipe(self) -> None:
        # Rich's own exits 1, the code of a command that found problems.
        self.quiet = True
        _drop_unwritten()
        raise typer.Exit(READER_LEFT)


console = _Console(highlight=False, markup=False, emoji=False)
err_console = _Console(stderr=True, highlight=False, markup=False, emoji=False, soft_wrap=True)


@contextmanager
def _writing_results() -> Iterator[None]:
    """Write to stdout in the block; a write error ends the command (see the module's docstring).

    Flushed before the block ends: an error at Python's exit would be a traceback-like
    "Exception ignored" and exit code 120.
    """
    if sys.stdout is None:  # started with stdout closed (``>&-``)
        fail("Cannot write the output: standard output is closed.")
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_unwritten()
        raise typer.Exit(READER_LEFT) from None
    except OSError as exc:
        _drop_unwritten()
        fail(f"Cannot write the output: {exc.strerror or exc}.")
    except UnicodeEncodeError as exc:  # a character the locale's encoding (Latin-1) lacks
        fail(f"Cannot write the output in the encoding {exc.encoding}: {exc.reason}.")


def _drop_unwritten() -> None:
    """Point stdout at the null device: what is left in its buffer is lost, not an error again."""
    with suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


def _inert_table() -> dict[int, str]:
    # C0 controls become their Control Pictures (ESC -> "␛"), so an escape sequence is shown
    # as text and never acted on; newline and tab stay. C1 controls (which 8-bit terminals
    # read as CSI, OSC, DCS...) have no picture and are spelled out as <U+XXXX>, as the
    # bidirectional and invisible format characters are (aptix.invisible).
    table = {c: chr(0x2400 + c) for c in range(0x20) if chr(c) not in "\n\t"}
    table[0x7F] = "\u2421"
    for c in range(0x80, 0xA0):
        table[c] = f"<U+{c:04X}>"
    return table


_INERT = _inert_table()


def inert(text: str) -> str:
    """``text`` with every control character and escape sequence made visible and harmless.

    Newlines and tabs are kept (CR LF becomes LF); everything a terminal would act on (ESC,
    a lone CR, backspace, bell, C1 controls), and what would reorder or hide text (bidi
    controls, the line and paragraph separators, zero-width and tag characters), is shown,
    not obeyed. What the output's encoding lacks (on a terminal that is not UTF-8) is
    replaced too (:func:`aptix.cli.charset.carried`).
    """
    shown = text.replace("\r\n", "\n").translate(_INERT)
    return carried(invisible.SHOWN.sub(invisible.spelled_out, shown))


#: A piece of a line: plain text, or ``(text, style)`` where only the style is ours.
Part = str | tuple[str, str]


def styled(*parts: Part) -> Text:
    """One line built from plain and ``(text, style)`` parts, none of it read as markup."""
    line = Text()
    for part in parts:
        if isinstance(part, tuple):
            line.append(inert(str(part[0])), style=part[1])
        else:
            line.append(inert(str(part)))
    return line


def say(*parts: Part, to: Console | None = None) -> None:
    """Print one line of :func:`styled` parts (stdout unless ``to`` says otherwise)."""
    if to is not None and to is not console:
        to.print(styled(*parts), soft_wrap=True)
        return
    with _writing_results():
        console.print(styled(*parts), soft_wrap=True)


#: The fewest cells a row of :func:`folded` text gets before its indent gives way.
_NARROWEST = 20
#: The indent of :func:`folded` text on a screen too narrow for its own.
_NARROW_INDENT = 2


def folded(*parts: Part, indent: int, label: Part = "") -> list[Text]:
    """The :func:`styled` line of ``parts`` wrapped to the screen's width, every row indented.

    Long words fold. ``label`` (the chat's own words) stands in the first row's indent, so
    outside text set this way never starts at column 0, where such labels are. On a screen
    too narrow for ``indent`` and :data:`_NARROWEST` cells, text that does not fit beside the
    label has a row of its own and a smaller indent: a row wider than the screen wrapped to
    column 0.
    """
    head = styled(label) if label else Text()
    text = styled(*parts)
    room = console.width - indent
    if room < _NARROWEST and indent > _NARROW_INDENT and text.cell_len > room:
        narrow = folded(*parts, indent=_NARROW_INDENT)
        return [head, *narrow] if label else narrow
    rows = text.wrap(console, max(room, 1), overflow="fold")
    head.pad_right(indent - head.cell_len)
    return [(head if i == 0 else Text(" " * indent)) + row for i, row in enumerate(rows)]


def say_rows(rows: list[Text]) -> None:
    """Print rows made by :func:`folded` on stdout, each as it is (already fitted)."""
    with _writing_results():
        for row in rows:
            console.print(row, soft_wrap=True)


def print_table(table: RenderableType) -> None:
    """Print a table (or another renderable) to stdout.

    Into a pipe or a file it is as wide as its contents, so that no cell is cut or wrapped
    for a reader that is not a person; on a terminal it fits the terminal's width.
    """
    with _writing_results():
        if console.is_terminal:
            console.print(table)
            return
        unbounded = console.options.update_width(_WIDEST_LINE)
        width = max(Measurement.get(console, unbounded, table).maximum, console.width)
        # A console of its own: Console.print never goes wider than its console.
        _Console(highlight=False, markup=False, emoji=False, width=width).print(table)


def warn(message: str) -> None:
    """Print a notice on stderr (kept out of stdout so pipes see only results).

    With ``APTIX_LOG_JSON`` it is a JSON log line at WARNING, like every other stderr line.
    """
    from aptix.log_setup import stderr_line

    message = mask_credentials(message)
    if not stderr_line(logging.WARNING, message):
        say(message, to=err_console)


def new_table(
    title: str, *columns: str, bold_first: bool = False, ids: tuple[str, ...] = ()
) -> Table:
    """A table whose title and header are text; add rows with :func:`add_row`-safe cells.

    The columns named in ``ids`` hold what a person copies into the next command (a session
    id, a workflow id, a mode key): never cut short with "…". The first column, when it is
    one of them, keeps each value whole on one line, and the other columns give way; other
    id columns fold a value over lines when the terminal is too narrow.
    """
    table = Table(title=Text(inert(title)))
    for index, column in enumerate(columns):
        is_id = column in ids
        table.add_column(
            Text(inert(column)),
            style="bold" if bold_first and index == 0 else None,
            no_wrap=is_id and index == 0,
            overflow="fold" if is_id else "ellipsis",
        )
    return table


def add_row(table: Table, *cells: Any) -> None:
    """Add a row whose cells are shown as text, whatever they contain."""
    texts = [Text("" if c is None else inert(str(c))) for c in cells]
    first = table.columns[0] if table.columns else None
    if first is not None and first.no_wrap and texts:  # an id column: never narrower than one
        first.min_width = max(first.min_width or 0, cell_len(texts[0].plain))
    table.add_row(*texts)


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON to stdout (no colour, so pipes get plain text)."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    # JSON escapes C0 controls itself; C1, the line and paragraph separators, bidi and
    # invisible characters can only sit inside strings, where the \\uXXXX form is the same
    # data, inert (and seen) on a terminal, and no line break to a reader that splits lines by
    # Unicode's rules (str.splitlines(), JavaScript before ES2019).
    with _writing_results():
        sys.stdout.write(invisible.JSON_UNSAFE.sub(invisible.escaped, text) + "\n")


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: <message>`` on one stderr line and exit with ``code``.

    With ``APTIX_LOG_JSON`` the line is a JSON log line at ERROR, so a log pipeline reads it.
    """
    from aptix.log_setup import stderr_line

    # A plugin's or a driver's error often quotes its connection URL.
    line = mask_credentials(" ".join(message.split("\n")))
    if not stderr_line(logging.ERROR, line):
        say(("error:", "bold red"), " ", line, to=err_console)
    raise typer.Exit(code)


def unstorable(text: str) -> str | None:
    """Why typed ``text`` is refused when it holds a NUL or a byte that is not UTF-8, else None."""
    from aptix.nul import NUL_REFUSED, SURROGATE_REFUSED, find_nul, find_surrogate, not_utf8

    # The policy HTTP and MCP apply: PostgreSQL cannot store NUL, and a lone surrogate cannot
    # even be printed. Typed text comes as bytes, so its surrogates are bytes that are not
    # UTF-8 (Python's surrogateescape): the person is told about the byte they sent.
    if find_nul(text) is not None:
        return NUL_REFUSED
    if (byte := not_utf8(text)) is not None:
        return byte
    if find_surrogate(text) is not None:
        return SURROGATE_REFUSED
    return None


def refuse_unstorable(values: dict[str, str | None]) -> None:
    """Exit 2 with one line when a typed value holds text :func:`unstorable` refuses.

    ``values`` maps what the person typed it as (``--org``, ``SESSION_ID``) to the value; the
    message names that, never the value: echoing a lone surrogate would fail again.
    """
    for label, value in values.items():
        if value is not None and (refused := unstorable(value)) is not None:
            fail(f"{refused} (found in {label}).", code=2)


def refuse_bad_names(values: dict[str, str]) -> None:
    """Exit 2 with one line when an ``--org`` or ``--user`` is empty or too long to store.

    The rule API keys follow (:func:`aptix.settings_keys.owner_name_problem`): a session of an
    empty org or user would be no one's, and a name over the columns' width works on SQLite
    but fails on PostgreSQL.
    """
    from aptix.settings_keys import owner_name_problem

    for label, value in values.items():
        if (problem := owner_name_problem(value)) is not None:
            fail(f"{label} {problem}.", code=2)
