"""Model text where the chat cannot move the cursor (``TERM=dumb``, a pipe): every row indented.

There the text is printed as it streams, once. Printed as it came, a newline in it started a
row at column 0, where the chat's own ``approval needed:`` and ``approve? [y/n]`` stand, and
without colour the model could write them byte for byte (review r2, F2). So every row of the
text starts under the ``agent>`` label's indent: after each newline, and where a person reads
the rows on a terminal also where a row reaches the screen's width (the terminal would wrap it
to column 0 itself). The width is read again for each piece: a window narrowed while the text
streams wrapped rows folded at its old width to column 0 (round 73, review r2, F1).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len

from aptix.cli.output import inert

__all__ = ["IndentedText"]

TAB_SIZE = 8


class IndentedText:
    """Turns the pieces of a text into what to print, each row after the first indented.

    The first row starts after the label, at column ``indent``. ``width`` tells the screen's
    width as it is now (None when no person reads the rows on a screen, as a program reading a
    pipe: rows are then only indented, never folded).
    """

    def __init__(self, indent: int, width: Callable[[], int] | None) -> None:
        self._indent = indent
        self._screen_width = width
        self._width: int | None = None
        self._column = indent
        self._held_cr = ""

    def add(self, piece: str) -> str:
        """What to print for ``piece``: inert, rows indented (see the module's docstring)."""
        # A CR LF split between two pieces would show as "␍" and a newline: a trailing CR
        # waits for the next piece (or the end) to say what it is.
        piece, self._held_cr = self._held_cr + piece, ""
        if piece.endswith("\r"):
            piece, self._held_cr = piece[:-1], "\r"
        return self._rows(piece)

    def end(self) -> str:
        """What is left to print when the text is whole: a CR it held, shown."""
        held, self._held_cr = self._held_cr, ""
        return self._rows(held)

    def _rows(self, text: str) -> str:
        if self._screen_width is not None:
            # A screen narrower than the indent still folds: one cell a row, never column 0.
            self._width = max(self._screen_width(), self._indent + 1)
        out: list[str] = []
        for char in inert(text):
            if char == "\n":
                self._new_row(out)
                continue
            if char == "\t":  # as spaces: a tab near the edge moves the cursor unseen
                stop = TAB_SIZE - (self._column - self._indent) % TAB_SIZE
                for _ in range(stop):
                    self._put(" ", 1, out)
                continue
            self._put(char, cell_len(char), out)
        return "".join(out)

    def _put(self, char: str, cells: int, out: list[str]) -> None:
        # Past the edge too: the screen got narrower than the row already written.
        if self._width is not None and cells and self._column + cells > self._width:
            self._new_row(out)
        out.append(char)
        self._column += cells

    def _new_row(self, out: list[str]) -> None:
        out.append("\n" + " " * self._indent)
        self._column = self._indent
