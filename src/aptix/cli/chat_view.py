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
draw between the lines of the final print. On a terminal without cursor control
(``TERM=dumb``, a pipe) the pieces are printed as they come and not re-rendered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from markdown_it.token import Token
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown, MarkdownContext, MarkdownElement, Paragraph
from rich.segment import Segment
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text, TextType

from aptix.cli.output import console, inert, say, styled
from aptix.reasoner import TurnEvent

__all__ = ["InertMarkdown", "TurnView", "tool_line"]

LABEL = ("agent>", "bold green")
#: How often the spinner turns (redraws run on the event loop, never on a thread).
TICK_SECONDS = 1 / 8


class _Tail:
    """The last lines of a renderable that fit the screen, so a live region can always erase."""

    def __init__(self, body: RenderableType) -> None:
        self._body = body

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(self._body, options, pad=False)
        room = max(1, console.size.height - 2)
        for line in lines[-room:]:
            yield from line
            yield Segment.line()


class _HtmlBlock(Paragraph):
    """An HTML block shown as the text it is (Rich drops it, so ``<div>…</div>`` vanished)."""

    def on_text(self, context: MarkdownContext, text: TextType) -> None:
        """Take the block's source as literal text, without its closing newline."""
        super().on_text(context, text.rstrip("\n") if isinstance(text, str) else text)


class InertMarkdown(Markdown):
    """Markdown whose parsed text is inert; raw HTML is shown as text and addresses spelled out."""

    elements: ClassVar[dict[str, type[MarkdownElement]]] = {
        **Markdown.elements,
        "html_block": _HtmlBlock,
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
        yield Token("text", "", 0, content="🌆")
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
    grid.add_row(Text("  ⚙"), styled((name, "bold")))
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
    """Receives a turn's events and draws them; :meth:`close` when the turn has ended."""

    details: bool = False
    _live: Live | None = None
    _ticker: asyncio.Task[None] | None = None
    _streamed: list[str] = field(default_factory=list)
    _held_cr: str = ""

    @property
    def _interactive(self) -> bool:
        return console.is_terminal and not console.is_dumb_terminal

    def open(self) -> None:
        """Start the turn: a spinner until the first text arrives (call it in the event loop)."""
        if self._interactive:
            # auto_refresh=False: Rich's refresh thread raced the final print and overwrote
            # the screen (issue 23); every redraw now happens on this loop, in order.
            self._live = Live(
                Spinner("dots", Text("thinking…", style="dim")),
                console=console,
                transient=True,
                auto_refresh=False,
            )
            self._live.start(refresh=True)
            self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        while self._live is not None:
            await asyncio.sleep(TICK_SECONDS)
            if self._live is not None:
                self._live.refresh()

    async def on_event(self, event: TurnEvent) -> None:
        """Draw one event of the running turn."""
        data = event.data
        if event.type == "text_delta":
            self._delta(str(data["delta"]))
        elif event.type == "text":
            self._text(str(data["text"]))
        elif event.type == "tool_call_finished" and not data["requiresClientExecution"]:
            console.print(tool_line(data, details=self.details))
        elif event.type == "mode_changed":
            say((f"mode → {data['mode']}", "yellow"))
            if data.get("welcomeMessage"):
                say((str(data["welcomeMessage"]), "italic"))

    def close(self) -> None:
        """End the turn's display; text still streaming stays on screen as it came."""
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._streamed:
            self._text("".join(self._streamed), markdown=False)
        if self._live is not None:
            with contextlib.suppress(Exception):  # a closed terminal must not hide the turn's end
                self._live.stop()
            self._live = None

    def _delta(self, piece: str) -> None:
        if not self._streamed and self._live is None:
            console.print(styled(LABEL, " "), end="")
        self._streamed.append(piece)
        if self._live is not None:
            text = inert("".join(self._streamed))
            self._live.update(_Tail(_labelled(Text(text))), refresh=True)
        else:
            # A CR LF split between two pieces would show as "␍" and a newline: hold a
            # trailing CR back until the next piece (or the end) says what it is.
            piece, self._held_cr = self._held_cr + piece, ""
            if piece.endswith("\r"):
                piece, self._held_cr = piece[:-1], "\r"
            console.print(Text(inert(piece)), end="", soft_wrap=True)

    def _text(self, text: str, *, markdown: bool = True) -> None:
        shown, self._streamed = bool(self._streamed), []
        if self._live is None:
            if shown:
                console.print(Text(inert(self._held_cr)))
                self._held_cr = ""
            else:
                console.print(styled(LABEL, " ", text), soft_wrap=True)
            return
        body = InertMarkdown(text) if markdown else Text(inert(text))
        self._live.update(Spinner("dots", Text("working…", style="dim")))
        console.print(_labelled(body))
