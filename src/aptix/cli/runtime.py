"""Running CLI commands on the runtime, with configuration and database errors as one line."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from aptix.cli.foreign_output import stdout_kept_for_results
from aptix.cli.output import fail
from aptix.errors import ConfigurationError

if TYPE_CHECKING:
    from aptix.runtime import Runtime
    from aptix.settings import AptixSettings

__all__ = [
    "check_runtime",
    "config_failed",
    "database_failed",
    "database_failure",
    "is_database_error",
    "run_leaving_strays",
    "run_with_runtime",
    "settings_or_exit",
]

T = TypeVar("T")


def config_failed(exc: ConfigurationError) -> NoReturn:
    """End the command with ``error: <what> — <how to fix>`` and exit code 2."""
    fail(exc.one_line(), code=2)


def database_failed(url: str, exc: BaseException) -> NoReturn:
    """End the command with one line for a database error met while it ran, and exit code 1.

    The same error met while the database opens is a configuration error (exit code 2).
    """
    fail(database_failure(url, exc))


def database_failure(url: str, exc: BaseException) -> str:
    """What :func:`database_failed` says: the database, the driver's words and what to do."""
    from aptix.db.engine import driver_message, failure_hint, shown_url
    from aptix.db.outage import DatabaseUnavailable

    if isinstance(exc, DatabaseUnavailable):  # says all itself (the SQLite file was removed)
        return str(exc)
    words, hint = driver_message(exc), failure_hint(url, exc)
    return f"The database at {shown_url(url)} failed: {words} — {hint}"


def is_database_error(exc: BaseException) -> bool:
    """True for an error of the database (the driver's, or a SQLite file gone), not of Aptix."""
    from sqlalchemy.exc import DBAPIError

    from aptix.db.outage import DatabaseUnavailable, database_error_code, from_aptix_database

    if isinstance(exc, DBAPIError | DatabaseUnavailable):
        return True
    # A server that refuses to connect: asyncpg raises the socket's own error, unwrapped.
    return from_aptix_database(exc) and database_error_code(exc) is not None


def run_with_runtime(
    work: Callable[[Runtime], Awaitable[T]],
    settings: AptixSettings | None = None,
    *,
    matches: bool = False,
    connect_mcp: bool = True,
) -> T:
    """Open the runtime, run ``work`` on it and close it; configuration errors end the command.

    So does a database error ``work`` meets (a read-only file, a full disk, a server gone),
    with :func:`database_failed`. What the runtime's code prints goes to stderr
    (:func:`~aptix.cli.foreign_output.stdout_kept_for_results`): stdout is the command's.

    Unless the command ``matches`` workflows, the cascade stays off when it was not asked for:
    its larger encoder would load (a second or more) for a command that ends long before its
    index is built.
    """
    from aptix.runtime import open_runtime

    chosen = settings or settings_or_exit()
    if not matches and chosen.match_cascade is None:
        chosen = chosen.model_copy(update={"match_cascade": False})

    async def main() -> T:
        async with contextlib.AsyncExitStack() as stack:
            with _said_once():
                runtime = await stack.enter_async_context(
                    open_runtime(chosen, connect_mcp=connect_mcp)
                )
            return await work(runtime)

    try:
        with stdout_kept_for_results():
            return run_leaving_strays(main())
    except ConfigurationError as exc:
        config_failed(exc)
    except Exception as exc:
        if not is_database_error(exc):
            raise
        database_failed(chosen.effective_database_url, exc)


#: How long tasks still running when a command has its answer get to stop when cancelled.
STRAY_GRACE_SECONDS = 0.5


def run_leaving_strays(main: Coroutine[Any, Any, T]) -> T:
    """:func:`asyncio.run`, except that tasks left running when ``main`` ends are not awaited.

    A tool abandoned at its time limit may swallow every cancellation: once the command has
    its answer, such a task is cancelled, given :data:`STRAY_GRACE_SECONDS`, and left behind,
    so that the command ends (``asyncio.run`` would wait for it as long as it runs).
    """
    loop = asyncio.new_event_loop()
    task = loop.create_task(main)
    try:
        return loop.run_until_complete(task)
    finally:
        try:
            if not task.done():  # Ctrl-C: ``main`` closes what it opened, however long
                task.cancel()
                loop.run_until_complete(asyncio.wait((task,)))
            strays = asyncio.all_tasks(loop)
            for stray in strays:
                stray.cancel()
            if strays:
                loop.run_until_complete(asyncio.wait(strays, timeout=STRAY_GRACE_SECONDS))
                # Those still running are left behind knowingly: no "destroyed but pending".
                loop.set_exception_handler(_ignoring_pending(strays))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def _ignoring_pending(
    strays: set[asyncio.Task[Any]],
) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("task") not in strays:
            loop.default_exception_handler(context)

    return handle


@contextlib.contextmanager
def _said_once() -> Iterator[None]:
    """Hold back ``aptix`` log records in the block, then pass them on.

    A record that repeats the :class:`ConfigurationError` ending the command (a tool the
    registry refused, logged as it raised) is dropped: the error line says it once.
    """
    logger = logging.getLogger("aptix")
    held: list[logging.LogRecord] = []

    def hold(record: logging.LogRecord) -> bool:
        held.append(record)
        return False

    logger.addFilter(hold)
    ending = ""
    try:
        yield
    except ConfigurationError as exc:
        ending = str(exc)
        raise
    finally:
        logger.removeFilter(hold)
        for record in held:
            said = record.getMessage().partition("] ")[2]
            if not (ending and said and said in ending):
                logger.handle(record)


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
