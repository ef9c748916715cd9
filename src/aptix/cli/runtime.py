"""Running CLI commands on the runtime, with configuration errors shown as messages."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from aptix.cli.output import fail
from aptix.errors import ConfigurationError

if TYPE_CHECKING:
    from aptix.runtime import Runtime
    from aptix.settings import AptixSettings

__all__ = ["run_with_runtime", "settings_or_exit"]

T = TypeVar("T")


def run_with_runtime(work: Callable[[Runtime], Awaitable[T]]) -> T:
    """Open the runtime, run ``work`` on it and close it; configuration errors end the command."""
    from aptix.runtime import open_runtime

    async def main() -> T:
        async with open_runtime() as runtime:
            return await work(runtime)

    try:
        return asyncio.run(main())
    except ConfigurationError as exc:
        fail(str(exc), code=2)


def settings_or_exit() -> AptixSettings:
    """The settings; an invalid value ends the command with its message (exit code 2)."""
    from aptix.settings import load_settings

    try:
        return load_settings()
    except ConfigurationError as exc:
        fail(str(exc), code=2)
