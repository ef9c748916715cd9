"""``GET /v1/usage``: the model tokens an org spent, per key, with its limits (admins only)."""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Query

from aptix.api.errors import ApiError
from aptix.api.json_body import JsonBodyRoute
from aptix.api.routes.deps import CallerDep, RuntimeDep
from aptix.api.schemas import ErrorBody
from aptix.quotas.usage import today

router = APIRouter(tags=["usage"], route_class=JsonBodyRoute)

# [0-9], not \d: \d also matches other scripts' digits (Arabic-Indic, Devanagari, ...).
_DAY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_DAY = re.compile(_DAY_PATTERN)
_DAY_FORMAT = "write a UTC day as YYYY-MM-DD in ASCII digits, e.g. 2024-02-29"


def _check_day(day: str) -> None:
    """Raise a 422 unless ``day`` is a calendar day written ``YYYY-MM-DD``."""
    if not _DAY.fullmatch(day):
        raise ApiError(422, f"'day' is not a day: {_DAY_FORMAT}.")
    try:
        date.fromisoformat(day)
    except ValueError as exc:
        # Only ASCII digits and dashes get here, so the value is safe to quote.
        raise ApiError(422, f"'day' {day} is not a calendar day ({exc}); {_DAY_FORMAT}.") from None


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
            # Documented, not enforced by FastAPI: the route's own check answers one readable
            # message for a malformed day and for one that is not in the calendar alike.
            json_schema_extra={"format": "date", "pattern": _DAY_PATTERN},
        ),
    ] = None,
) -> Any:
    """Model tokens and calls of the caller's org on one UTC day, per API key."""
    if caller.role != "admin":
        raise ApiError(403, "Usage is shown to the org's admins only (an 'admin' API key).")
    when = today() if day is None else day
    _check_day(when)
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
