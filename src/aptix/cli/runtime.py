"""Opening the runtime from the CLI, with configuration errors shown as messages."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from aptix.cli.output import fail
from aptix.errors import ConfigurationError
from aptix.runtime import Runtime, build_runtime

__all__ = ["open_runtime"]


@contextmanager
def open_runtime() -> Iterator[Runtime]:
    """Build the runtime; a configuration problem ends the command with its message."""
    try:
        runtime = build_runtime()
    except ConfigurationError as exc:
        fail(str(exc), code=2)
    yield runtime
