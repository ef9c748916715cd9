"""A database that cannot be reached (503 with ``Retry-After``) or refuses the server (503).

An outage is logged once while it lasts; a refusal (a missing ``GRANT``, a read-only
database) once per reason the database gives.
"""

from __future__ import annotations

import time

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import exc as sa

from aptix.db.outage import DatabaseRefused, is_database_outage
from aptix.logger import LogLevel, StdlibAdminLogger

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


class RefusalLog:
    """One error per reason the database refuses statements with (a missing ``GRANT``).

    Unlike an outage this does not pass: each reason is logged again only after
    ``quiet_seconds`` without it, so a refusal that lasts all day is still in today's log.
    """

    def __init__(
        self,
        quiet_seconds: float = 600.0,
        *,
        tag: str = "[HttpApi_Database__Refused]",
        answer: str = "answering 503",
    ) -> None:
        self._logger = StdlibAdminLogger()
        self._tag, self._answer = tag, answer
        self._quiet = quiet_seconds
        self._last: dict[str, float] = {}
        self.failures = 0

    def refused(self, reason: str, path: str) -> None:
        """Count a refused request, logging its reason unless logged in the quiet spell."""
        now = time.monotonic()
        last = self._last.get(reason)
        self._last[reason] = now
        self.failures += 1
        if last is None or now - last > self._quiet:
            # The database's words name the table or the read-only state, never a value.
            self._logger.add_custom_event(
                LogLevel.ERROR,
                self._tag,
                f"The database refused a statement ({reason}); {self._answer} until the "
                "server's database role has the rights docs/deployment.md lists and the "
                "database accepts writes.",
                ("Path", path),
            )
