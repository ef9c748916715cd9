"""What tool modules, plugins and tools print while a command runs: on stderr, made inert.

A command's stdout is its result (``--json`` output a program reads, a table). Code Aptix
loads prints there too (a module at import, a tool as it runs); inside
:func:`stdout_kept_for_results` that text goes to stderr instead, each line through
:func:`~aptix.cli.output.inert` (as a JSON log line with ``APTIX_LOG_JSON``), and what
writes to the file descriptor itself (a subprocess, a C library) reaches stderr unchanged.
``aptix mcp`` keeps its stdout for JSON-RPC the same way (``mcp/server.py``).
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TextIO, cast

from aptix.cli.output import inert

__all__ = ["stdout_kept_for_results"]


class _InertLines(io.TextIOBase):
    """A text stream that passes whole lines to stderr, inert."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # tools print from worker threads too
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            lines = (self._pending + text).split("\n")
            self._pending = lines.pop()
        for line in lines:
            _say(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, ""
        if pending:
            _say(pending)


def _say(line: str) -> None:
    from aptix.log_setup import stderr_line

    if not stderr_line(logging.INFO, line):
        sys.stderr.write(inert(line) + "\n")
        sys.stderr.flush()


@contextmanager
def stdout_kept_for_results() -> Iterator[None]:
    """Inside the block, what is printed to stdout goes to stderr (see the module's docstring)."""
    if sys.stdout is not None:
        with suppress(OSError, ValueError):
            sys.stdout.flush()
    kept = _point_fd_1_at_stderr()
    printed, sys.stdout = sys.stdout, cast(TextIO, _InertLines())
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = printed
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
