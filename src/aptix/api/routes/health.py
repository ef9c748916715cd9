"""``/healthz`` and ``/metrics``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from aptix.api.errors import ApiError
from aptix.api.json_body import JsonBodyRoute
from aptix.api.outage import RETRY_AFTER_SECONDS
from aptix.api.responses import Health
from aptix.api.routes.deps import RuntimeDep

router = APIRouter(tags=["operations"], route_class=JsonBodyRoute)


@router.get("/healthz", response_model=Health)
async def healthz(runtime: RuntimeDep) -> dict[str, Any]:
    """Liveness, database reachability and whether the limits reach Redis."""
    try:
        await runtime.database.ping()
    except Exception as exc:
        raise ApiError(
            503,
            f"The database is not reachable: {type(exc).__name__}.",
            "database_unavailable",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        ) from exc
    quotas = runtime.quotas
    return {
        "status": "ok",
        "tools": len(runtime.registry.registered_tools),
        "modelConfigured": runtime.settings.model_configured,
        # Redis down is reported, not failed: a restart would not bring it back, and in
        # ``open`` mode the requests are served.
        "limits": {
            "store": "redis" if quotas.shared else "memory",
            "redisUp": quotas.redis_up,
            "whenRedisDown": runtime.settings.limits_when_redis_down,
        },
    }


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus metrics of this process."""
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
