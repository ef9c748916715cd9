"""Telling a database that cannot be reached from a statement that failed."""

from __future__ import annotations

import socket

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


class DatabaseUnavailable(ConnectionError):
    """Raised at a surface for a call that failed with :data:`DATABASE_UNAVAILABLE`."""


def is_database_outage(exc: BaseException) -> bool:
    """True when ``exc`` means the database cannot be reached now (not a bad statement)."""
    if isinstance(exc, sa.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, _UNREACHABLE)
