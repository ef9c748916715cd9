"""How ``aptix chat`` shows a turn: text as it streams, Markdown once it is whole, one line a tool.

Model text is data: every piece of it, and every tool name and result, passes through
:func:`~aptix.cli.output.inert` (no control character or escape sequence reaches the terminal)
and is shown through :class:`~rich.text.Text` while it streams and through
:class:`~rich.markdown.Markdown` (links spelled out, never hidden behind their label) when it is
complete, so ``[bold]`` or ``list[str]`` are never read as Rich markup. The Markdown pass is
made inert again after parsing, because markdown-it decodes entities (``&#x202E;``, ``&rlm;``)
back into the controls the first pass removed; raw HTML (``List<String>``, ``<div>``) is
shown as written, and an image keeps its address beside its alt text. Long words (a URL, an
id, a line of JSON) fold onto the next line; the final text is never cut.

The live region (the spinner, the text as it streams) is redrawn only from the event loop:
``Live(auto_refresh=False)`` and a ticker task that refreshes it, so no background thread can
draw between the lines of the final print. Text that streams in is drawn by that ticker too,
at most :data:`TICK_SECONDS` apart, and only its last screenful
(:class:`~aptix.cli.chat_tail.StreamedTail`): a redraw for every piece of the whole answer made
a long one quadratic. On a terminal without cursor control (``TERM=dumb``, a pipe) the pieces
are printed as they come and not re-rendered, every row under the label's indent
(:class:`~aptix.cli.chat_plain.IndentedText`), and folded at the screen's width, as it is
when each piece comes, wherever a person reads them on a terminal (a pipe into ``tee``).

A write that fails (the terminal hung up, the reader of a pipe left) ends the display, never
the turn: the view stops drawing and calls ``on_lost``, which the chat answers by ending as
the hang-up's signal would (see :meth:`aptix.cli.chat_signals.ChatSignals.lose_output`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import typer
from markdown_it.token import Token
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown, MarkdownContext, MarkdownElement, Paragraph, TableElement
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text, TextType

from aptix.cli.charset import carries
from aptix.cli.chat_plain import IndentedText
from aptix.cli.chat_tail import StreamedTail
from aptix.cli.output import console, folded, inert, styled

if TYPE_CHECKING:
    # Only for a hint: importing the reasoner would load the database stack on every start.
    from aptix.reasoner import TurnEvent

__all__ = ["InertMarkdown", "TurnView", "tool_line"]

LABEL = ("agent>", "bold green")
#: How often the spinner turns (redraws run on the event loop, never on a thread).
TICK_SECONDS = 1 / 8


class _HtmlBlock(Paragraph):
    """An HTML block shown as the text it is (Rich drops it, so ``<div>…</div>`` vanished)."""

    def on_text(self, context: MarkdownContext, text: TextType) -> None:
        """Take the block's source as literal text, without its closing newline."""
        super().on_text(context, text.rstrip("\n") if isinstance(text, str) else text)


class _FoldingTable(TableElement):
    """A Markdown table whose cells fold long words (Rich's columns cut them with "…")."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Rich's table, every column set to fold."""
        for renderable in super().__rich_console__(console, options):
            if isinstance(renderable, Table):
                for column in renderable.columns:
                    column.overflow = "fold"
            yield renderable


