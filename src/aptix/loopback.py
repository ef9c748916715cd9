"""What counts as loopback: bind addresses, peers and ``Host`` headers of a keyless server.

Without API keys every caller is the one local admin, so such a server must be reachable
only from this machine, and only under a loopback name: a web page that rebinds its own DNS
name to 127.0.0.1 still sends its own name as ``Host``.
"""

from __future__ import annotations

import ipaddress

__all__ = ["LOOPBACK_NAMES", "host_header_name", "is_ip_literal", "is_loopback"]

#: The names a keyless server answers to (any 127.0.0.0/8 or ::1 address literal as well).
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and for loopback address literals (``127.0.0.5``, ``::1``)."""
    name = host.strip().lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def is_ip_literal(host: str) -> bool:
    """True when ``host`` is an IPv4 or IPv6 address rather than a name."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def host_header_name(value: str) -> str | None:
    """The name in a ``Host`` header without its port; None when the header is malformed.

    ``localhost:8000`` -> ``localhost``, ``[::1]:8000`` -> ``::1``.
    """
    value = value.strip()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not _is_port(rest)):
            return None
        return name
    name, colon, port = value.partition(":")
    if colon and not port.isdigit():
        return None
    return name or None


def _is_port(rest: str) -> bool:
    return rest.startswith(":") and rest[1:].isdigit()
