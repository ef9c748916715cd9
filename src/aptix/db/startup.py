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

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from aptix.db.engine import driver_message, failure_hint, shown_url
from aptix.db.outage import database_error_code, database_refusal
from aptix.errors import ConfigurationError

__all__ = ["WRITE_RIGHTS_HINT", "database_at_start", "start_up_failure"]

#: The hint for a PostgreSQL role that may read Aptix's tables but not write them, or a
#: database that takes no writes.
WRITE_RIGHTS_HINT = (
    "grant the role in APTIX_DATABASE_URL SELECT, INSERT, UPDATE and DELETE on Aptix's tables "
    "and USAGE on their sequences, on a database that accepts writes (docs/deployment.md)"
)


def start_up_failure(url: str, exc: BaseException) -> ConfigurationError:
    """The one-line error for ``exc``, met on the database at ``url`` while starting up."""
    if make_url(url).get_backend_name() == "postgresql" and database_refusal(exc) is not None:
        hint = WRITE_RIGHTS_HINT
    else:  # a server gone, or a SQLite file it cannot write: as when migrating
        hint = failure_hint(url, exc)
    return ConfigurationError(
        f"Cannot open the database at {shown_url(url)}: {driver_message(exc)}", hint=hint
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