class InertMarkdown(Markdown):
    """Markdown whose parsed text is inert; raw HTML is shown as text and addresses spelled out."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements,
        "html_block": _HtmlBlock,
        "table_open": _FoldingTable,
    }

    def __init__(self, markup: str) -> None:
        super().__init__(inert(markup), hyperlinks=False)
        _make_inert(self.parsed)


def _make_inert(tokens: list[Token]) -> None:
    # markdown-it decodes entities while parsing, so "&#x202E;" arrives here as U+202E:
    # inert() before parsing cannot catch it, only a pass over what was parsed can.
    for token in tokens:
        if token.type == "html_inline":  # Rich drops these: "List<String>" became "List"
            token.type = "text"
        token.content = inert(token.content)
        token.info = inert(token.info)
        token.attrs = {k: inert(v) if isinstance(v, str) else v for k, v in token.attrs.items()}
        if token.children:
            _make_inert(token.children)
            token.children = [*_images_as_links(token.children)]


def _images_as_links(tokens: list[Token]) -> Iterator[Token]:
    # Rich shows an image as its alt text alone, and ahead of the paragraph it sits in; as a
    # link it stays in place and keeps its address beside the label, as every link does.
    for token in tokens:
        if token.type != "image":
            yield token
            continue
        yield Token("link_open", "a", 1, attrs={"href": str(token.attrs.get("src", ""))})
        yield Token("text", "", 0, content=inert("🌆"))
        if token.children:
            yield Token("text", "", 0, content=" ")
            yield from token.children
        yield Token("link_close", "a", -1)


def _labelled(body: RenderableType) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")  # a table column cuts with "…" unless told to fold
    grid.add_row(styled(LABEL), body)
    return grid


def _one_line(value: str) -> str:
    return " ".join(value.split())


def tool_line(data: dict[str, Any], *, details: bool) -> RenderableType:
    """A finished tool call: one line (cut to the screen's width), or everything with details."""
    name = inert(str(data.get("name", "")))
    # A call cut short (timed out, outcome unknown) ran, yet has only an error to show.
    if data.get("wasExecuted") and not data.get("errorMessage"):
        outcome, style = inert(str(data.get("resultJson") or "")), "dim"
    else:
        outcome, style = inert(f"error: {data.get('errorMessage') or ''}"), "dim red"
    arguments = inert(str(data.get("argumentsJson") or ""))
    if not details:
        line = styled(("  ⚙ ", "dim"), (name, "bold"), (f"({_one_line(arguments)}) → ", "dim"))
        line.append(_one_line(outcome), style=style)
        row = Table.grid()  # a column cuts its text; Text's own no_wrap is not enough
        row.add_column(no_wrap=True, overflow="ellipsis")
        row.add_row(line)
        return row
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, style="dim")
    grid.add_column(overflow="fold")
    grid.add_row(styled("  ⚙"), styled((name, "bold")))
    grid.add_row(Text("  args"), Text(_pretty(arguments)))
    grid.add_row(Text("  result"), Text(_pretty(outcome), style=style))
    return grid


def _pretty(value: str) -> str:
    try:
        return inert(json.dumps(json.loads(value), indent=2, ensure_ascii=False))
    except (ValueError, RecursionError):
        return value


