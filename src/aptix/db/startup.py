"""A database error met by start-up after migrating, as one ``error:`` line.

Migrating is the first thing every command does to the database (``open_database`` says
what went wrong there). Marking the turns of dead processes ``interrupted`` comes later and
is start-up's first write: a role that may read but not write, or a server gone meanwhile,
ends the command there the same way, ``error: Cannot open the database at <url>: <the
driver's words> — <how to fix it>`` with exit code 2, not with a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError

from aptix.db.engine import driver_message, failure_hint, shown_url
from aptix.db.outage import database_error_code
from aptix.errors import ConfigurationError

__all__ = ["database_at_start", "start_up_failure"]


def start_up_failure(url: str, exc: BaseException) -> ConfigurationError:
    """The one-line error for ``exc``, met on the database at ``url`` while starting up."""
    return ConfigurationError(
        f"Cannot open the database at {shown_url(url)}: {driver_message(exc)}",
        hint=failure_hint(url, exc),
    )


@contextmanager
def database_at_start(url: str) -> Iterator[None]:
    """End start-up with :func:`start_up_failure` for a database error in the block."""
    try:
        yield
    except ConfigurationError:
        raise
    except Exception as exc:
        if not isinstance(exc, DBAPIError) and database_error_code(exc) is None:
            raise  # not the database's: a bug, with its traceback
        raise start_up_failure(url, exc) from exc
