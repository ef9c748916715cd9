"""The API keys of ``APTIX_API_KEYS``: who each belongs to, and the roles they may carry."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ROLES", "KeyOwner", "parse_api_keys"]

#: API key roles, weakest first: ``user`` runs tools, ``author`` also drafts, updates and
#: validates workflows, ``admin`` also publishes, deprecates, disables and removes them.
ROLES = ("user", "author", "admin")


class KeyOwner(NamedTuple):
    """Who an API key belongs to, and what it may do."""

    org: str
    user: str
    role: str = "user"


def parse_api_keys(text: str) -> dict[str, KeyOwner]:
    """``key=org:user[:role],...`` parsed into key -> owner; ValueError when malformed."""
    if not text.strip():
        return {}
    keys: dict[str, KeyOwner] = {}
    positions: dict[str, int] = {}
    for index, item in enumerate(text.split(","), 1):
        key, _, who = item.strip().partition("=")
        org, _, rest = who.partition(":")
        user, _, role = rest.partition(":")
        if not key or not org or not user:
            raise ValueError(
                f"APTIX_API_KEYS entry #{index} must look like 'key=org:user' or "
                "'key=org:user:role'."
            )
        role = role.strip() or "user"
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
