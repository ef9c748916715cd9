"""What tool modules, plugins and tools print while a command runs: on stderr, made inert.

A command's stdout is its result (``--json`` output a program reads, a table). Code Aptix
loads prints there too (a module at import, a tool as it runs); inside
:func:`stdout_kept_for_results` that text goes to stderr instead, each line through
:func:`~aptix.cli.output.inert` (as a JSON log line with ``APTIX_LOG_JSON``), and what
writes to the file descriptor itself (a subprocess, a C library) reaches stderr unchanged.
``aptix mcp`` keeps its stdout for JSON-RPC the same way (``mcp/server.py``).

``sys.stdout`` stays a real text file meanwhile, an :class:`io.TextIOWrapper` over an
:class:`io.BufferedWriter`, as tool code may use it as one: ``sys.stdout.buffer.write``,
``encoding`` (UTF-8), ``subprocess.run(..., stdout=sys.stdout)`` (its ``fileno()`` is a copy
of stderr's descriptor). Only the raw layer under them is ours. ``isatty()`` is False: what
is written there is shown inert, so escape sequences would only show as symbols.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

from aptix.cli.output import inert

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = ["stdout_kept_for_results"]


class _InertLines(io.RawIOBase):
    """The bytes written to stdout, passed to stderr in whole lines, inert."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd  # a copy of stderr's descriptor; None when stderr is closed
        self._lock = threading.Lock()  # tools print from worker threads too
        self._pending = b""

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        if self._fd is None:
            raise io.UnsupportedOperation("fileno")
        return self._fd

    def write(self, data: ReadableBuffer) -> int:
        written = bytes(data)
        with self._lock:
            lines = (self._pending + written).split(b"\n")
            self._pending = lines.pop()
        for line in lines:
            _say(line)
        return len(written)

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, b""
        if pending:
            _say(pending)

    def close(self) -> None:
        if not self.closed:
            self.flush()
            if self._fd is not None:
                os.close(self._fd)
        super().close()


def _inert_stdout() -> io.TextIOWrapper:
    try:
        fd: int | None = os.dup(2)
    except OSError:
        fd = None
    return io.TextIOWrapper(
        io.BufferedWriter(_InertLines(fd)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )


def _say(data: bytes) -> None:
    from aptix.log_setup import stderr_line

    # Whole lines: a character's UTF-8 bytes are never cut in two. Bytes that are not UTF-8
    # (written to ``sys.stdout.buffer``) are shown as escapes.
    line = data.decode("utf-8", "backslashreplace")
    if not stderr_line(logging.INFO, line):
        sys.stderr.write(inert(line) + "\n")
        sys.stderr.flush()


@contextmanager
def stdout_kept_for_results() -> Iterator[int | None]:
    """Inside the block, what is printed to stdout goes to stderr (see the module's docstring).

    Yields a copy of the descriptor stdout had (``aptix mcp`` writes JSON-RPC to it), or
    None when stdout or stderr is closed.
    """
    if sys.stdout is not None:
        with suppress(OSError, ValueError):
            sys.stdout.flush()
    kept = _point_fd_1_at_stderr()
    shown = _inert_stdout()
    printed, sys.stdout = sys.stdout, shown
    try:
        yield kept
    finally:
        sys.stdout = printed
        with suppress(OSError, ValueError):
            shown.close()  # what is left of a line is written first
        if kept is not None:
            os.dup2(kept, 1)
            os.close(kept)


def _point_fd_1_at_stderr() -> int | None:
    """A copy of file descriptor 1, which now writes to stderr; None when either is closed."""
    try:
        kept = os.dup(1)
    except OSError:
        return None
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(kept)
        return None
    return kept
