"""The live region of ``aptix chat`` while text streams: the last screenful, wrapped as it comes.

Re-rendering the whole answer for every piece made a long answer quadratic: near 2,000 words
each piece cost a full wrap of everything before it, and the chat fell behind the model. Rich
wraps a line greedily, so once a row is followed by another its content is final whatever
comes next; :class:`StreamedTail` keeps those rows as strings and re-wraps only the row still
being written. A redraw then costs a screenful and a piece costs its own length, however long
the answer. A new width (the terminal was resized) wraps the text again once, at that width.
"""

from __future__ import annotations

from collections import deque

from rich._wrap import divide_line
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style

from aptix.cli.output import inert

__all__ = ["StreamedTail"]

#: Rows kept for redrawing: more than any terminal is high (only the last screenful shows).
KEPT_ROWS = 500
TAB_SIZE = 8


class StreamedTail:
    """The last rows of a streaming text that fit the screen, with a label on the first row."""

    def __init__(self, label: str, style: str) -> None:
        self._label = Segment(label, Style.parse(style))
        self._indent = len(label) + 1
        self._pieces: list[str] = []  # all of it, for wrapping again at a new width
        self._pending: list[str] = []  # not wrapped yet: wrapping waits for the next redraw
        self._rows: deque[str] = deque(maxlen=KEPT_ROWS)  # final rows, inert and wrapped
        self._finished = 0  # rows ever finished (the first one has the label)
        self._open = ""  # the row being written: may still wrap again
        self._column = 0  # where the open row starts in its line, for tab stops
        self._held_cr = ""
        self._width = 0

    def append(self, piece: str) -> None:
        """Add a piece of text; it is wrapped when the tail is next drawn."""
        self._pieces.append(piece)
        self._pending.append(piece)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """The rows that fit, the label on the text's first row when it is among them."""
        width = max(1, options.max_width - self._indent)
        if width != self._width:
            self._wrap_again(width)
        pending, self._pending = "".join(self._pending), []
        self._add(pending)
        open_rows = _rows(self._open, width)
        room = max(1, console.size.height - 2)
        kept = max(0, room - len(open_rows))
        finished = [self._rows[i] for i in range(max(0, len(self._rows) - kept), len(self._rows))]
        shown = [*finished, *open_rows][-room:]
        first = self._finished + len(open_rows) - len(shown)
        for index, row in enumerate(shown, start=first):
            yield self._label if index == 0 else Segment(" " * (self._indent - 1))
            yield Segment(" " + row)
            yield Segment.line()

    def _wrap_again(self, width: int) -> None:
        self._width = width
        self._rows.clear()
        self._finished, self._open, self._column, self._held_cr = 0, "", 0, ""
        self._pending = list(self._pieces)

    def _add(self, text: str) -> None:
        # A CR LF split between two pieces is one newline: a trailing CR waits for the next.
        text, self._held_cr = self._held_cr + text, ""
        if text.endswith("\r"):
            text, self._held_cr = text[:-1], "\r"
        for number, part in enumerate(inert(text).split("\n")):
            if number:  # a newline: the open line is finished
                self._finish(_rows(self._open, self._width))
                self._open, self._column = "", 0
            stop = (self._column + len(self._open)) % TAB_SIZE
            self._open += ("." * stop + part).expandtabs(TAB_SIZE)[stop:]
        breaks = divide_line(self._open, self._width, fold=True)
        if breaks:  # every row but the last is final: greedy wrapping never takes it back
            self._finish(_cut(self._open, breaks)[:-1])
            self._column += breaks[-1]
            self._open = self._open[breaks[-1] :]

    def _finish(self, rows: list[str]) -> None:
        self._rows.extend(rows)
        self._finished += len(rows)


def _rows(line: str, width: int) -> list[str]:
    """``line`` wrapped to ``width`` cells as Rich wraps it (words fold when they must)."""
    return _cut(line, divide_line(line, width, fold=True))


def _cut(line: str, breaks: list[int]) -> list[str]:
    starts = [0, *breaks]
    ends = [*breaks, len(line)]
    return [line[start:end].rstrip() for start, end in zip(starts, ends, strict=True)]
