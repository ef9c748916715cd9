"""``Refusal``: why a limit stops a request, with the headers its answer carries."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Refusal"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why a request may not go on, with what its 429 (or 503) answer carries."""

    message: str
    code: str
    reset_seconds: int
    status: int = 429
    #: The limit that refused, its ``RateLimit-Policy`` name; None when no limit could be
    #: checked (Redis is down), so no quota is known.
    policy: str | None = None
    quota: int = 0
    remaining: int = 0
    window_seconds: int | None = None
    unit: str | None = None

    def headers(self) -> dict[str, str]:
        """``Retry-After``, and the IETF ``RateLimit`` / ``RateLimit-Policy`` of its limit."""
        if self.policy is None:
            return {"Retry-After": str(self.reset_seconds)}
        policy = f'"{self.policy}";q={self.quota}'
        if self.window_seconds is not None:
            policy += f";w={self.window_seconds}"
        if self.unit is not None:
            policy += f';qu="{self.unit}"'
        return {
            "Retry-After": str(self.reset_seconds),
            "RateLimit": f'"{self.policy}";r={self.remaining};t={self.reset_seconds}',
            "RateLimit-Policy": policy,
        }
