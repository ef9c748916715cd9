"""Noticing that the SQLite file a running server uses was removed or replaced.

SQLite keeps writing through its open connections to a file that was unlinked (its folder
removed, say): every write succeeds, and all of it is gone when the process exits. So the
file's identity (device and inode) is taken when it is first seen and compared before each
unit of work and on ``/healthz``; once it is gone or another file stands at its path, the
database is unavailable (503 ``database_unavailable``) until the server is restarted.
"""

from __future__ import annotations

import os

from aptix.db.outage import DatabaseUnavailable
from aptix.logger import LogLevel, StdlibAdminLogger

__all__ = ["SqliteFile"]


class SqliteFile:
    """The file of a SQLite database, as the connections this process opened know it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._identity: tuple[int, int] | None = None
        self._lost: str | None = None

    def check(self) -> None:
        """:class:`DatabaseUnavailable` once the file is gone or replaced; else nothing."""
        if self._lost is not None:
            raise DatabaseUnavailable(self._lost)
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            if self._identity is None:
                return  # not created yet: the first connection creates it
            self._lose("was removed")
        except OSError:
            return  # not ours to judge (permissions): the driver says what it cannot open
        else:
            identity = (stat.st_dev, stat.st_ino)
            if self._identity is None:
                self._identity = identity
            elif identity != self._identity:
                self._lose("was replaced by another file")
        if self._lost is not None:
            raise DatabaseUnavailable(self._lost)

    def _lose(self, what: str) -> None:
        # Not reopened by itself: a file created anew at the path (as SQLite does on a new
        # connection) would hold none of the data, and writes there would look fine.
        self._lost = (
            f"The SQLite database file {self.path} {what} while the server ran; stop the "
            "server, remove its -wal and -shm files, restore the database file and start the "
            "server (docs/deployment.md)."
        )
        StdlibAdminLogger().add_custom_event(
            LogLevel.ERROR,
            "[Database_SqliteFile__Gone]",
            f"The SQLite database file {what} while the server ran: the database is "
            "unavailable (503) until it is restored and the server restarted.",
            ("Path", self.path),
        )
