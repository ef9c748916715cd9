"""Running CLI commands on the runtime, with configuration errors shown as one line."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

from aptix.cli.output import fail
from aptix.errors import ConfigurationError

if TYPE_CHECKING:
    from aptix.runtime import Runtime
    from aptix.settings import AptixSettings

__all__ = ["check_runtime", "config_failed", "run_with_runtime", "settings_or_exit"]

T = TypeVar("T")


def config_failed(exc: ConfigurationError) -> NoReturn:
    """End the command with ``error: <what> — <how to fix>`` and exit code 2."""
    fail(exc.one_line(), code=2)


def run_with_runtime(
    work: Callable[[Runtime], Awaitable[T]],
    settings: AptixSettings | None = None,
    *,
    matches: bool = False,
    connect_mcp: bool = True,
) -> T:
    """Open the runtime, run ``work`` on it and close it; configuration errors end the command.

    Unless the command ``matches`` workflows, the cascade stays off when it was not asked for:
    its larger encoder would load (a second or more) for a command that ends long before its
    index is built.
    """
    from aptix.runtime import open_runtime

    chosen = settings or settings_or_exit()
    if not matches and chosen.match_cascade is None:
        chosen = chosen.model_copy(update={"match_cascade": False})

    async def main() -> T:
        async with open_runtime(chosen, connect_mcp=connect_mcp) as runtime:
            return await work(runtime)

    try:
        return asyncio.run(main())
    except ConfigurationError as exc:
        config_failed(exc)


def check_runtime(settings: AptixSettings) -> None:
    """Open and close the runtime once: a bad database, catalog or tool ends the command early.

    MCP servers are checked as configured but not started: the app connects to them itself,
    and a slow or unresponsive one would only delay the start (and be started twice).
    """

    async def nothing(_runtime: Runtime) -> None:
        return None

    run_with_runtime(nothing, settings, connect_mcp=False)


def settings_or_exit() -> AptixSettings:
    """The settings; an invalid value ends the command with one line (exit code 2)."""
    from aptix.settings import load_settings

    try:
        return load_settings()
    except ConfigurationError as exc:
        config_failed(exc)
