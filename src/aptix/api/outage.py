"""A database that cannot be reached (503 with ``Retry-After``) or refuses the server (503).

An outage is logged once while it lasts; a refusal (a missing ``GRANT``, a read-only
database) once per reason the database gives.
"""

from __future__ import annotations

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import exc as sa

from aptix.db.outage import DatabaseRefused, is_database_outage
from aptix.db.outage_log import OutageLog, RefusalLog

__all__ = ["OUTAGE_TYPES", "RETRY_AFTER_SECONDS", "OutageLog", "RefusalLog", "is_database_outage"]

#: What a client is told to wait before retrying.
RETRY_AFTER_SECONDS = 5

#: Exception types an exception handler is registered for; ``is_database_outage`` and
#: ``database_refusal`` decide.
OUTAGE_TYPES: tuple[type[Exception], ...] = (
    DatabaseRefused,
    sa.SQLAlchemyError,
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
)
