"""Shared console helpers: JSON for pipes, Rich for people, clean errors for both."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console

__all__ = ["console", "err_console", "fail", "print_json"]

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    """Write ``data`` as indented JSON to stdout (no colour, so pipes get plain text)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` as an error on stderr and exit with ``code``."""
    err_console.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    raise typer.Exit(code)
