"""A PostgreSQL URL's query parameters, sorted into the arguments asyncpg takes.

SQLAlchemy hands every query parameter of a ``postgresql+asyncpg://`` URL to
``asyncpg.connect`` as a keyword argument, as text. The URLs managed databases hand out carry
libpq's parameters (``?sslmode=require``), which asyncpg reads only inside a DSN, and
asyncpg's own numeric arguments would arrive as strings: either way the first connection
raised a ``TypeError``. So each parameter is sorted here, before an engine is made:

- libpq's (``sslmode``, ``sslrootcert``, ``target_session_attrs``, ``application_name``...)
  go to asyncpg in a DSN of their own, which it reads as libpq does;
- ``connect_timeout`` (libpq's, in seconds) is asyncpg's ``timeout``;
- asyncpg's own arguments (``ssl``, ``timeout``, ``command_timeout``...) and SQLAlchemy's
  ``prepared_statement_cache_size`` are given their type;
- ``host`` and ``port`` stay in the URL for SQLAlchemy, which reads them as libpq does: a
  unix socket's folder (``?host=/var/run/postgresql``, Cloud SQL's ``/cloudsql/...``),
  ``host=h:5433``, or several hosts; their ports are checked here;
- anything else stops start-up with one line naming it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from sqlalchemy.engine import URL

from aptix.errors import ConfigurationError

__all__ = ["LIBPQ_PARAMETERS", "asyncpg_arguments"]

#: libpq parameters asyncpg reads from a DSN, with libpq's meaning (``application_name``
#: becomes the server setting it is).
LIBPQ_PARAMETERS = frozenset(
    {
        "application_name",
        "gsslib",
        "krbsrvname",
        "passfile",
        "service",
        "ssl_max_protocol_version",
        "ssl_min_protocol_version",
        "sslcert",
        "sslcrl",
        "sslkey",
        "sslmode",
        "sslnegotiation",
        "sslpassword",
        "sslrootcert",
        "target_session_attrs",
    }
)

_HINT = (
    "remove it from APTIX_DATABASE_URL; docs/deployment.md lists the query parameters Aptix reads"
)


def _seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(text)
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _flag(text: str) -> bool:
    words = {"true": True, "1": True, "yes": True, "on": True}
    words |= {"false": False, "0": False, "no": False, "off": False}
    return words[text.strip().lower()]


#: asyncpg's (and SQLAlchemy's) arguments a URL may carry, with how their text is read.
_TYPED: dict[str, tuple[Callable[[str], Any], str]] = {
    "ssl": (str, ""),
    "timeout": (_seconds, "a number of seconds above 0"),
    "command_timeout": (_seconds, "a number of seconds above 0"),
    "statement_cache_size": (_count, "a whole number of at least 0"),
    "max_cached_statement_lifetime": (_count, "a whole number of at least 0"),
    "max_cacheable_statement_size": (_count, "a whole number of at least 0"),
    "prepared_statement_cache_size": (_count, "a whole number of at least 0"),
    "direct_tls": (_flag, "true or false"),
}

#: libpq names of asyncpg arguments.
_RENAMED = {"connect_timeout": "timeout"}

#: Parameters SQLAlchemy's asyncpg dialect reads from the query itself (one or more hosts,
#: each a name, an address, ``name:port`` or a unix socket's folder; and their ports).
_KEPT = frozenset({"host", "port"})

#: A host SQLAlchemy splits into a name and a port (a path or an IPv6 address it does not).
_HOST_AND_PORT = re.compile(r"[A-Za-z0-9.-]*:([^:]*)")


def _values(given: str | tuple[str, ...]) -> list[str]:
    texts = given if isinstance(given, tuple) else (given,)
    return [part for text in texts for part in text.split(",")]


def _check_ports(name: str, given: str | tuple[str, ...]) -> None:
    for value in _values(given):
        if name == "host":
            split = _HOST_AND_PORT.fullmatch(value)
            if split is None:
                continue
            value = split.group(1)
        if value and not (value.isdigit() and 0 < int(value) < 65536):
            raise ConfigurationError(
                f"APTIX_DATABASE_URL has the port {value!r} in its query parameter {name!r}, "
                "which is not a port from 1 to 65535.",
                hint=f"fix or remove {name} in APTIX_DATABASE_URL",
            )


def asyncpg_arguments(url: URL) -> tuple[URL, dict[str, Any]]:
    """``url`` with only the query SQLAlchemy reads, and the ``connect_args`` for the rest.

    Raises :class:`ConfigurationError` naming a parameter asyncpg does not read, or one whose
    value is not of its type (the value is not repeated: it may be a secret).
    """
    libpq: dict[str, str] = {}
    arguments: dict[str, Any] = {}
    kept: dict[str, str | tuple[str, ...]] = {}
    for name, given in url.query.items():
        if name in _KEPT:
            _check_ports(name, given)
            kept[name] = given
            continue
        # A parameter given twice is read as libpq reads it: the last one counts.
        value = given[-1] if isinstance(given, tuple) else given
        if name in LIBPQ_PARAMETERS:
            libpq[name] = value
            continue
        argument = _RENAMED.get(name, name)
        if argument not in _TYPED:
            raise ConfigurationError(
                f"APTIX_DATABASE_URL has the query parameter {name!r}, which neither Aptix "
                "nor its PostgreSQL driver (asyncpg) reads.",
                hint=_HINT,
            )
        read, kind = _TYPED[argument]
        try:
            arguments[argument] = read(value)
        except (ValueError, KeyError):
            raise ConfigurationError(
                f"APTIX_DATABASE_URL's query parameter {name!r} must be {kind}.",
                hint=f"fix or remove {name} in APTIX_DATABASE_URL",
            ) from None
    if libpq:
        # Only the query: the host, port, user, password and database that SQLAlchemy passes
        # as arguments take precedence over a DSN's in asyncpg.
        arguments["dsn"] = "postgresql://?" + urlencode(libpq)
    return url.set(query=kept), arguments