@dataclass
class TurnView:
    """Receives a turn's events and draws them; :meth:`close` when the turn has ended.

    ``on_lost`` is called once if a write fails (the terminal or stdout is gone): from then on
    nothing is drawn, and the turn goes on until the chat stops it.
    """

    details: bool = False
    on_lost: Callable[[OSError], None] | None = None
    lost: bool = False
    _live: Live | None = None
    _ticker: asyncio.Task[None] | None = None
    _tail: StreamedTail | None = None
    _dirty: bool = False
    _streamed: list[str] = field(default_factory=list)
    _plain: IndentedText | None = None

    @property
    def _interactive(self) -> bool:
        return console.is_terminal and not console.is_dumb_terminal

    def open(self) -> None:
        """Start the turn: a spinner until the first text arrives (call it in the event loop)."""
        if self._interactive:
            # auto_refresh=False: Rich's refresh thread raced the final print and overwrote
            # the screen (issue 23); every redraw now happens on this loop, in order.
            self._live = Live(
                _spinner("thinking…"),
                console=console,
                transient=True,
                auto_refresh=False,
            )
            # Buffered: nothing is written before the region is fully set up, so a write that
            # fails (a terminal already gone) leaves a region that stops cleanly.
            with self._drawing(), console:
                self._live.start(refresh=True)
            if not self.lost:
                self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        while self._live is not None:
            await asyncio.sleep(TICK_SECONDS)
            # The spinner turns; streamed text is redrawn only when it grew.
            if self._live is not None and (self._dirty or self._tail is None):
                self._dirty = False
                with self._drawing():
                    self._live.refresh()

    async def on_event(self, event: TurnEvent) -> None:
        """Draw one event of the running turn."""
        if self.lost:
            return
        data = event.data
        with self._drawing():
            if event.type == "text_delta":
                self._delta(str(data["delta"]))
            elif event.type == "text":
                self._text(str(data["text"]))
            elif event.type == "tool_call_finished" and not data["requiresClientExecution"]:
                console.print(tool_line(data, details=self.details))
            elif event.type == "mode_changed":
                console.print(styled((f"mode → {data['mode']}", "yellow")), soft_wrap=True)
                if data.get("welcomeMessage"):
                    console.print(styled((str(data["welcomeMessage"]), "italic")), soft_wrap=True)

    def close(self, cut_off: str | None = None) -> None:
        """End the turn's display; text still streaming stays on screen as it came.

        ``cut_off`` says why the turn ended before its answer was whole ("turn cancelled"):
        text it streamed is then marked as cut off, never left looking like an answer (the
        record keeps it as partial text, and a resumed chat labels it so too).
        """
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self.lost:
            return
        with self._drawing():
            if self._streamed:
                self._text("".join(self._streamed), markdown=False)
                if cut_off is not None:
                    note = f"(cut off: {cut_off}; partial text, not a finished answer)"
                    for row in folded((note, "yellow"), indent=len(LABEL[0]) + 1):
                        console.print(row, soft_wrap=True)
            if self._live is not None:
                live, self._live = self._live, None
                live.stop()

    @contextlib.contextmanager
    def _drawing(self) -> Iterator[None]:
        """Draw in the block; a failed write ends the display (see the class's docstring)."""
        try:
            yield
        except BaseException as exc:
            error = _failed_write(exc)
            if error is None:
                raise
            self._lose(error)

    def _lose(self, error: OSError) -> None:
        self.lost = True
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._live is not None:
            live, self._live = self._live, None
            try:  # stopping unhooks the region from the console before it writes again
                live.stop()
            except BaseException as exc:
                if _failed_write(exc) is None:
                    raise
        if self.on_lost is not None:
            self.on_lost(error)

    def _delta(self, piece: str) -> None:
        self._streamed.append(piece)
        if self._live is not None:
            if self._tail is None:
                self._tail = StreamedTail(*LABEL)
                self._live.update(self._tail)
            self._tail.append(piece)
            self._dirty = True  # drawn by the ticker: pieces that come together, drawn once
        else:
            console.print(Text(self._indented().add(piece)), end="", soft_wrap=True)

    def _indented(self) -> IndentedText:
        """The text's rows where the cursor cannot move, the label printed before the first."""
        if self._plain is None:
            console.print(styled(LABEL, " "), end="")
            self._plain = IndentedText(len(LABEL[0]) + 1, _width if _read_on_screen() else None)
        return self._plain

    def _text(self, text: str, *, markdown: bool = True) -> None:
        shown, self._streamed, self._tail = bool(self._streamed), [], None
        if self._live is None:
            plain = self._indented()
            rest = plain.end() if shown else plain.add(text) + plain.end()
            self._plain = None
            console.print(Text(rest), soft_wrap=True)
            return
        body = InertMarkdown(text) if markdown else Text(inert(text))
        # Drawn now: the print below erases the region as last drawn, then draws its renderable
        # again under the answer; the streamed tail there pushed a tall answer's top into the
        # scrollback (review r2, F4).
        self._live.update(_spinner("working…"), refresh=True)
        console.print(_labelled(body))


def _width() -> int:
    # Read for each piece: the window may be narrowed while the text streams (Rich reads the
    # size anew each time, from stdin's terminal when stdout is a pipe).
    return console.width


def _read_on_screen() -> bool:
    """True when a person reads the plain rows on a terminal, so they must fold at its edge.

    A dumb terminal; or stdout a pipe while stdin is a terminal (``aptix chat | tee chat.log``):
    the person typing reads the answer there, and the terminal wraps a long row to column 0.
    With neither (``aptix chat < script.txt > out.txt``, a program at both ends) nobody reads
    a screen: each line of the text is kept whole, only indented.
    """
    if console.is_terminal:
        return True
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except ValueError:  # stdin closed
        return False


def _spinner(words: str) -> Spinner:
    # Braille dots where the terminal's encoding has them; on a Latin-1 one, a turning line.
    return Spinner("dots" if carries("⠋") else "line", styled((words, "dim")))


def _failed_write(exc: BaseException) -> OSError | None:
    """The failed write behind ``exc``, or None when ``exc`` is something else.

    An OSError itself (EIO from a hung-up terminal), or a broken pipe that the console's
    ``on_broken_pipe`` turned into an exit (Rich's raises SystemExit, ours typer.Exit). A
    write that would block (a non-blocking terminal that is busy) is no lost output.
    """
    if isinstance(exc, BlockingIOError):
        return None
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, SystemExit | typer.Exit) and isinstance(exc.__context__, OSError):
        return exc.__context__
    return None
