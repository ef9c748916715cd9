"""Entry point of the ``aptix`` script: a Ctrl-C at any moment ends it quietly.

This module stays light: the application (:mod:`aptix.cli.app`) imports typer, Rich and
every command's module (the reasoner, database and workflow packages only when a command runs
that needs them), and a Ctrl-C meanwhile would otherwise print a KeyboardInterrupt traceback,
before typer handles interrupts.
"""

from __future__ import annotations

import sys
from typing import Any

#: The exit code of a command ended by Ctrl-C (128 + SIGINT), as typer gives once it runs.
INTERRUPTED = 130


def main() -> None:
    """Entry point of the ``aptix`` script."""
    try:
        from aptix.cli.app import run

        run()
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED)


def __getattr__(name: str) -> Any:
    # ``from aptix.cli.main import app`` (tests, embedders) without importing it up front.
    if name == "app":
        from aptix.cli.app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
