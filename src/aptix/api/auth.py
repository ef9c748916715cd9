"""Bearer API keys: one verifier serves the HTTP API (FastAPI ``HTTPBearer``) and ``/mcp``.

``ApiKeyVerifier`` implements the ``mcp`` SDK's ``TokenVerifier``: ``/mcp`` authenticates with
the SDK's ``BearerAuthBackend`` on it, and the API's ``caller`` dependency asks the same
verifier. Without keys every caller is the one local user, an admin.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from mcp.server.auth.provider import AccessToken

from aptix.api.errors import ApiError
from aptix.quotas import Refusal
from aptix.settings import KeyOwner
from aptix.telemetry import NO_TRACING, ORG_ATTRIBUTE, Tracing

__all__ = [
    "BEARER_CHALLENGE",
    "LOCAL_CALLER",
    "ApiKeyVerifier",
    "Caller",
    "bearer_scheme",
    "caller",
    "caller_from_token",
    "key_id",
    "refused",
    "unauthorized",
]

#: The ``WWW-Authenticate`` value of every 401: a bearer key, not an interactive OAuth flow.
BEARER_CHALLENGE = 'Bearer realm="aptix"'


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: sessions are scoped to ``org`` and ``user``; ``role`` gates authoring."""

    org: str
    user: str
    role: str = "user"
    #: Names the API key in usage counts and limits without revealing it (``local``: no keys).
    key_id: str = "local"


LOCAL_CALLER = Caller("local", "local", "admin")


def key_id(key: str) -> str:
    """A short, stable name of an API key: the start of its SHA-256, never the key."""
    return hashlib.sha256(key.encode()).hexdigest()[:12]


class ApiKeyVerifier:
    """Maps a bearer key onto its caller; an ``mcp`` ``TokenVerifier`` as well."""

    def __init__(self, keys: Mapping[str, KeyOwner]) -> None:
        self._keys = [(key.encode(), owner, key_id(key)) for key, owner in keys.items()]

    @property
    def enabled(self) -> bool:
        """True when keys are configured (otherwise every caller is the local admin)."""
        return bool(self._keys)

    def caller_for(self, token: str) -> Caller | None:
        """The caller a key belongs to, or None (every key is compared in constant time)."""
        presented = token.strip().encode()
        found: Caller | None = None
        for key, owner, name in self._keys:
            if hmac.compare_digest(key, presented):
                found = Caller(owner.org, owner.user, owner.role, name)
        return found

    async def verify_token(self, token: str) -> AccessToken | None:
        """``TokenVerifier``: the key's access token, its caller in the claims."""
        found = self.caller_for(token)
        if found is None:
            return None
        return AccessToken(
            token=token,
            client_id=f"{found.org}:{found.user}",
            scopes=[found.role],
            claims={
                "org": found.org,
                "user": found.user,
                "role": found.role,
                "keyId": found.key_id,
            },
        )


def caller_from_token(token: AccessToken | None) -> Caller | None:
    """The caller recorded in an access token made by :class:`ApiKeyVerifier`."""
    claims = token.claims if token is not None else None
    if not claims:
        return None
    return Caller(
        str(claims["org"]),
        str(claims["user"]),
        str(claims["role"]),
        str(claims.get("keyId", "local")),
    )


def unauthorized(message: str) -> ApiError:
    """A 401 with the bearer challenge, so clients ask for a key, not an OAuth login."""
    return ApiError(401, message, headers={"WWW-Authenticate": BEARER_CHALLENGE})


bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key from APTIX_API_KEYS (not needed when the server has no keys).",
)


async def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Caller:
    """FastAPI dependency: the authenticated caller (401 on a missing or wrong key)."""
    verifier: ApiKeyVerifier = request.app.state.key_verifier
    if not verifier.enabled:
        found: Caller | None = LOCAL_CALLER
    elif credentials is None:
        raise unauthorized("Send an API key as 'Authorization: Bearer <key>'.")
    else:
        found = verifier.caller_for(credentials.credentials)
    if found is None:
        raise unauthorized("The API key is not valid.")
    # The org on the request's span (its name; the key stays out of every trace).
    tracing: Tracing = getattr(request.app.state, "tracing", NO_TRACING)
    tracing.annotate({ORG_ATTRIBUTE: found.org})
    runtime = getattr(request.app.state, "runtime", None)
    if runtime is not None and runtime.quotas.rate_limit is not None:
        refusal = await runtime.quotas.request(found.key_id)
        if refusal is not None:
            raise refused(refusal)
    return found


def refused(refusal: Refusal) -> ApiError:
    """A limit's refusal as the error envelope: 429 (503 when limits cannot be checked)."""
    return ApiError(refusal.status, refusal.message, refusal.code, headers=refusal.headers())
