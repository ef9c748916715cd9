"""``GET /v1/usage``: the model tokens an org spent, per key, with its limits (admins only)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Query

from aptix.api.errors import ApiError
from aptix.api.routes.deps import CallerDep, RuntimeDep
from aptix.api.schemas import ErrorBody
from aptix.quotas.usage import today

router = APIRouter(tags=["usage"])

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@router.get(
    "/v1/usage",
    responses={403: {"model": ErrorBody, "description": "The caller's key is not an admin's."}},
)
async def get_usage(
    runtime: RuntimeDep,
    caller: CallerDep,
    day: Annotated[
        str | None,
        Query(
            description="UTC day as YYYY-MM-DD (default: today).",
            pattern=r"^\d{4}-\d{2}-\d{2}$",
        ),
    ] = None,
) -> Any:
    """Model tokens and calls of the caller's org on one UTC day, per API key."""
    if caller.role != "admin":
        raise ApiError(403, "Usage is shown to the org's admins only (an 'admin' API key).")
    when = day or today()
    if not _DAY.fullmatch(when):
        raise ApiError(422, "'day' must be a UTC day written YYYY-MM-DD.")
    quotas = runtime.quotas
    try:
        counts = await quotas.usage.read(caller.org, when)
    except Exception as exc:  # Redis gone: the counts are not known, which is not a 500
        raise ApiError(
            503,
            f"Usage counts cannot be read right now ({type(exc).__name__}); retry shortly.",
            "limits_unavailable",
            headers={"Retry-After": "5"},
        ) from None
    return {
        "org": caller.org,
        "day": when,
        **counts,
        "limits": {
            "rateLimit": quotas.rate_limit,
            "maxConcurrentTurns": quotas.max_concurrent_turns,
            "tokenBudget": await quotas.budget_state(caller.org),
            "shared": quotas.shared,
        },
    }
