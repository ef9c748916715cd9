"""A database that cannot be reached: 503 with ``Retry-After``, logged once per outage."""

from __future__ import annotations

import time

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import exc as sa

from aptix.db.outage import is_database_outage
from aptix.logger import LogLevel, StdlibAdminLogger

__all__ = ["OUTAGE_TYPES", "RETRY_AFTER_SECONDS", "OutageLog", "is_database_outage"]

#: What a client is told to wait before retrying.
RETRY_AFTER_SECONDS = 5

#: Exception types an exception handler is registered for; ``is_database_outage`` decides.
OUTAGE_TYPES: tuple[type[Exception], ...] = (
    sa.SQLAlchemyError,
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
)


class OutageLog:
    """One warning when an outage starts; the requests failing during it are only counted.

    An outage is over once no database failure was seen for ``quiet_seconds``.
    """

    def __init__(
        self,
        quiet_seconds: float = 30.0,
        *,
        tag: str = "[HttpApi_Database__Unavailable]",
        answer: str = "answering 503",
    ) -> None:
        self._logger = StdlibAdminLogger()
        self._tag, self._answer = tag, answer
        self._quiet = quiet_seconds
        self._last: float | None = None
        self.failures = 0

    def failed(self, exc: BaseException, path: str) -> None:
        """Count a failed request, logging it when it starts a new outage."""
        now = time.monotonic()
        starts = self._last is None or now - self._last > self._quiet
        self._last = now
        self.failures += 1
        if starts:
            # The type only: a driver's message may quote statement parameters (user text).
            self._logger.add_custom_event(
                LogLevel.WARNING,
                self._tag,
                f"The database is not reachable ({type(exc).__name__}); {self._answer} "
                f"until it is back.",
                ("Path", path),
            )
