"""Telling a database that cannot be reached from a statement that failed."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import exc as sa

__all__ = ["DATABASE_UNAVAILABLE", "DatabaseUnavailable", "is_database_outage"]

#: What a tool call that met an outage fails with (HTTP maps it to 503, MCP to a tool error).
DATABASE_UNAVAILABLE = "The database is unavailable right now; retry shortly."

_UNREACHABLE = (
    ConnectionError,
    TimeoutError,
    socket.gaierror,
    sa.OperationalError,
    sa.InterfaceError,
    sa.DisconnectionError,
    sa.TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.InterfaceError,
)

#: Server errors that say the server cannot serve this session now, whenever they come:
#: shutting down or starting up (also a backend terminated by an administrator or by a
#: crash of another backend), or out of connection slots.
_SERVER_UNAVAILABLE = (
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
)

#: Server errors that mean an outage only while a connection is being opened: a database
#: taken offline answers "not currently accepting connections" (55000), which a statement
#: may also raise for reasons of its own.
_REFUSED_AT_CONNECT = (asyncpg.ObjectNotInPrerequisiteStateError,)


class DatabaseUnavailable(ConnectionError):
    """Raised at a surface for a call that failed with :data:`DATABASE_UNAVAILABLE`."""


def is_database_outage(exc: BaseException) -> bool:
    """True when ``exc`` means the database cannot be reached now (not a bad statement).

    SQLAlchemy wraps the driver's error (``DBAPIError.orig``, which for asyncpg wraps the
    asyncpg error as its ``__cause__``), so the whole chain is read, not only ``exc``.
    """
    if isinstance(exc, sa.DBAPIError) and exc.connection_invalidated:
        return True
    # SQLAlchemy gives an error raised while connecting no statement.
    connecting = isinstance(exc, sa.DBAPIError) and exc.statement is None
    for link in _chain(exc):
        if isinstance(link, _UNREACHABLE + _SERVER_UNAVAILABLE):
            return True
        if connecting and isinstance(link, _REFUSED_AT_CONNECT):
            return True
    return False


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, the driver error it wraps and their causes, each once."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        link = todo.pop()
        if link is None or id(link) in seen or len(seen) >= 16:
            continue
        seen.add(id(link))
        yield link
        orig = getattr(link, "orig", None)
        # Not ``__context__``: an error raised while handling an outage is an error of its own.
        todo.extend([orig if isinstance(orig, BaseException) else None, link.__cause__])
