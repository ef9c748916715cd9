"""Bearer API keys mapped to an org and a user; without keys, one local user."""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from fastapi import Request

from aptix.api.errors import ApiError

__all__ = ["LOCAL_CALLER", "Caller", "caller"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: every session-bearing query is scoped to ``org`` (and ``user``)."""

    org: str
    user: str


LOCAL_CALLER = Caller("local", "local")


async def caller(request: Request) -> Caller:
    """FastAPI dependency: the authenticated caller (401 on a missing or wrong key)."""
    keys: dict[str, tuple[str, str]] = request.app.state.api_keys
    if not keys:
        return LOCAL_CALLER
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "Send an API key as 'Authorization: Bearer <key>'.")
    for key, (org, user) in keys.items():
        if hmac.compare_digest(key.encode(), token.strip().encode()):
            return Caller(org, user)
    raise ApiError(401, "The API key is not valid.")
