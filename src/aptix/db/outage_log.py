"""Logging a database outage once while it lasts, and a refusal once per reason.

Each surface (the HTTP API, the MCP server, the agent loop) keeps its own, with its own tag:
the requests or turns failing during an outage are counted, not logged one by one.
"""

from __future__ import annotations

import time

from aptix.logger import LogLevel, StdlibAdminLogger

__all__ = ["OutageLog", "RefusalLog"]


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

    def failed(self, exc: BaseException, path: str | None = None) -> None:
        """Count a failed request (or turn), logging it when it starts a new outage."""
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
                *_where(path),
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

    def refused(self, reason: str, path: str | None = None) -> None:
        """Count a refused request (or turn), logging its reason unless logged lately."""
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
                *_where(path),
            )


def _where(path: str | None) -> tuple[tuple[str, str], ...]:
    """The log record's ``Path`` field: the request's; none for a turn (its ids say where)."""
    return () if path is None else (("Path", path),)
