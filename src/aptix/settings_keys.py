"""The API keys of ``APTIX_API_KEYS``: who each belongs to, and the roles they may carry."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MAX_OWNER_NAME", "ROLES", "KeyOwner", "owner_name_problem", "parse_api_keys"]

#: API key roles, weakest first: ``user`` runs tools, ``author`` also drafts, updates and
#: validates workflows, ``admin`` also publishes, deprecates, disables and removes them.
ROLES = ("user", "author", "admin")

#: Longest org or user name: the columns that hold them (``sessions.org``, ``turns.user_id``,
#: ``mode_history.changed_by``, ...) are ``VARCHAR(200)``. PostgreSQL refuses a longer value
#: where SQLite would keep it, so every surface that takes a name refuses it first.
MAX_OWNER_NAME = 200


class KeyOwner(NamedTuple):
    """Who an API key belongs to, and what it may do."""

    org: str
    user: str
    role: str = "user"


def owner_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an org or user name (``"is empty"``, ...), or None when it can.

    The surfaces that take names (``APTIX_API_KEYS``, the CLI's ``--org`` and ``--user``) put
    the answer after the name's label: ``f"--user {problem}."``.
    """
    if not name.strip():
        return "is empty"
    if name != name.strip():
        # Keys strip them; a typed " acme" would otherwise be an org of its own.
        return "has spaces around it"
    if len(name) > MAX_OWNER_NAME:
        return f"is {len(name)} characters long; the most is {MAX_OWNER_NAME}"
    return None


def _invisible_at(key: str) -> int | None:
    """The 1-based position of ``key``'s first character outside visible ASCII, or None.

    Clients send a header as bytes: curl and httpx ASCII or UTF-8, browsers Latin-1, and the
    server reads them as Latin-1. Only visible ASCII is the same bytes every way; a space
    or a control is no part of a bearer token (RFC 6750 §2.1).
    """
    for position, char in enumerate(key, 1):
        if not "!" <= char <= "~":
            return position
    return None


def parse_api_keys(text: str) -> dict[str, KeyOwner]:
    """``key=org:user[:role],...`` parsed into key -> owner; ValueError when malformed.

    The key is everything before the entry's last ``=``, so a key may contain ``=`` (base64
    padding) and an org, user or role may not. Spaces around each part are not part of it;
    the key itself is visible ASCII, as every HTTP client sends it unchanged.
    """
    if not text.strip():
        return {}
    keys: dict[str, KeyOwner] = {}
    positions: dict[str, int] = {}
    for index, item in enumerate(text.split(","), 1):
        key, _, who = item.rpartition("=")
        org, _, rest = who.partition(":")
        user, _, role = rest.partition(":")
        key, org, user, role = key.strip(), org.strip(), user.strip(), role.strip()
        if not key or not org or not user:
            raise ValueError(
                f"APTIX_API_KEYS entry #{index} must look like 'key=org:user' or "
                "'key=org:user:role'."
            )
        if (position := _invisible_at(key)) is not None:
            # Never the key, nor its character: the message goes to logs and terminals.
            raise ValueError(
                f"APTIX_API_KEYS entry #{index}: the key's character #{position} is not "
                "visible ASCII; a key may hold only letters, digits and punctuation "
                "(0x21-0x7E), which HTTP clients send as they are."
            )
        for label, name in (("org", org), ("user", user)):
            if (problem := owner_name_problem(name)) is not None:
                raise ValueError(f"APTIX_API_KEYS entry #{index}: the {label} name {problem}.")
        role = role or "user"
        if role not in ROLES:
            raise ValueError(
                f"APTIX_API_KEYS entry #{index} has the unknown role '{role}'; "
                f"use one of: {', '.join(ROLES)}."
            )
        if key in positions:
            # Which owner would win is a guess: refuse, naming positions, never the key.
            raise ValueError(
                f"APTIX_API_KEYS entry #{index} repeats the key of entry "
                f"#{positions[key]}; list each key once."
            )
        positions[key] = index
        keys[key] = KeyOwner(org, user, role)
    return keys
