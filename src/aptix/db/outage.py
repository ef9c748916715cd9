"""Telling a database that cannot be reached, or that refuses the server, from a bad statement."""

from __future__ import annotations

import re
import socket
import sqlite3
from collections.abc import Iterator

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import exc as sa

__all__ = [
    "DATABASE_REFUSED",
    "DATABASE_UNAVAILABLE",
    "DatabaseRefused",
    "DatabaseUnavailable",
    "database_error_code",
    "database_refusal",
    "from_aptix_database",
    "is_database_outage",
    "is_disconnect",
    "mark_from_aptix_database",
    "refusal_in",
]

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


#: What a statement the database refused fails with (HTTP maps it to 503, MCP to a tool
#: error); ``{reason}`` is the database's own words, which name the table, never a value.
DATABASE_REFUSED = (
    "The database refused the server's statement ({reason}): the server's database role "
    "lacks a right it needs, or the database is read-only. Retrying will not help until an "
    "operator fixes that."
)
_REFUSED_PATTERN = re.compile(
    re.escape(DATABASE_REFUSED).replace(re.escape("{reason}"), "(?P<reason>.+?)")
)

#: SQLSTATEs of a statement refused for who runs it or where, whatever the statement:
#: insufficient_privilege (a missing GRANT, also "must be owner" and row-level security)
#: and read_only_sql_transaction (a standby, or ``default_transaction_read_only``).
_REFUSED_SQLSTATES = frozenset({"42501", "25006"})
#: SQLite's primary result code for a write to a file opened read-only (SQLITE_READONLY).
_SQLITE_READONLY = 8


class DatabaseUnavailable(ConnectionError):
    """Raised at a surface for a call that failed with :data:`DATABASE_UNAVAILABLE`."""


class DatabaseRefused(Exception):
    """Raised at a surface for a call that failed with :data:`DATABASE_REFUSED`."""

    def __init__(self, reason: str) -> None:
        super().__init__(DATABASE_REFUSED.format(reason=reason))
        #: The database's own words (``permission denied for table sessions``).
        self.reason = reason


def is_database_outage(exc: BaseException) -> bool:
    """True when ``exc`` means the database cannot be reached now (not a bad statement).

    SQLAlchemy wraps the driver's error (``DBAPIError.orig``, which for asyncpg wraps the
    asyncpg error as its ``__cause__``), so the whole chain is read, not only ``exc``.
    """
    if isinstance(exc, sa.DBAPIError) and exc.connection_invalidated:
        return True
    if database_refusal(exc) is not None:  # SQLite says so with an OperationalError
        return False
    # SQLAlchemy gives an error raised while connecting no statement.
    connecting = isinstance(exc, sa.DBAPIError) and exc.statement is None
    for link in _chain(exc):
        if isinstance(link, _UNREACHABLE + _SERVER_UNAVAILABLE):
            return True
        if connecting and isinstance(link, _REFUSED_AT_CONNECT):
            return True
    return False


def waited_for_lock(exc: BaseException) -> bool:
    """True when ``exc`` is SQLite's busy timeout run out: the unit already waited it whole.

    Another process holds the file's write lock. The same unit tried again at once would
    wait that long again, unlike one that met an outage, which fails fast.
    """
    return any(
        isinstance(link, sqlite3.OperationalError) and "database is locked" in str(link)
        for link in _chain(exc)
    )


def is_disconnect(exc: BaseException) -> bool:
    """True when ``exc`` met a pooled connection that had died (a restart, a failover).

    SQLAlchemy then renews the whole pool, so the same statement tried once more meets a
    live connection, or the outage itself.
    """
    return isinstance(exc, sa.DBAPIError) and exc.connection_invalidated


def database_refusal(exc: BaseException) -> str | None:
    """The database's reason when ``exc`` is a statement it refused for lack of rights.

    A role without a privilege Aptix needs, a read-only database (a PostgreSQL standby, a
    SQLite file opened read-only): neither an outage (retrying soon does not help) nor a
    bug. None for any other error.
    """
    for link in _chain(exc):
        if isinstance(link, DatabaseRefused):
            return link.reason
        # The driver's own error: SQLAlchemy's adapter of it says the same with its class name.
        if (isinstance(link, asyncpg.PostgresError) and link.sqlstate in _REFUSED_SQLSTATES) or (
            isinstance(getattr(link, "sqlite_errorcode", None), int)
            and link.sqlite_errorcode & 0xFF == _SQLITE_READONLY  # type: ignore[attr-defined]
        ):
            return " ".join(str(link).split()) or type(link).__name__
    return None


def database_error_code(exc: BaseException) -> str | None:
    """``database_unavailable`` or ``database_refused`` for a database failure, else None."""
    if database_refusal(exc) is not None:
        return "database_refused"
    return "database_unavailable" if is_database_outage(exc) else None


#: The attribute :func:`mark_from_aptix_database` sets on an error.
_FROM_APTIX_DATABASE = "_aptix_database"


def mark_from_aptix_database(exc: BaseException) -> None:
    """Record that ``exc`` came out of a call on Aptix's own database (``db.Database``)."""
    setattr(exc, _FROM_APTIX_DATABASE, True)


def from_aptix_database(exc: BaseException) -> bool:
    """True when ``exc``, or an error it was raised from, came out of Aptix's own database.

    The errors :func:`database_error_code` reads are every database's: a tool's own SQLite
    file or PostgreSQL, or a socket of its own (``ConnectionRefusedError``), raise the same.
    Only Aptix's may be answered ``database_refused`` or ``database_unavailable``.
    """
    return any(getattr(link, _FROM_APTIX_DATABASE, False) for link in _chain(exc))


def refusal_in(message: str | None) -> str | None:
    """The reason in a call's failure that is :data:`DATABASE_REFUSED`, else None."""
    found = _REFUSED_PATTERN.fullmatch(message or "")
    return found["reason"] if found else None


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
