"""What ``aptix chat`` reads: an editing prompt with history and Tab completion.

On a terminal the prompt is :mod:`prompt_toolkit`'s: arrow keys edit and recall, the history
is kept in ``<data_dir>/chat_history`` between runs, Tab completes slash commands and mode
keys, Alt-Enter (or Esc then Enter: terminals send the same keys) starts a new line in the
message, and Ctrl-O toggles tool details. When stdin is not a terminal (a pipe, a script) the
lines are read plainly. Either way Ctrl-C raises :class:`KeyboardInterrupt` and Ctrl-D (or
the end of the input) :class:`EOFError`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import DummyHistory, FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

__all__ = ["HISTORY_FILE", "LineReader", "SlashCompleter", "open_reader"]

#: The history file's name inside the data directory.
HISTORY_FILE = "chat_history"


class LineReader(Protocol):
    """Reads one line of input; Ctrl-C raises KeyboardInterrupt, Ctrl-D raises EOFError."""

    async def read(self, prompt: str) -> str:
        """The next line the user typed (without its newline)."""
        ...

    async def ask(self, prompt: str) -> str:
        """A one-off answer (not kept in the history, no completion)."""
        ...


class SlashCompleter(Completer):
    """Completes ``/command`` names, and mode keys after ``/mode`` and ``/new``."""

    def __init__(self, commands: dict[str, str], modes: Callable[[], Sequence[str]]) -> None:
        self._commands = commands
        self._modes = modes

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        """Commands while the first word is typed, mode keys in the argument."""
        text = document.text_before_cursor
        if not text.startswith("/"):
            return
        command, space, argument = text.partition(" ")
        if not space:
            for name, meta in self._commands.items():
                if name.startswith(command):
                    yield Completion(name, start_position=-len(text), display_meta=meta)
        elif command in ("/mode", "/new") and " " not in argument:
            for key in self._modes():
                if key.startswith(argument):
                    yield Completion(key, start_position=-len(argument))


class _TerminalReader:
    def __init__(self, history: Path | None, completer: Completer, keys: KeyBindings) -> None:
        stored = FileHistory(str(history)) if history is not None else InMemoryHistory()
        self._lines: PromptSession[str] = PromptSession(
            history=stored,
            completer=completer,
            complete_while_typing=False,
            key_bindings=keys,
        )
        # No history: Up then Enter at `approve? [y/n]` recalled the last answer and approved.
        self._answers: PromptSession[str] = PromptSession(history=DummyHistory())

    # handle_sigint=False: the chat owns SIGINT (it stops a running turn); at the prompt the
    # terminal is raw and Ctrl-C arrives as a key anyway.
    async def read(self, prompt: str) -> str:
        return await self._lines.prompt_async(prompt, handle_sigint=False)

    async def ask(self, prompt: str) -> str:
        return await self._answers.prompt_async(prompt, handle_sigint=False)


class _PlainReader:
    async def read(self, prompt: str) -> str:
        return await asyncio.to_thread(_plain_line, prompt)

    async def ask(self, prompt: str) -> str:
        return await self.read(prompt)


def _plain_line(prompt: str) -> str:
    sys.stdout.write(prompt)
    sys.stdout.flush()
    # Bytes that are not UTF-8 become lone surrogates, which the chat refuses with a
    # message; strict decoding (a UTF-8 locale) would end the chat with a traceback instead.
    raw = sys.stdin.buffer.readline()
    line = raw.decode(sys.stdin.encoding or "utf-8", "surrogateescape")
    if not line:
        raise EOFError
    return line.rstrip("\n")


def open_reader(
    data_dir: Path,
    commands: dict[str, str],
    modes: Callable[[], Sequence[str]],
    on_toggle_details: Callable[[], None],
) -> LineReader:
    """A terminal prompt with persistent history, or a plain reader when stdin is piped."""
    if not sys.stdin.isatty():
        return _PlainReader()
    keys = KeyBindings()

    @keys.add("c-o")
    def _toggle(event: KeyPressEvent) -> None:
        run_in_terminal(on_toggle_details)

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        if event.current_buffer.text:  # Ctrl-C on a typed line clears it
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    history: Path | None = data_dir / HISTORY_FILE
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home still gets a chat, just without saved history
        history = None
    return _TerminalReader(history, SlashCompleter(commands, modes), keys)
