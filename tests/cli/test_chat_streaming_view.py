"""How ``aptix chat`` draws a streaming answer, in-process: the work it takes, and lost output.

A redraw for every piece used to wrap the whole answer again, so a long answer cost time
quadratic in its length; these tests count the characters Rich's line divider is handed, not
seconds. A write that fails (a hung-up terminal, a closed pipe) ends the display, never the
turn with an error.
"""

from __future__ import annotations

import asyncio
import errno
import io
from collections.abc import Callable
from typing import Any

import pytest
import rich.text
from rich._wrap import divide_line
from rich.console import Console
from rich.text import Text

from aptix.cli import chat_tail, chat_view
from aptix.cli.chat_tail import StreamedTail
from aptix.cli.chat_view import TurnView
from aptix.reasoner import TurnEvent

WORDS = 2_000


def _answer(words: int = WORDS) -> list[str]:
    """A long answer's pieces: words, some lines, a URL longer than the screen."""
    url = "https://example.com/" + "seg" * 60
    pieces = [f"word{i}" + ("\n" if i % 40 == 39 else " ") for i in range(words)]
    pieces[words // 4] = url + " "
    return pieces


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every length of text handed to Rich's line divider, by Rich itself or by the tail."""
    handed: list[int] = []

    def wrap(original: Callable[..., list[int]]) -> Callable[..., list[int]]:
        def divide_line(text: str, *args: Any, **kwargs: Any) -> list[int]:
            handed.append(len(text))
            return original(text, *args, **kwargs)

        return divide_line

    monkeypatch.setattr(rich.text, "divide_line", wrap(divide_line))
    monkeypatch.setattr(chat_tail, "divide_line", wrap(divide_line))
    return handed


async def _stream(
    monkeypatch: pytest.MonkeyPatch, pieces: list[str], handed: list[int]
) -> tuple[int, str]:
    """Characters wrapped to show ``pieces`` drawn one by one, and what the terminal got."""
    buffer = io.StringIO()
    terminal = Console(
        file=buffer, width=80, height=12, force_terminal=True, markup=False, emoji=False
    )
    monkeypatch.setattr(chat_view, "console", terminal)
    handed.clear()
    view = TurnView()
    view.open()
    for piece in pieces:
        await view.on_event(TurnEvent("text_delta", {"delta": piece}))
        await asyncio.sleep(0)  # the ticker's turn: a slow model's every piece is drawn
    await view.on_event(TurnEvent("text", {"text": "".join(pieces)}))
    view.close()
    return sum(handed), buffer.getvalue()


async def test_drawing_every_piece_of_a_long_answer_costs_time_linear_in_its_length(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chat_view, "TICK_SECONDS", 0)  # the ticker draws after every piece
    handed = _counting(monkeypatch)
    half, _ = await _stream(monkeypatch, _answer(WORDS // 2), handed)
    whole, shown = await _stream(monkeypatch, _answer(), handed)
    answer = len("".join(_answer()))
    # Each piece rewraps the row being written, and the final Markdown pass all of it once:
    # twice the answer is twice the work (redrawing all of it made it four times, and a
    # thousand times the answer's length).
    assert whole < 2.2 * half, (half, whole)
    assert whole < 20 * answer, (whole, answer)
    assert "word1999" in shown


def _plain_rows(renderable: object, width: int, height: int = 1_000) -> list[str]:
    buffer = io.StringIO()
    Console(file=buffer, width=width, height=height, color_system=None).print(renderable)
    return [row.rstrip() for row in buffer.getvalue().splitlines()]


@pytest.mark.parametrize("width", [30, 80, 133])
def test_the_streamed_tail_wraps_as_rich_wraps_the_whole_text(width: int) -> None:
    pieces = [*_answer()[:700], "tab\there\r", "\nafter a split CR LF ", "終わり " * 30]
    tail = StreamedTail("agent>", "bold")
    for number, piece in enumerate(pieces):
        tail.append(piece)
        if number % 7 == 0:
            _plain_rows(tail, width)  # drawn now and then, as the ticker draws it
    whole = _plain_rows(chat_view._labelled(Text("".join(pieces).replace("\r\n", "\n"))), width)
    shown = _plain_rows(tail, width, height=40)
    assert len(shown) == 40 - 2  # the last screenful, no more
    assert shown == whole[-len(shown) :]
    assert all(Text(row).cell_len <= width for row in shown)


def test_a_new_width_wraps_the_streamed_text_again() -> None:
    tail = StreamedTail("agent>", "bold")
    for piece in _answer()[:100]:
        tail.append(piece)
    assert _plain_rows(tail, 120)[0].startswith("agent> word0 word1")
    narrow = _plain_rows(tail, 40)
    assert narrow == _plain_rows(chat_view._labelled(Text("".join(_answer()[:100]))), 40)


class _Unwritable(io.StringIO):
    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


class _RichLikeConsole(Console):
    def on_broken_pipe(self) -> None:
        # What Rich's own does, without pointing the test run's stdout at /dev/null.
        self.quiet = True
        raise SystemExit(1)


@pytest.mark.parametrize(
    "error", [OSError(errno.EIO, "Input/output error"), BrokenPipeError(errno.EPIPE, "pipe")]
)
@pytest.mark.parametrize("interactive", [True, False])
async def test_a_failed_write_ends_the_display_not_the_turn(
    monkeypatch: pytest.MonkeyPatch, error: OSError, interactive: bool
) -> None:
    file = _Unwritable(error)
    shown = _RichLikeConsole(
        file=file,
        width=80,
        height=12,
        force_terminal=interactive,
        force_interactive=interactive,
        markup=False,
    )
    monkeypatch.setattr(chat_view, "console", shown)
    lost: list[OSError] = []
    view = TurnView(on_lost=lost.append)
    view.open()
    events = [
        TurnEvent("text_delta", {"delta": "Hello "}),
        TurnEvent("text", {"text": "Hello there."}),
        TurnEvent("mode_changed", {"mode": "calculation", "welcomeMessage": "Hi."}),
    ]
    for event in events:
        await view.on_event(event)  # raises nothing: the turn goes on
    view.close()
    assert lost == [error]  # told once, with the write's own error
    assert view.lost
    assert shown._live_stack == []  # the live region let go of the console
